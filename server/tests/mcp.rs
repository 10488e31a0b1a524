//! `tunebook mcp` spoken to as an agent's client would: JSON-RPC lines on
//! its stdin and stdout, against a server running the fake engine. It
//! lists its tools, runs a study from creation to findings, and refuses
//! what the JSON API refuses, and what is out of its own bounds.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::common;

/// A client's end of `tunebook mcp`.
struct Client {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: i64,
}

impl Client {
    fn start(server: &str) -> Client {
        Client::start_with(server, None)
    }

    fn start_with(server: &str, password: Option<&str>) -> Client {
        let mut command = Command::new(env!("CARGO_BIN_EXE_tunebook"));
        command.args(["mcp", "--server", server]).env_remove("TUNEBOOK_PASSWORD");
        if let Some(password) = password {
            command.env("TUNEBOOK_PASSWORD", password);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("tunebook mcp starts");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Client { child, stdin, lines, next_id: 1 }
    }

    async fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        self.stdin.write_all(&line).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// Sends a request and reads lines until its answer (the whole
    /// JSON-RPC response: `result` or `error`).
    async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })).await;
        let read = async {
            loop {
                let line = self.lines.next_line().await.unwrap().expect("an answer before EOF");
                let message: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout carries JSON-RPC only: {e}: {line}"));
                if message["id"] == id {
                    return message;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(200), read).await.expect("an answer in time")
    }

    /// Calls a tool: its text, and whether it is an error.
    async fn call(&mut self, tool: &str, arguments: Value) -> (String, bool) {
        let answer =
            self.request("tools/call", json!({ "name": tool, "arguments": arguments })).await;
        let result = &answer["result"];
        assert!(result.is_object(), "{tool}: {answer}");
        let text = result["content"][0]["text"].as_str().expect("text content").to_string();
        (text, result["isError"] == true)
    }

    async fn initialize(&mut self) -> Value {
        let init = self
            .request(
                "initialize",
                json!({
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": { "name": "test agent", "version": "1" }
                }),
            )
            .await;
        self.send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" })).await;
        init
    }

    async fn call_json(&mut self, tool: &str, arguments: Value) -> Value {
        let (text, error) = self.call(tool, arguments).await;
        assert!(!error, "{tool}: {text}");
        serde_json::from_str(&text).unwrap()
    }
}

fn study() -> Value {
    common::fake_grid_study("by an agent", &[128, 256, 512])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_runs_a_study_through_mcp_within_the_apis_bounds() {
    let (server, _profiles) = common::on_fake_engine("fake", &[]).await;
    let mut client = Client::start(&server.url(""));

    let init = client.initialize().await;
    assert_eq!(init["result"]["serverInfo"]["name"], "tunebook", "{init}");
    assert!(init["result"]["capabilities"]["tools"].is_object(), "{init}");

    let tools = client.request("tools/list", json!({})).await;
    let list = tools["result"]["tools"].as_array().expect("tools");
    let names: Vec<&str> = list.iter().filter_map(|t| t["name"].as_str()).collect();
    for name in [
        "list_profiles",
        "check_study",
        "create_study",
        "list_studies",
        "get_study",
        "wait_for_study",
        "list_trials",
        "get_trial",
        "get_findings",
        "control_study",
    ] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    // An agent is told what a study holds: the schema of a study file.
    let create = list.iter().find(|t| t["name"] == "create_study").unwrap();
    let schema = create["inputSchema"].to_string();
    for field in ["objectives", "strategy", "budget", "space"] {
        assert!(schema.contains(field), "{field} in {schema}");
    }

    let profiles = client.call_json("list_profiles", json!({})).await;
    assert!(profiles.as_array().unwrap().iter().any(|p| p["name"] == "fake"), "{profiles}");

    // The API's own checks, word for word: an unknown field, an unknown model.
    let mut bad = study();
    bad["bogus"] = json!(1);
    let (why, error) = client.call("check_study", json!({ "study": bad })).await;
    assert!(error && why.starts_with("400") && why.contains("bogus"), "{why}");
    let mut bad = study();
    bad["model"] = json!("no-such-model");
    let (why, error) = client.call("create_study", json!({ "study": bad })).await;
    assert!(error && why.contains("no-such-model"), "{why}");

    let checked = client.call_json("check_study", json!({ "study": study() })).await;
    assert!(checked.is_object(), "{checked}");
    let created = client.call_json("create_study", json!({ "study": study() })).await;
    let id = created["id"].as_i64().expect("the stored study's id");

    let ended = client.call_json("wait_for_study", json!({ "study_id": id, "seconds": 180 })).await;
    assert_eq!(ended["state"], "done", "{ended}");

    let page = client.call_json("list_trials", json!({ "study_id": id, "limit": 2 })).await;
    let total = page["total"].as_u64().unwrap();
    assert!(total >= 3, "{page}");
    let trials = page["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 2);
    let rest =
        client.call_json("list_trials", json!({ "study_id": id, "offset": 2, "limit": 200 })).await;
    assert_eq!(rest["trials"].as_array().unwrap().len() as u64, total - 2);
    assert!(trials[0]["id"].as_i64() < trials[1]["id"].as_i64(), "in order made");

    let trial_id = trials[0]["id"].as_i64().unwrap();
    let trial = client.call_json("get_trial", json!({ "trial_id": trial_id })).await;
    assert_eq!(trial["id"], trial_id, "{trial}");

    let findings = client.call_json("get_findings", json!({ "study_id": id })).await;
    assert!(findings["markdown"].as_str().is_some_and(|m| !m.is_empty()), "{findings}");
    assert!(findings.get("html").is_none(), "the markdown only");

    // Its own bounds, and the API's answer to what does not exist.
    let (why, error) = client.call("list_trials", json!({ "study_id": id, "limit": 5000 })).await;
    assert!(error && why.contains("limit"), "{why}");
    let (why, error) = client.call("wait_for_study", json!({ "study_id": id, "seconds": 0 })).await;
    assert!(error && why.contains("seconds"), "{why}");
    let (why, error) = client.call("get_study", json!({ "study_id": id + 1000 })).await;
    assert!(error && why.starts_with("404"), "{why}");
    // An action off the list is not a tool call at all.
    let answer = client
        .request(
            "tools/call",
            json!({ "name": "control_study", "arguments": { "study_id": id, "action": "explode" } }),
        )
        .await;
    assert!(answer["error"].is_object() || answer["result"]["isError"] == true, "{answer}");

    // A study stopped while it runs.
    let mut longer = study();
    longer["name"] = json!("stopped by an agent");
    longer["space"] = json!({ "ubatch_size": [64, 128, 256, 512] });
    let running = client.call_json("create_study", json!({ "study": longer })).await;
    let running_id = running["id"].as_i64().unwrap();
    let stopped = client
        .call_json("control_study", json!({ "study_id": running_id, "action": "stop" }))
        .await;
    assert_eq!(stopped["state"], "stopped", "{stopped}");
    let again = client.call_json("get_study", json!({ "study_id": running_id })).await;
    assert_eq!(again["state"], "stopped", "{again}");

    // A password given to a server that has none is not needed, not an error.
    let mut spare = Client::start_with(&server.url(""), Some("not needed"));
    spare.initialize().await;
    let listed = spare.call_json("list_studies", json!({})).await;
    assert_eq!(listed.as_array().unwrap().len(), 2, "{listed}");
    drop(spare);

    // Closing its stdin ends it.
    drop(client.stdin);
    let status = tokio::time::timeout(Duration::from_secs(20), client.child.wait())
        .await
        .expect("it ends when its input closes")
        .unwrap();
    assert!(status.success(), "{status}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_server_it_says_where_it_looked() {
    // A port nothing listens on: bound, then let go.
    let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tunebook"))
        .args(["mcp", "--server", &format!("http://{addr}")])
        .env_remove("TUNEBOOK_PASSWORD")
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("tunebook serve") && err.contains(&addr.to_string()), "{err}");
    assert!(out.stdout.is_empty(), "nothing on the protocol's stream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_password_it_logs_in_with_the_servers_own() {
    let (server, _study) =
        common::planted_server(|s| s.password = Some("correct horse".into())).await;
    let mut client = Client::start_with(&server.url(""), Some("correct horse"));
    client.initialize().await;
    let studies = client.call_json("list_studies", json!({})).await;
    assert!(!studies.as_array().unwrap().is_empty(), "{studies}");
    drop(client);

    let out = Command::new(env!("CARGO_BIN_EXE_tunebook"))
        .args(["mcp", "--server", &server.url("")])
        .env("TUNEBOOK_PASSWORD", "wrong")
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("did not take the password"), "{err}");
    server.stop().await;
}
