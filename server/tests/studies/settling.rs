//! "Settle this" on the real engine: a study cut short leaves its findings
//! open; asking to settle one queues the runs that would (the baseline
//! interleaved with the baseline changed in that setting alone), on disk
//! before the answer, and the ended study runs them and ends again. What
//! cannot be settled, or is not open, is refused with why.

use serde_json::{Value, json};
use tunebook::db::studies::StudyState;
use tunebook_views::types::{TrialState, TrialView};

use super::{post, run_to_the_end, wait_state};
use crate::common::{TestServer, get_json};

#[tokio::test]
async fn a_finding_left_open_is_settled_by_the_runs_it_names() {
    let _engine = crate::common::require_demo_engine();
    let server = TestServer::start().await;
    let (row, before) = run_to_the_end(&server, &crate::common::cut_short_study()).await;
    assert_eq!(before.len(), 3);
    let path = format!("/api/studies/{}/findings", row.id);
    let written: Value = get_json(&server, &path).await;
    let open = written["open"].as_array().expect("the open findings");
    let q = open
        .iter()
        .find(|q| q["setting"] == "ubatch_size" && q["metric"] == "peak_rss_bytes")
        .unwrap_or_else(|| panic!("ubatch_size is open on memory: {written:#}"));
    let runs = q["runs"].as_u64().expect("runs can settle it") as usize;
    assert_eq!(runs, 4, "two rounds of the baseline and ubatch_size = 128: {q}");

    // Refused, with why, and nothing queued.
    let settle = format!("/api/studies/{}/settle", row.id);
    for (body, why) in [
        (json!({ "setting": "ubatch_size", "metric": "speed" }), "unknown metric `speed`"),
        (json!({ "setting": "ctx_size", "metric": "peak_rss_bytes" }), "nothing to settle"),
        (
            // Memory is no objective here: nothing of it is judged at the pick.
            json!({ "setting": "ubatch_size", "metric": "peak_rss_bytes", "at_pick": true }),
            "on peak RSS (bytes) at the pick: nothing to settle",
        ),
        (json!({ "setting": "x".repeat(300), "metric": "decode_tps" }), "over 200 characters"),
        (
            json!({ "setting": "threads", "metric": "decode_tps", "path": "/bin/sh" }),
            "unknown field",
        ),
    ] {
        let answer = post(&server, &settle, &body).await;
        assert_eq!(answer.status(), 400, "{body}");
        let text = answer.text().await.unwrap();
        assert!(text.contains(why), "{body}: {text}");
    }
    let unchanged: Vec<TrialView> =
        get_json(&server, &format!("/api/studies/{}/trials", row.id)).await;
    assert_eq!(unchanged.len(), 3, "a refused request queues nothing");

    let answer =
        post(&server, &settle, &json!({ "setting": "ubatch_size", "metric": "peak_rss_bytes" }))
            .await;
    assert_eq!(answer.status(), 202);
    let queued: Value = answer.json().await.unwrap();
    let ids: Vec<i64> =
        queued["trials"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
    assert_eq!(ids.len(), runs);

    // The ended study runs them, and ends again.
    let again = wait_state(&server, row.id, |s| s.is_final()).await;
    assert_eq!(again.state, StudyState::Done, "{again:?}");
    let after: Vec<TrialView> = get_json(&server, &format!("/api/studies/{}/trials", row.id)).await;
    let settling: Vec<&TrialView> = after.iter().filter(|t| ids.contains(&t.id)).collect();
    assert_eq!(settling.len(), runs);
    let base = &before[0].settings;
    for (k, t) in settling.iter().enumerate() {
        assert_eq!(t.state, TrialState::Done, "{t:?}");
        assert_eq!(t.role.map(|r| r.as_str()), Some("settle"));
        assert!(t.note.as_deref().unwrap().starts_with("settle `ubatch_size` on peak_rss_bytes"));
        // Interleaved: the baseline, then the baseline with ubatch_size = 128.
        let mut want = base.clone();
        if k % 2 == 1 {
            want.insert("ubatch_size".into(), "128".into());
        }
        assert_eq!(&t.settings, &want, "run {k}");
    }
    assert_eq!(after.len(), 3 + runs, "the search did not go on past its budget");

    // Its findings now rest on the settling runs too: what held it open
    // before (too few trials, or ubatch_size moving only with threads) no
    // longer does.
    let written: Value = get_json(&server, &path).await;
    let still = written["open"].as_array().unwrap().iter().find(|o| {
        o["setting"] == "ubatch_size" && o["metric"] == "peak_rss_bytes" && o["why"] == q["why"]
    });
    assert!(still.is_none(), "still open for the same reason: {still:?}\n{}", written["markdown"]);
}
