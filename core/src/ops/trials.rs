//! Trials one at a time: submitting a configuration, and reading a trial
//! back with its command, samples and log.

use tunebook_views::types::{RunRequest, SampleView, TrialDetail, TrialView};

use crate::db::Db;
use crate::db::studies;
use crate::db::trials::{self, NewTrial};
use crate::error::{Error, Result};
use crate::service::Service;
use crate::views;

/// Checks a request, stores it as a queued trial, and hands it to the
/// runner. Nothing is stored when the request is wrong.
pub async fn submit(service: &Service, request: RunRequest) -> Result<TrialView> {
    let profile = service.profiles.iter().find(|p| p.name == request.profile).ok_or_else(|| {
        Error::BadRequest(format!("unknown engine profile `{}`", request.profile))
    })?;
    // A blank value means "leave it to the engine".
    let settings = request
        .settings
        .into_iter()
        .map(|(k, v)| (k, v.trim().to_string()))
        .filter(|(_, v)| !v.is_empty())
        .collect();
    if request.target.is_some() {
        // A worker runs it with its own binary and model files: check
        // the model's name and every setting, not files here.
        if profile.model(&request.model).is_none() {
            return Err(Error::BadRequest(format!(
                "profile `{}` has no model `{}`",
                profile.name, request.model
            )));
        }
        profile.catalog().render(&settings).map_err(|e| Error::BadRequest(e.to_string()))?;
    } else {
        // Planning checks the model, every setting, and that the files exist.
        engine_bridge::plan(profile, &request.model, &settings, 0)
            .map_err(|e| Error::BadRequest(e.to_string()))?;
    }
    if let Some(target) = request.target.as_deref().filter(|t| *t != "any") {
        let known = crate::db::queue::workers(&service.db).await?;
        if !known.iter().any(|w| w.name == target && !w.revoked) {
            return Err(Error::BadRequest(format!(
                "no worker named `{target}`: use `any` or one of {}",
                known
                    .iter()
                    .filter(|w| !w.revoked)
                    .map(|w| format!("`{}`", w.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    let id = trials::insert(
        &service.db,
        &NewTrial {
            profile: &profile.name,
            model: &request.model,
            settings: &settings,
            tokens_requested: service.n_predict,
            study: None,
            // A worker takes it from the queue.
            target: request.target.as_deref(),
            machine: None,
        },
    )
    .await?;
    // Published as queued before the runner may move it on: watchers
    // never see it queued after launching.
    let view = crate::announce::trial(&service.db, &service.events, id).await?;
    let view = view.ok_or(Error::NotFound)?;
    if request.target.is_none() {
        service.runner.enqueue(id);
    }
    Ok(view)
}

pub async fn detail(service: &Service, id: i64) -> Result<TrialDetail> {
    let trial = trials::get(&service.db, id).await?.ok_or(Error::NotFound)?;
    let extras = trials::extras(&service.db, id).await?.unwrap_or_default();
    let command: serde_json::Value =
        extras.command.as_deref().and_then(|c| serde_json::from_str(c).ok()).unwrap_or_default();
    let mut argv: Vec<String> = command["program"].as_str().map(String::from).into_iter().collect();
    argv.extend(
        command["args"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a.as_str().map(String::from)),
    );
    let env = command["env"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect();
    let pretty = |text: Option<String>| {
        text.and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| serde_json::to_string_pretty(&v).ok())
    };
    let measurement = trials::measurement(&service.db, id)
        .await?
        .and_then(|v| serde_json::to_string_pretty(&v).ok());
    let baseline = match trial.study_id {
        Some(study) => studies::get(&service.db, study)
            .await?
            .and_then(|row| super::studies::baseline_of(&service.checked, &row)),
        None => None,
    };
    Ok(TrialDetail {
        argv,
        env,
        read_back: pretty(extras.props),
        samples: views::all(trials::samples(&service.db, id).await?),
        log_tail: extras
            .log_tail
            .map(|t| t.lines().map(String::from).collect())
            .unwrap_or_default(),
        measurement,
        baseline,
        trial: trial.into(),
    })
}

/// Every trial, newest first.
pub async fn list(db: &Db) -> Result<Vec<TrialView>> {
    Ok(views::all(trials::list(db).await?))
}

pub async fn get(db: &Db, id: i64) -> Result<TrialView> {
    trials::get(db, id).await?.map(TrialView::from).ok_or(Error::NotFound)
}

/// A trial's samples, in order.
pub async fn samples(db: &Db, id: i64) -> Result<Vec<SampleView>> {
    get(db, id).await?;
    Ok(views::all(trials::samples(db, id).await?))
}

/// What the engine and the probes reported of a trial, as stored.
pub async fn measurement(db: &Db, id: i64) -> Result<serde_json::Value> {
    trials::measurement(db, id).await?.ok_or(Error::NotFound)
}
