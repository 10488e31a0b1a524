//! Faults injected into a real server: a full filesystem, and the
//! database held by another program. Each asserts that what was
//! acknowledged is on disk, that what could not be stored is refused in
//! plain words, and that the server recovers by itself once the cause goes
//! away. (A process killed mid-write: `crash_recovery.rs`; an engine that
//! hangs: `real_trial.rs` and the probe timeouts; a worker that vanishes:
//! `workers.rs`.)

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{TestServer, http};
use serde_json::{Value, json};

/// A 24 MiB filesystem of its own (tmpfs), unmounted when dropped: the
/// disk that fills up. Mounting needs root, as in the project's CI.
struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=24m", "tmpfs"])
            .arg(dir.path())
            .output()
            .expect("mount");
        assert!(
            out.status.success(),
            "a small filesystem for this test (tmpfs) could not be mounted; it needs root: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self(dir)
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    /// Fills the disk to its last byte.
    fn fill(&self) {
        use std::io::Write;
        let mut f = std::fs::File::create(self.path().join("filler")).unwrap();
        let block = vec![0u8; 1 << 20];
        while f.write_all(&block).is_ok() {}
        while f.write_all(&[0]).is_ok() {}
    }

    fn free(&self) {
        std::fs::remove_file(self.path().join("filler")).unwrap();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

async fn start(data: &Path) -> TestServer {
    let settings = TestServer::settings(data.to_path_buf());
    TestServer::start_with(settings, tempfile::tempdir().unwrap()).await
}

/// The status and the body of a request.
async fn answer(r: reqwest::RequestBuilder) -> (u16, Value) {
    let r = r.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_full_disk_refuses_writes_in_words_loses_nothing_acknowledged_and_recovers() {
    let disk = SmallDisk::new();
    let data = disk.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let db =
        tunebook::db::Db::connect(&TestServer::settings(data.clone()).database_url).await.unwrap();
    let study = common::synthetic::planted_study(&db).await.unwrap();
    db.pool.close().await;
    let server = start(&data).await;
    let (status, created) =
        answer(http().post(server.url(&format!("/api/studies/{study}/reports")))).await;
    assert_eq!(status, 201, "{created}");
    let report = created["id"].as_i64().unwrap();
    let v1: Value = common::get_json(&server, &format!("/api/reports/{report}")).await;
    let notebook = v1["notebook"].clone();
    let put = |base: i64, title: &str| {
        http()
            .put(server.url(&format!("/api/reports/{report}")))
            .json(&json!({ "base": base, "title": title, "notebook": notebook }))
    };
    let trial = || {
        http().post(server.url("/api/trials")).json(
            &json!({ "profile": "demo", "model": "tiny-llama", "settings": { "ctx_size": "512" } }),
        )
    };

    disk.fill();
    // Writes go on until the database's own spare room is used up: each is
    // acknowledged or refused in words, and once refused, so are the rest.
    let (mut base, mut acknowledged, mut refused) = (1, Vec::new(), Vec::new());
    for n in 0..200 {
        let title = format!("written on a full disk, {n}");
        let (status, said) = answer(put(base, &title)).await;
        match status {
            200 => {
                let now: Value = common::get_json(&server, &format!("/api/reports/{report}")).await;
                assert_eq!(now["title"], title.as_str(), "acknowledged and readable");
                base = now["latest"].as_i64().unwrap();
                acknowledged.push(title);
            }
            507 => {
                assert!(said["error"].as_str().unwrap().contains("disk is full"), "{said}");
                refused.push(title);
                break;
            }
            other => panic!("{other}: {said}"),
        }
    }
    assert_eq!(refused.len(), 1, "the disk never filled: {} writes taken", acknowledged.len());
    let (status, said) = answer(trial()).await;
    assert_eq!(status, 507, "{said}");
    // Reading still works.
    let (status, _) = answer(http().get(server.url(&format!("/api/studies/{study}")))).await;
    assert_eq!(status, 200);

    // Space again: the same requests go through, no restart needed.
    disk.free();
    let (status, said) = answer(put(base, "written once there was room")).await;
    assert_eq!(status, 200, "{said}");
    let (status, queued) = answer(trial()).await;
    assert_eq!(status, 201, "{queued}");
    server.stop().await;

    // After a restart, every write acknowledged is there, the refused not.
    let server = start(&data).await;
    let back: Value = common::get_json(&server, &format!("/api/reports/{report}")).await;
    assert_eq!(back["title"], "written once there was room", "{back}");
    assert_eq!(back["latest"].as_i64().unwrap(), base + 1, "every acknowledged version kept");
    let stored: Value = common::get_json(&server, &format!("/api/trials/{}", queued["id"])).await;
    assert_eq!(stored["id"], queued["id"]);
    server.stop().await;
}

#[tokio::test]
async fn a_database_held_by_another_program_is_said_and_let_go() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path()).await;
    // Once the server has started (its own start-up writes done).
    let _: Value = common::get_json(&server, "/api/trials").await;
    let url = TestServer::settings(data.path().to_path_buf()).database_url;
    // Another program takes the database for writing and keeps it.
    use sqlx::Connection;
    let mut other = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::Executor::execute(&mut other, "BEGIN EXCLUSIVE").await.unwrap();
    let trial = || {
        http().post(server.url("/api/trials")).json(
            &json!({ "profile": "demo", "model": "tiny-llama", "settings": { "ctx_size": "512" } }),
        )
    };
    let (status, said) = answer(trial()).await;
    assert_eq!(status, 503, "{said}");
    assert!(said["error"].as_str().unwrap().contains("another program"), "{said}");
    // Let go: the server writes again by itself.
    sqlx::Executor::execute(&mut other, "COMMIT").await.unwrap();
    other.close().await.unwrap();
    let (status, said) = answer(trial()).await;
    assert_eq!(status, 201, "{said}");
    server.stop().await;
}
