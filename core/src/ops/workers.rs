//! The worker machines this server knows: adding one (its token is shown
//! once), listing them as the pages show them, revoking one.

use tunebook_views::types::WorkerView;

use crate::db::Db;
use crate::db::queue;
use crate::error::{Error, Result};

/// The workers, oldest first, with whether each was heard from lately.
pub async fn list(db: &Db) -> Result<Vec<WorkerView>> {
    let list = queue::workers(db).await?;
    let now = crate::db::now_ms();
    Ok(list
        .into_iter()
        .map(|w| {
            let hardware = w.hardware.as_ref().map_or_else(String::new, |h| {
                let bandwidth = h["bandwidth_bytes_per_s"]
                    .as_f64()
                    .map(|b| format!("; memory read {:.1} GB/s", b / 1e9))
                    .unwrap_or_default();
                format!("{}{bandwidth}", crate::machine_class::of(h))
            });
            let profiles = w
                .profiles
                .as_ref()
                .and_then(|p| p.as_array())
                .into_iter()
                .flatten()
                .filter_map(|p| p["name"].as_str().map(String::from))
                .collect();
            WorkerView {
                up: !w.revoked
                    && w.last_seen_ms.is_some_and(|t| now - t < crate::study_runner::WORKER_UP_MS),
                name: w.name,
                machine_class: w.machine_class,
                hardware,
                profiles,
                last_seen_ms: w.last_seen_ms,
                revoked: w.revoked,
            }
        })
        .collect())
}

/// The longest name a worker may have: it is shown on pages and in
/// findings, and it names the machine in a study's targets.
const MAX_NAME: usize = 64;

/// Adds a worker named `name`; its token. The name is checked and must be new.
pub async fn add(db: &Db, name: &str) -> Result<String> {
    let name = name.trim();
    if name.is_empty()
        || name.len() > MAX_NAME
        || name == "any"
        || name.starts_with('.')
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        let shown: String = name.chars().take(MAX_NAME).collect();
        return Err(Error::BadRequest(format!(
            "a worker's name is up to {MAX_NAME} letters, digits, `-`, `_` and `.`, not \
             starting with `.` (and not `any`): `{}`",
            shown.escape_debug()
        )));
    }
    if queue::workers(db).await?.iter().any(|w| w.name == name) {
        return Err(Error::Conflict(format!("there is a worker named `{name}` already")));
    }
    Ok(queue::create_worker(db, name).await?)
}

/// Revokes a worker's token: it can take no more trials, and the trials
/// meant for it alone fail, said why, instead of waiting for it forever.
pub async fn revoke(service: &crate::service::Service, name: &str) -> Result<()> {
    let db = &service.db;
    if !queue::revoke_worker(db, name).await? {
        return Err(Error::NotFound);
    }
    for id in queue::fail_targeted(db, name, &format!("its worker `{name}` was revoked")).await? {
        crate::announce::trial(db, &service.events, id).await?;
    }
    Ok(())
}
