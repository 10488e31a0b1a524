//! What a worker machine asks of this server, below HTTP: who it is (its
//! token), registering its hardware and profiles, taking a trial (waiting
//! a while for one), renewing its lease while it runs, and handing back
//! what it measured; and the sweep that queues again the trials of
//! workers that went quiet. `tunebook::routes::workers` only translates.

mod checks;
mod log;

use std::sync::Arc;
use std::time::Duration;

use engine_bridge::ProbePlan;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use tunebook_views::types::{TrialState, TrialView};

pub use checks::{Registration, implausible};

use crate::announce;
use crate::db::queue::{self, TrialResult};
use crate::db::trials;
use crate::error::{Error, Result};
use crate::service::Service;

/// A worker, known by its token: its id and name.
pub async fn authenticate(service: &Service, token: &str) -> Result<(i64, String)> {
    queue::authenticate(&service.db, token.trim())
        .await?
        .ok_or_else(|| Error::Unauthorized("unknown or revoked worker token".into()))
}

/// Stores what worker `id` says it has, once it checks.
pub async fn register(service: &Service, id: i64, name: &str, body: &Registration) -> Result<()> {
    body.check()?;
    let class = body.class.as_deref().map(str::trim).filter(|c| !c.is_empty());
    queue::register(&service.db, id, &body.hardware, class, &body.profiles).await?;
    tracing::info!(worker = %name, "worker registered");
    Ok(())
}

/// A trial to run, what to measure, and how often to renew the lease.
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
pub struct Claimed {
    pub trial: TrialView,
    pub probes: ProbePlan,
    pub lease_ms: i64,
}

/// The profiles worker `id` registered that this server knows for the same
/// engine: a worker takes only trials of those, whatever it asks for.
async fn runnable(service: &Service, id: i64) -> Result<Vec<String>> {
    let registered = queue::registered_profiles(&service.db, id).await?;
    let known = |p: &queue::WorkerProfile| {
        service.profiles.iter().any(|s| s.name == p.name && s.kind.name() == p.engine)
    };
    Ok(registered.into_iter().filter(known).map(|p| p.name).collect())
}

/// Hands worker `id` the oldest trial it may run, waiting up to
/// the server's `claim_wait` for one (or until `stop`); `None` when none
/// came.
pub async fn claim(
    service: &Service,
    id: i64,
    name: &str,
    stop: &CancellationToken,
) -> Result<Option<Claimed>> {
    let profiles = runnable(service, id).await?;
    let lease_ms = service.lease.as_millis() as i64;
    // Listening before looking: a trial queued in between is not missed.
    let mut changes = service.events.changes.subscribe();
    let deadline = tokio::time::Instant::now() + service.claim_wait;
    let trial = loop {
        if let Some(trial) = queue::claim(&service.db, id, name, &profiles, lease_ms).await? {
            break trial;
        }
        let queued = changes.until(|c| c.state == trials::State::Queued);
        tokio::select! {
            _ = stop.cancelled() => return Ok(None),
            _ = tokio::time::sleep_until(deadline) => return Ok(None),
            _ = queued => {}
        }
    };
    let view =
        announce::trial(&service.db, &service.events, trial).await?.ok_or(Error::NotFound)?;
    tracing::info!(worker = %name, trial, "trial taken");
    // A study's trial runs the study's probes; any other the server's.
    let probes = match view.study_id {
        Some(study) => match crate::db::studies::get(&service.db, study).await? {
            Some(row) => service
                .checked
                .study(&row.definition)
                .map(|s| s.probes.clone())
                .unwrap_or_else(|_| service.probes.clone()),
            None => service.probes.clone(),
        },
        None => service.probes.clone(),
    };
    Ok(Some(Claimed { trial: view, probes, lease_ms }))
}

/// A worker's word that its trial still runs, in which phase, with what
/// its engine wrote since.
#[derive(Deserialize, schemars::JsonSchema)]
pub struct Beat {
    pub state: TrialState,
    /// What the engine wrote since the last report, whole lines.
    #[serde(default)]
    pub log: String,
}

/// Renews worker `id`'s lease on `trial`; a conflict when it is no longer
/// this worker's (it stops the trial).
pub async fn heartbeat(service: &Service, id: i64, trial: i64, body: &Beat) -> Result<()> {
    let before = trials::get(&service.db, trial).await?.map(|t| t.state());
    let lease_ms = service.lease.as_millis() as i64;
    let now = body.state;
    if !queue::heartbeat(&service.db, trial, id, now, lease_ms).await? {
        return Err(Error::Conflict(format!("trial {trial} is no longer this worker's")));
    }
    log::append_log(service, trial, &body.log).await;
    if before != Some(now) {
        announce::trial(&service.db, &service.events, trial).await?;
    }
    Ok(())
}

/// Stores what worker `id` measured of `trial`; a conflict when the lease
/// was lost or the result is not final.
pub async fn finish(
    service: &Service,
    (id, name): (i64, &str),
    trial: i64,
    body: &TrialResult,
) -> Result<()> {
    implausible(body).map_or(Ok(()), |why| Err(Error::BadRequest(why)))?;
    let refused = || {
        Error::Conflict(format!(
            "trial {trial} is no longer this worker's, or the result is not final: not stored"
        ))
    };
    // The engine's last words are kept before the trial shows as ended, so
    // that whoever sees it ended finds its whole log.
    if !queue::holds(&service.db, trial, id).await? {
        return Err(refused());
    }
    log::append_log(service, trial, &body.log).await;
    if !queue::finish(&service.db, trial, id, body).await? {
        return Err(refused());
    }
    // What to run is the server's to write, from its own profile.
    if let Some(t) = trials::get(&service.db, trial).await?
        && let Some(command) =
            crate::recipe::planned_command(&service.profiles, &t.profile, &t.model, &t.settings())
    {
        trials::set_command(&service.db, trial, &command).await?;
    }
    tracing::info!(worker = %name, trial, "trial finished by its worker");
    announce::trial(&service.db, &service.events, trial).await?;
    Ok(())
}

/// Every second until `stop`: trials whose lease ran out go back to the
/// queue (or fail after too many tries), and their watchers are told.
pub async fn sweep(service: Arc<Service>, stop: CancellationToken) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        match queue::expire(&service.db).await {
            Ok(ids) => {
                for id in ids {
                    tracing::warn!(
                        trial = id,
                        "a worker stopped renewing its lease: trial queued again"
                    );
                    let _ = announce::trial(&service.db, &service.events, id).await;
                }
            }
            Err(e) => tracing::error!(error = %e, "could not expire worker leases"),
        }
    }
}
