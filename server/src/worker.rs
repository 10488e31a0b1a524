//! `tunebook worker`: Tunebook on another machine, running trials the
//! server queues for workers. It registers its hardware and profiles, takes
//! one trial at a time, runs it exactly as the server would (the same
//! runner, into a scratch SQLite database of its own), renews its lease
//! while the trial runs (reporting each phase and the engine's new output,
//! which the server's log page follows), and sends back everything it
//! measured. If the server says the lease is lost, the trial is stopped.

use std::sync::Arc;
use std::time::Duration;

use crate::db::trials::State;
use engine_bridge::Profile;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::Settings;
use crate::db::queue;
use crate::db::trials::{self, NewTrial};
use crate::remote::Claimed;
use crate::trial_runner::{self as runner, RunnerContext};

/// How long to wait before asking again when the server did not answer,
/// or answered at once that there is nothing to run.
const IDLE: Duration = Duration::from_secs(1);

/// A worker's connection to its server.
pub struct Connection {
    client: reqwest::Client,
    server: String,
    token: String,
}

impl Connection {
    pub fn new(server: &str, token: &str) -> Self {
        Connection {
            client: engine_bridge::http::client().no_proxy().build().expect("a client"),
            server: server.trim_end_matches('/').to_string(),
            token: token.to_string(),
        }
    }

    fn post(&self, path: &str) -> reqwest::RequestBuilder {
        self.client.post(format!("{}{path}", self.server)).bearer_auth(&self.token)
    }
}

/// What this machine is, as the server records it.
async fn hardware(bandwidth: Option<f64>) -> serde_json::Value {
    let (cpu, ram) = engine_bridge::memory::cpu_and_ram();
    json!({
        "cpu": cpu,
        "threads": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "ram_bytes": ram,
        "gpus": engine_bridge::memory::gpu_names().await,
        "bandwidth_bytes_per_s": bandwidth,
        "host": std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default().trim(),
    })
}

fn profiles(list: &[Profile]) -> serde_json::Value {
    json!(
        list.iter()
            .map(|p| json!({
                "name": p.name,
                "engine": p.kind.name(),
                "models": p.models.iter().map(|m| &m.name).collect::<Vec<_>>(),
            }))
            .collect::<Vec<_>>()
    )
}

/// How often a worker reports on the trial it runs (at most; a third of the
/// lease when that is shorter): the engine's output reaches the server's
/// watchers this often.
const REPORT_EVERY: Duration = Duration::from_secs(1);

/// Output sent with one report, at most: a trial's log is kept whole on the
/// worker, the server's copy follows it.
const LOG_CHUNK: u64 = 256 * 1024;

/// Runs trials for the server at `server` until `stop`: `settings` are this
/// machine's (profiles, data folder, bandwidth); `class` names the class of
/// machine it stands for, when given.
pub async fn work(
    settings: Settings,
    server: &str,
    token: &str,
    class: Option<&str>,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let mut settings = settings;
    settings.database_url = format!("sqlite://{}/worker.db?mode=rwc", settings.data_dir.display());
    let ctx = crate::prepare(&settings, stop.clone()).await?;
    let conn = Connection::new(server, token);
    let registered = conn
        .post("/api/worker/register")
        .json(&json!({
            "hardware": hardware(ctx.bandwidth).await,
            "class": class,
            "profiles": profiles(&ctx.profiles),
        }))
        .send()
        .await?;
    if !registered.status().is_success() {
        anyhow::bail!(
            "the server refused this worker: {}",
            registered.text().await.unwrap_or_default()
        );
    }
    let me: serde_json::Value = registered.json().await?;
    tracing::info!(name = %me["name"], server, "worker registered; waiting for trials");
    // The server hands out trials of the profiles registered above.
    while !stop.is_cancelled() {
        let asked = std::time::Instant::now();
        let ask = conn.post("/api/worker/claim").send();
        let answer = tokio::select! {
            _ = stop.cancelled() => break,
            answer = ask => answer,
        };
        let claimed = match answer {
            Ok(r) if r.status().is_success() => r.json::<Option<Claimed>>().await.ok().flatten(),
            Ok(r) => {
                tracing::warn!(status = %r.status(), "the server refused to hand out a trial");
                None
            }
            Err(e) => {
                tracing::warn!(error = %e, "the server did not answer");
                None
            }
        };
        match claimed {
            Some(c) => run_one(&ctx, &conn, c, &stop).await?,
            // The server waited for work before answering: ask again.
            None if asked.elapsed() >= IDLE => {}
            None => {
                tokio::select! {
                    _ = stop.cancelled() => {}
                    _ = tokio::time::sleep(IDLE) => {}
                }
            }
        }
    }
    Ok(())
}

/// Runs one trial the server handed out and sends back its result.
async fn run_one(
    ctx: &RunnerContext,
    conn: &Connection,
    c: Claimed,
    stop: &CancellationToken,
) -> anyhow::Result<()> {
    let remote = c.trial.id;
    let local = trials::insert(
        &ctx.db,
        &NewTrial {
            profile: &c.trial.profile,
            model: &c.trial.model,
            settings: &c.trial.settings,
            tokens_requested: c.trial.tokens_requested.map(|n| n as u32),
            study: None,
            target: None,
            machine: None,
        },
    )
    .await?;
    tracing::info!(trial = remote, "running");
    let log = Arc::new(tokio::sync::Mutex::new(LogReader {
        path: ctx.logs_dir.join(format!("trial-{local}.log")),
        offset: 0,
    }));
    // Renew the lease well within its length, reporting the phase and
    // what the engine wrote since the last report.
    let lost = CancellationToken::new();
    let beat = {
        let (db, lost) = (ctx.db.clone(), lost.clone());
        let path = format!("/api/worker/trials/{remote}/heartbeat");
        let request = conn.post(&path);
        let every = Duration::from_millis((c.lease_ms / 3).max(100) as u64).min(REPORT_EVERY);
        let log = log.clone();
        tokio::spawn(async move {
            loop {
                let state = trials::get(&db, local).await.ok().flatten().map(|t| t.state());
                let state = match state {
                    Some(s) if s.is_final() => return,
                    Some(State::Queued) | None => State::Launching,
                    Some(s) => s,
                };
                let Some(r) = request.try_clone() else { return };
                let (output, read) = log.lock().await.fresh().await;
                match r.json(&json!({ "state": state.as_str(), "log": output })).send().await {
                    Ok(r) if r.status() == reqwest::StatusCode::CONFLICT => {
                        tracing::warn!(trial = remote, "the lease was lost: stopping the trial");
                        lost.cancel();
                        return;
                    }
                    Ok(r) if r.status().is_success() => log.lock().await.advance(read),
                    Ok(r) => tracing::warn!(trial = remote, status = %r.status(), "report refused"),
                    Err(e) => {
                        tracing::warn!(trial = remote, error = %e, "could not renew the lease")
                    }
                }
                tokio::time::sleep(every).await;
            }
        })
    };
    let ran = tokio::select! {
        // Dropping the trial stops its engine.
        _ = lost.cancelled() => false,
        _ = stop.cancelled() => false,
        r = runner::run_trial(ctx, local, &c.probes, None) => { r?; true }
    };
    beat.abort();
    if !ran {
        return Ok(());
    }
    let mut result = queue::result_of(&ctx.db, local).await?;
    // The engine's last words, which no report carried yet.
    result.log = log.lock().await.rest().await;
    // The result matters more than anything else this worker does: keep
    // trying while the server is away, as long as the lease may still hold.
    for attempt in 0..10 {
        match conn.post(&format!("/api/worker/trials/{remote}/result")).json(&result).send().await {
            Ok(r) if r.status().is_success() => {
                tracing::info!(trial = remote, "result sent");
                return Ok(());
            }
            Ok(r) => {
                let status = r.status();
                let why = r.text().await.unwrap_or_default();
                tracing::warn!(trial = remote, %status, "the server did not take the result: {why}");
                return Ok(());
            }
            Err(e) => {
                tracing::warn!(trial = remote, attempt, error = %e, "could not send the result")
            }
        }
        tokio::time::sleep(IDLE).await;
    }
    Ok(())
}

/// What an engine wrote to its log file and the server has not yet been sent.
struct LogReader {
    path: std::path::PathBuf,
    /// Bytes the server has.
    offset: u64,
}

impl LogReader {
    /// Whole lines written since the server's copy ends (at most
    /// [`LOG_CHUNK`] bytes), and how many bytes they take.
    async fn fresh(&self) -> (String, u64) {
        let bytes = self.read(LOG_CHUNK).await;
        let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        (String::from_utf8_lossy(&bytes[..whole]).into_owned(), whole as u64)
    }

    fn advance(&mut self, n: u64) {
        self.offset += n;
    }

    /// What was not yet sent, unfinished last line included: its last
    /// [`LOG_CHUNK`] bytes at most, so the result always fits the server's
    /// limit (the whole log stays on this machine).
    async fn rest(&mut self) -> String {
        let size = tokio::fs::metadata(&self.path).await.map_or(self.offset, |m| m.len());
        let unsent = size.saturating_sub(self.offset);
        let skipped = unsent.saturating_sub(LOG_CHUNK);
        self.offset += skipped;
        let bytes = self.read(LOG_CHUNK).await;
        self.offset += bytes.len() as u64;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if skipped > 0 {
            format!(
                "[… {skipped} bytes of output left out; the whole log is on the worker …]\n{text}"
            )
        } else {
            text
        }
    }

    async fn read(&self, limit: u64) -> Vec<u8> {
        use tokio::io::{AsyncReadExt, AsyncSeekExt};
        let mut out = Vec::new();
        if let Ok(mut file) = tokio::fs::File::open(&self.path).await
            && file.seek(std::io::SeekFrom::Start(self.offset)).await.is_ok()
        {
            let _ = file.take(limit).read_to_end(&mut out).await;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::Connection;

    #[tokio::test]
    async fn a_server_named_by_https_is_spoken_to_over_tls() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = listener.local_addr().unwrap();
        let connection = Connection::new(&format!("https://{at}"), "token");
        let request =
            tokio::spawn(async move { connection.post("/api/workers/claim").send().await });
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut first = [0u8; 3];
        socket.read_exact(&mut first).await.unwrap();
        // A TLS record carrying a handshake (the ClientHello), version 3.x.
        assert_eq!(&first[..2], &[0x16, 0x03], "{first:?}");
        drop(socket);
        assert!(request.await.unwrap().is_err(), "no TLS server answered");
    }
}
