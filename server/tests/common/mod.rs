//! Helpers shared by the integration tests: a Tunebook server on
//! 127.0.0.1:0 over the repository's demo profile, and polling with deadlines.

#![allow(dead_code)]

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tunebook::Settings;
use tunebook_views::types::TrialView;

pub mod postgres;
pub mod queue_load;
pub mod synthetic;

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The fake engine binary (built with the workspace's tests).
pub fn fake_engine() -> PathBuf {
    let path =
        std::path::Path::new(env!("CARGO_BIN_EXE_tunebook")).with_file_name("tunebook-fake-engine");
    assert!(path.is_file(), "{} is missing: run `cargo test --workspace`", path.display());
    path
}

/// Writes a profile `name` running the fake engine with `args`, and a
/// placeholder model `m`, into `dir`.
pub fn write_fake_profile(dir: &std::path::Path, name: &str, args: &[&str]) {
    let model = dir.join("model.gguf");
    std::fs::write(&model, b"placeholder").unwrap();
    let profile = format!(
        "name = {name:?}\nkind = \"llama-server\"\nbinary = {:?}\nargs = {args:?}\n\
         [[models]]\nname = \"m\"\npath = {:?}\n",
        fake_engine().display().to_string(),
        model.display().to_string()
    );
    std::fs::write(dir.join(format!("{name}.toml")), profile).unwrap();
}

/// A server whose only profile, `name`, runs the fake engine with `args`;
/// the profiles' folder is kept alive with it (more profiles may go there).
pub async fn on_fake_engine(name: &str, args: &[&str]) -> (TestServer, tempfile::TempDir) {
    let data = tempfile::tempdir().unwrap();
    let profiles = tempfile::tempdir().unwrap();
    write_fake_profile(profiles.path(), name, args);
    let mut settings = TestServer::settings(data.path().to_path_buf());
    settings.profiles_dir = profiles.path().to_path_buf();
    (TestServer::start_with(settings, data).await, profiles)
}

/// A test's turn with the real engine: see [`require_demo_engine`].
#[must_use = "the turn ends when it is dropped: bind it for the whole test"]
pub struct EngineTurn(#[allow(dead_code)] std::sync::MutexGuard<'static, ()>);

/// Fails with a clear message when the demo engine has not been set up;
/// otherwise waits for this test's turn with it. The tests that start
/// llama-server take turns while the others run beside them: each engine
/// spins its threads at every step, and two engines on two cores spend
/// most of their time waiting for each other's threads (the engine suite
/// took 355 s of wall time and 577 s of CPU two at a time, 149 s and 157 s
/// one at a time).
pub fn require_demo_engine() -> EngineTurn {
    let root = repo_root();
    for path in [".tools/engine-bin/llama-server", ".tools/models/tiny-llama.gguf"] {
        assert!(
            root.join(path).is_file(),
            "{path} is missing: run scripts/test.sh (or scripts/setup.sh) first"
        );
    }
    static ENGINE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    // A test that failed holding it hands it on all the same.
    EngineTurn(ENGINE.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
}

/// A running server and its temporary data folder.
pub struct TestServer {
    pub addr: SocketAddr,
    pub data: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<tunebook::Result<()>>>,
}

impl TestServer {
    /// Starts a server with SQLite in a fresh folder and the demo profiles.
    pub async fn start() -> Self {
        let data = tempfile::tempdir().unwrap();
        let settings = Self::settings(data.path().to_path_buf());
        Self::start_with(settings, data).await
    }

    /// A server whose demo profile is a fork's (see [`fork_profiles`]).
    pub async fn start_forked() -> Self {
        let data = tempfile::tempdir().unwrap();
        let mut settings = Self::settings(data.path().to_path_buf());
        settings.profiles_dir = fork_profiles(data.path());
        Self::start_with(settings, data).await
    }

    /// Default test settings for a data folder.
    pub fn settings(data: PathBuf) -> Settings {
        let mut s = Settings::with_data_dir(data);
        s.profiles_dir = repo_root().join("profiles");
        s.site_root = repo_root().join("target/site");
        s.load_timeout = Duration::from_secs(60);
        // Measured by `machine`'s own test; fixed here to keep start-up quick.
        s.bandwidth = Some(20e9);
        // A worker's request for work that finds none is answered with none
        // after this long: the tests that ask with nothing to take wait it.
        s.claim_wait = Duration::from_secs(1);
        s
    }

    pub async fn start_with(settings: Settings, data: tempfile::TempDir) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(tunebook::launch(settings, listener, async move {
            let _ = rx.await;
        }));
        Self { addr, data, stop: Some(tx), task: Some(task) }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Stops the server and waits until it (and its runner) has ended.
    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        let result = tokio::time::timeout(Duration::from_secs(30), self.task.take().unwrap())
            .await
            .expect("server stops within 30 s");
        result.unwrap().unwrap();
    }
}

/// A server over a fresh data folder that holds the planted study (see
/// [`synthetic::planted_study`]), its settings changed by `adjust` first;
/// the server and the study's id.
pub async fn planted_server(adjust: impl FnOnce(&mut Settings)) -> (TestServer, i64) {
    let data = tempfile::tempdir().unwrap();
    let mut settings = TestServer::settings(data.path().to_path_buf());
    adjust(&mut settings);
    let db = tunebook::db::Db::connect(&settings.database_url).await.unwrap();
    let study = synthetic::planted_study(&db).await.unwrap();
    db.pool.close().await;
    (TestServer::start_with(settings, data).await, study)
}

/// A client that never goes through a proxy.
pub fn http() -> reqwest::Client {
    engine_bridge::http::client().no_proxy().build().unwrap()
}

/// GETs `path` from the server and decodes its JSON.
pub async fn get_json<T: serde::de::DeserializeOwned>(server: &TestServer, path: &str) -> T {
    http().get(server.url(path)).send().await.unwrap().json().await.unwrap()
}

/// Polls `check` until it returns `Some`, or panics after `limit`.
pub async fn eventually<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until a trial reaches done or failed.
pub async fn wait_final(server: &TestServer, id: i64) -> TrialView {
    let client = http();
    eventually(Duration::from_secs(120), &format!("trial {id} to finish"), || {
        let client = client.clone();
        let url = server.url(&format!("/api/trials/{id}"));
        async move {
            let t: TrialView = client.get(url).send().await.ok()?.json().await.ok()?;
            t.state.is_final().then_some(t)
        }
    })
    .await
}

/// A small grid study on a fake-engine profile named `fake` (as
/// [`on_fake_engine`] makes): the micro-batch over `ubatch`, decode speed
/// as the objective, a quick speed probe, nothing re-measured.
pub fn fake_grid_study(name: &str, ubatch: &[u32]) -> serde_json::Value {
    serde_json::json!({
        "name": name,
        "profile": "fake",
        "model": "m",
        "space": { "ubatch_size": ubatch },
        "objectives": [{ "metric": "decode_tps" }],
        "strategy": { "kind": "grid" },
        "budget": { "max_trials": 10, "confirm_pairs": 0, "settle_trials": 0 },
        "probes": { "speed": { "prompt_tokens": 8, "n_predict": 4, "repeats": 1, "warmup": 0 } }
    })
}

/// Creates a study through the API and waits until it has ended: its row,
/// as JSON.
pub async fn run_study(server: &TestServer, def: &serde_json::Value) -> serde_json::Value {
    let r = http().post(server.url("/api/studies")).json(def).send().await.unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    let study: serde_json::Value = r.json().await.unwrap();
    let path = format!("/api/studies/{}", study["id"]);
    eventually(Duration::from_secs(120), "the study's end", || async {
        let row: serde_json::Value =
            http().get(server.url(&path)).send().await.ok()?.json().await.ok()?;
        let state = row["state"].as_str()?;
        (!matches!(state, "running" | "paused")).then_some(row)
    })
    .await
}

/// A study cut short: `threads` and `ubatch_size` on the tiny model, a grid
/// stopped after three trials (the baseline, then `threads` = 1 twice, once
/// with the smaller micro-batch). Too few trials to tell either setting's
/// effect; on memory, which no busy machine slows, whatever the load.
pub fn cut_short_study() -> serde_json::Value {
    serde_json::json!({
        "name": "cut short",
        "profile": "demo",
        "model": "tiny-llama",
        "space": { "threads": [1, 2], "ubatch_size": [128, 512] },
        "fixed": { "ctx_size": 1024 },
        "baseline": { "threads": 2, "ubatch_size": 512 },
        "objectives": [{ "metric": "decode_tps" }],
        "strategy": { "kind": "grid" },
        "budget": { "max_trials": 3 },
        "probes": { "speed": { "prompt_tokens": 32, "n_predict": 8, "repeats": 3, "warmup": 0 } }
    })
}

/// The demo profile as a fork's would be: the same engine and models,
/// naming a cache type (`q3_bogus`) that this build does not take, so that
/// the engine, not Tunebook, refuses it. Written into `dir`; returns the
/// profiles folder.
pub fn fork_profiles(dir: &std::path::Path) -> PathBuf {
    let text = std::fs::read_to_string(repo_root().join("profiles/demo.toml")).unwrap();
    let tools = repo_root().join(".tools").display().to_string();
    let text = text.replace("../.tools", &tools);
    let folder = dir.join("fork-profiles");
    std::fs::create_dir_all(&folder).unwrap();
    let choices = "\n[choices]\ncache_type_k = [\"q3_bogus\"]\n";
    std::fs::write(folder.join("demo.toml"), format!("{text}{choices}")).unwrap();
    folder
}
