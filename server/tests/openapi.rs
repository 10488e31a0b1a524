//! The JSON API's OpenAPI description (`/api/openapi.json`): it names the
//! API's routes with their parameters and bodies, and schemathesis, driving
//! every route from it with generated inputs (valid and not), gets no
//! server error and no answer the description does not allow.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::common;
use common::{TestServer, get_json, http, repo_root};

/// The project's schemathesis (the test command sets it up).
fn schemathesis() -> std::path::PathBuf {
    let path = std::env::var_os("TUNEBOOK_SCHEMATHESIS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".tools/fuzz-venv/bin/schemathesis"));
    assert!(path.exists(), "no schemathesis: run scripts/setup-fuzz-venv.sh");
    path
}

/// What every answer is held to: no 5xx, and its status, its media type
/// and its body each one the description gives for it.
const CHECKS: &str = "not_a_server_error,status_code_conformance,content_type_conformance,\
                      response_schema_conformance";

/// Every `{name}` of a path.
fn segments(path: &str) -> BTreeSet<String> {
    path.split('/')
        .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .map(str::to_string)
        .collect()
}

/// What the fuzzing finds to act on: a study run to its end, a report of
/// it with a link, and a worker. Their ids, the link's token and the
/// worker's name go into schemathesis's dictionaries, so that half the
/// generated requests reach something that exists.
async fn seed(server: &TestServer) -> String {
    let study =
        common::run_study(server, &common::fake_grid_study("fuzzed", &[128, 256, 512])).await;
    assert_eq!(study["state"], "done", "{study}");
    let id = study["id"].as_i64().unwrap();
    let path = format!("/api/studies/{id}");
    let trials: Vec<Value> = get_json(server, &format!("{path}/trials")).await;
    let report: Value = post(server, &format!("{path}/reports"), &json!({})).await;
    let report_id = report["id"].as_i64().unwrap();
    let link: Value = post(server, &format!("/api/reports/{report_id}/shares"), &json!({})).await;
    let worker: Value = post(server, "/api/workers", &json!({ "name": "fuzz-box" })).await;
    let mut ids: Vec<i64> = trials.iter().filter_map(|t| t["id"].as_i64()).collect();
    ids.extend([id, report_id]);
    format!(
        "[dictionaries.ids]\nvalues = {ids:?}\n\
         [dictionaries.tokens]\nvalues = [{}]\n\
         [dictionaries.workers]\nvalues = [{}]\n\
         [parameters]\n\
         \"path.id\" = {{ dictionary = \"ids\", probability = 0.5 }}\n\
         \"path.token\" = {{ dictionary = \"tokens\", probability = 0.5 }}\n\
         \"path.name\" = {{ dictionary = \"workers\", probability = 0.5 }}\n",
        link["token"], worker["name"],
    )
}

async fn post(server: &TestServer, path: &str, body: &Value) -> Value {
    let r = http().post(server.url(path)).json(body).send().await.unwrap();
    assert!(r.status().is_success(), "{path}: {}", r.text().await.unwrap());
    r.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_description_covers_the_api_and_fuzzing_it_finds_no_server_error() {
    let (server, _profiles) = common::on_fake_engine("fake", &[]).await;
    // Its config, and the folder it runs in (it keeps a cache there).
    let work = tempfile::tempdir().unwrap();
    let config = work.path().join("schemathesis.toml");
    std::fs::write(&config, seed(&server).await).unwrap();
    let doc: Value = get_json(&server, "/api/openapi.json").await;
    assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.1")), "{}", doc["openapi"]);
    let paths = doc["paths"].as_object().expect("paths");
    // What a client needs most is described, with its body.
    for (path, method) in [
        ("/api/studies", "post"),
        ("/api/studies/check", "post"),
        ("/api/studies/{id}/findings", "get"),
        ("/api/trials/{id}", "get"),
        ("/api/trials/{id}/handoff/{format}", "get"),
        ("/api/reports/{id}", "put"),
        ("/api/worker/trials/{id}/result", "post"),
    ] {
        assert!(paths.get(path).and_then(|p| p.get(method)).is_some(), "{method} {path}");
    }
    let study = &paths["/api/studies"]["post"]["requestBody"]["content"]["application/json"];
    assert!(study["schema"]["$ref"].as_str().is_some_and(|r| r.ends_with("/StudyDef")), "{study}");
    // Every parameter of every path is named, and nothing more.
    for (path, item) in paths {
        for (method, op) in item.as_object().unwrap() {
            let named: BTreeSet<String> = op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["in"] == "path")
                .filter_map(|p| p["name"].as_str().map(str::to_string))
                .collect();
            assert_eq!(named, segments(path), "{method} {path}");
        }
    }

    // Every operation, examples and generated inputs both valid and not;
    // any 5xx, or an answer off its description, fails the run.
    let out = tokio::process::Command::new(schemathesis())
        .current_dir(work.path())
        .arg("--config-file")
        .arg(&config)
        .arg("run")
        .arg(server.url("/api/openapi.json"))
        .args(["--checks", CHECKS])
        .args(["--max-examples", "15", "--request-timeout", "30", "--seed", "1"])
        .args(["--mode", "all", "--phases", "examples,coverage,fuzzing"])
        .args(["--generation-database", "none"])
        .env("NO_COLOR", "1")
        .output()
        .await
        .unwrap();
    let report = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "schemathesis found failures:\n{report}");
    eprintln!("{report}");
    // It did drive the API: an operation per described method.
    let operations: usize = paths.values().map(|p| p.as_object().unwrap().len()).sum();
    assert!(operations >= 37, "{operations} operations");
    assert!(report.contains(&format!("{operations} selected")), "{report}");
    server.stop().await;
}
