//! Files in and out: llama-bench's own output read as trials, and a
//! study's trials downloaded as CSV.

use tunebook_views::types::{Metric, TrialView};

use crate::common::{self, get_json, http};

#[tokio::test]
async fn llama_bench_output_becomes_trials() {
    let _engine = common::require_demo_engine();
    let root = common::repo_root();
    let out = std::process::Command::new(root.join(".tools/engine-bin/llama-bench"))
        .args([
            "-m",
            ".tools/models/tiny-llama.gguf",
            "-p",
            "16",
            "-n",
            "8",
            "-t",
            "1,2",
            "-d",
            "0,32",
            "-r",
            "2",
            "-o",
            "jsonl",
        ])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let trials = tunebook::import::parse_import(&text, false, "bench").unwrap();
    assert_eq!(trials.len(), 2, "one trial per thread count, prefill and decode merged");
    for (t, threads) in trials.iter().zip(["1", "2"]) {
        assert_eq!(t.settings["threads"], threads);
        assert_eq!(t.model, "tiny-llama");
        assert!(
            t.metrics.get(Metric::PrefillTps).unwrap() > 0.0
                && t.metrics.get(Metric::DecodeTps).unwrap() > 0.0,
            "{t:?}"
        );
        assert_eq!((t.prompt_tokens, t.tokens_generated), (Some(16), Some(8)));
    }
    // llama-bench's JSON array form reads the same.
    let array = format!(
        "[{}]",
        text.lines().filter(|l| !l.trim().is_empty()).collect::<Vec<_>>().join(",")
    );
    assert_eq!(tunebook::import::parse_import(&array, false, "bench").unwrap().len(), 2);
    // Depth rows are kept beside, not over, the decode at depth 0; each
    // test's spread is kept too.
    for t in &trials {
        let note = t.note.as_deref().unwrap();
        assert!(note.contains("tg8 @ depth 32: ") && note.contains("pp16: "), "{note}");
        assert!(note.contains(" ± "), "{note}");
        let at_0: f64 =
            note.split("tg8: ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
        assert!(
            (at_0 - t.metrics.get(Metric::DecodeTps).unwrap()).abs() < 0.01,
            "{note} vs {:?}",
            t.metrics.get(Metric::DecodeTps)
        );
        assert!(!t.settings.contains_key("n_gpu_layers"), "-1 is the engine's choice");
        assert!(!t.settings.contains_key("flash_attn"), "-1 is auto");
    }
    // And llama-bench's CSV reads to the same trials.
    let csv = std::process::Command::new(root.join(".tools/engine-bin/llama-bench"))
        .args(["-m", ".tools/models/tiny-llama.gguf", "-p", "16", "-n", "8", "-t", "1,2"])
        .args(["-d", "0,32", "-r", "1", "-o", "csv"])
        .current_dir(&root)
        .output()
        .unwrap();
    let text = String::from_utf8(csv.stdout).unwrap();
    let from_csv = tunebook::import::parse_import(&text, true, "bench").unwrap();
    assert_eq!(from_csv.len(), 2);
    for (a, b) in from_csv.iter().zip(&trials) {
        assert_eq!((&a.settings, &a.model), (&b.settings, &b.model));
        assert!(
            a.metrics.get(Metric::DecodeTps).unwrap() > 0.0
                && a.note.as_deref().unwrap().contains("@ depth 32")
        );
    }
}

/// The study page's download: every trial a row, every setting a column,
/// the same rows the API lists.
#[tokio::test]
async fn a_studys_trials_download_as_csv() {
    let (server, study) = common::planted_server(|_| {}).await;
    let r =
        http().get(server.url(&format!("/api/studies/{study}/trials.csv"))).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/csv; charset=utf-8");
    let file = r.headers()["content-disposition"].to_str().unwrap().to_string();
    assert_eq!(file, format!("attachment; filename=\"study-{study}-trials.csv\""));
    let text = r.text().await.unwrap();
    let listed: Vec<TrialView> = get_json(&server, &format!("/api/studies/{study}/trials")).await;
    let mut rows = csv::Reader::from_reader(text.as_bytes());
    let header = rows.headers().unwrap().clone();
    let ids: Vec<i64> = rows.records().map(|r| r.unwrap()[0].parse().unwrap()).collect();
    let mut expected: Vec<i64> = listed.iter().map(|t| t.id).collect();
    expected.sort();
    assert_eq!(ids, expected);
    for name in listed[0].settings.keys() {
        assert!(header.iter().any(|h| h == format!("setting.{name}")), "{name}: {header:?}");
    }
    let r = http().get(server.url("/api/studies/999999/trials.csv")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    server.stop().await;
}
