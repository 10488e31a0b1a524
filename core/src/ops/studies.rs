//! Studies as the pages and the API read and steer them: listing,
//! checking, creating, pausing, resuming and stopping; a study's view,
//! progress, pages of trials, findings and one metric's points. Its Pareto
//! front is [`super::pareto`].

use std::collections::BTreeMap;

use tunebook_study::findings::Finding;
use tunebook_study::{Measure, Metric, StudyDef};
use tunebook_views::types::{
    BestView, CheckView, FindingsView, MachineBest, MetricPoint, ObjectiveView, StudyProgress,
    StudySummary, StudyUpdate, StudyView, TrialPage, TrialQuery, TrialState,
};

use crate::checked::Checked;
use crate::db::Db;
use crate::db::studies::{self, StudyRow};
use crate::db::trials;
use crate::error::{Error, Result};
use crate::service::Service;
use crate::study_facts;
use crate::views;

/// Trials in flight a study's page shows at most (one per worker).
const IN_FLIGHT_SHOWN: i64 = 32;

/// A study written as TOML or JSON (the designer's text, a file).
pub fn parse(text: &str) -> Result<StudyDef> {
    Ok(StudyDef::from_text(text)?)
}

/// One study as stored.
pub async fn row(db: &Db, id: i64) -> Result<StudyRow> {
    studies::get(db, id).await?.ok_or(Error::NotFound)
}

/// Every study, newest first, as the list of studies shows them.
pub async fn list(db: &Db) -> Result<Vec<StudySummary>> {
    let mut out = Vec::new();
    for row in &studies::list(db).await? {
        out.push(summary(db, row).await?);
    }
    Ok(out)
}

/// Checks a study without storing it: what the designer shows as you type.
pub async fn check(service: &Service, def: &StudyDef) -> Result<CheckView> {
    let checked = crate::study_checks::preview(
        &service.db,
        &service.checked,
        &service.endpoints,
        &service.heavy,
        def,
    )
    .await?;
    Ok(checked?)
}

/// Checks and starts a study; its id. Nothing is stored when it is wrong.
pub async fn create(service: &Service, def: &StudyDef) -> Result<i64> {
    Ok(service.studies.create(def).await?.0)
}

/// `pause`, `resume` or `stop`.
pub async fn control(service: &Service, id: i64, action: &str) -> Result<()> {
    let studies = &service.studies;
    match action {
        "pause" => studies.pause(id).await,
        "resume" => studies.resume(id).await,
        "stop" => studies.stop(id).await,
        other => {
            Err(Error::BadRequest(format!("unknown action `{other}`: use pause, resume or stop")))
        }
    }
}

/// Where a study stands: budget spent, trials in flight, best so far.
pub async fn study_progress(db: &Db, id: i64) -> Result<StudyProgress> {
    let row = row(db, id).await?;
    let by_state = trials::state_counts(db, id).await?;
    progress(db, &row, &by_state).await
}

/// What the study's trials show, as markdown and as safe HTML, with what
/// they leave open and what would settle it.
pub async fn findings(service: &Service, id: i64) -> Result<(Vec<Finding>, FindingsView)> {
    let db = &service.db;
    let row = row(db, id).await?;
    let list: Vec<crate::trial::Trial> = views::all(trials::of_study(db, id).await?);
    let (found, markdown) =
        crate::write_up::write_up(db, &row, &list, &service.checked, &service.heavy).await?;
    let facts = study_facts::facts_of(&row.definition, &list);
    let open = super::settle::open_questions(service, &row.definition, &found, &facts, &list);
    // In short first, then each section folded under its title. The short
    // version is of one class of machine: across several, the sections
    // compare them.
    let digest = match crate::write_up::one_class(&list) {
        true => tunebook_study::findings::digest(&found),
        false => None,
    };
    let digest = digest.map_or(String::new(), |d| {
        format!(
            "<section class=\"digest\" id=\"digest\"><h3>In short</h3>{}</section>",
            crate::markdown::to_safe_html(&d)
        )
    });
    let html = format!("{digest}{}", crate::markdown::to_folded_html(&markdown));
    let too_noisy = found
        .iter()
        .filter_map(|f| match f {
            Finding::Noise { metric, too_noisy: true, .. } => Some(metric.label().to_string()),
            _ => None,
        })
        .collect();
    // Drawn for one class of machine only, as the summary is.
    let objectives: Vec<tunebook_study::Metric> = study_facts::measures_of(&row.definition)
        .into_iter()
        .filter_map(|(m, _)| m.metric())
        .collect();
    let importance = match crate::write_up::one_class(&list) {
        true => views::importance::importance(&found, &objectives),
        false => Vec::new(),
    };
    let view = FindingsView { markdown, html, count: found.len(), too_noisy, open, importance };
    Ok((found, view))
}

/// The study's done trials with their settings and one metric.
pub async fn metric_points(db: &Db, id: i64, metric: &str) -> Result<Vec<MetricPoint>> {
    row(db, id).await?;
    let m = Metric::parse(metric)
        .ok_or_else(|| Error::BadRequest(format!("unknown metric `{metric}`")))?;
    let points = trials::points(db, id, &[Measure::Metric(m)], None).await?;
    Ok(points
        .into_iter()
        .map(|(trial_id, settings, values)| MetricPoint { trial_id, settings, value: values[0] })
        .collect())
}

/// A study as the list of studies shows it.
pub async fn summary(db: &Db, row: &StudyRow) -> Result<StudySummary> {
    let by_state = trials::state_counts(db, row.id).await?;
    Ok(StudySummary {
        id: row.id,
        name: row.name.clone(),
        profile: row.definition.profile.clone(),
        model: row.definition.model.clone(),
        state: row.state.as_str().into(),
        stop_reason: row.stop_reason.clone(),
        created_ms: row.created_ms,
        finished_ms: row.finished_ms,
        trials: by_state,
    })
}

/// A study as its page shows it first: summary, progress, baseline,
/// events and the first page of trials.
pub async fn view(service: &Service, id: i64) -> Result<StudyView> {
    let db = &service.db;
    let row = studies::get(db, id).await?.ok_or(Error::NotFound)?;
    let summary = summary(db, &row).await?;
    let baseline = baseline_of(&service.checked, &row).unwrap_or_default();
    let progress = progress(db, &row, &summary.trials).await?;
    let events = studies::events(db, id)
        .await?
        .into_iter()
        .map(|e| StudyUpdate {
            study_id: id,
            state: summary.state.clone(),
            kind: e.kind,
            message: e.message,
            at_ms: e.at_ms,
        })
        .collect();
    Ok(StudyView {
        objectives: crate::study_facts::measures_of(&row.definition)
            .into_iter()
            .map(|(m, g)| ObjectiveView {
                metric: m.name(),
                label: m.label(),
                goal: super::catalog::goal_name(g).into(),
            })
            .collect(),
        baseline,
        definition_toml: toml::to_string(&row.definition).unwrap_or_default(),
        max_trials: row.definition.budget.max_trials,
        events,
        summary,
        progress,
        first_page: trial_page(db, id, &TrialQuery::default()).await?,
    })
}

/// One page of a study's trials.
pub async fn trial_page(db: &Db, id: i64, query: &TrialQuery) -> Result<TrialPage> {
    let (rows, matching) = trials::page(db, id, &views::trials::page_query(query)).await?;
    Ok(TrialPage { rows: views::all(rows), offset: query.offset, matching })
}

/// The settings of a study's baseline, where the study still checks
/// against this server's profiles.
pub fn baseline_of(checked: &Checked, row: &StudyRow) -> Option<BTreeMap<String, String>> {
    checked.study(&row.definition).ok().map(|s| s.baseline.clone())
}

/// `by_state`: the study's trial counts by state, as its summary has them.
pub async fn progress(
    db: &Db,
    row: &StudyRow,
    by_state: &BTreeMap<String, usize>,
) -> Result<StudyProgress> {
    let objectives = crate::study_facts::objectives_of(&row.definition);
    let best_of = |machine: Option<String>| {
        let objectives = &objectives;
        async move {
            let mut best = Vec::new();
            for (metric, goal) in objectives {
                let found = trials::best(db, row.id, *metric, *goal, machine.as_deref()).await?;
                best.push(found.map(|(trial_id, value)| BestView { trial_id, value }));
            }
            Ok::<_, sqlx::Error>(best)
        }
    };
    // Never a best across classes of machine: each class's own.
    let machines = trials::machines(db, row.id).await?;
    let (best, best_by_machine) = if machines.len() > 1 {
        let mut each = Vec::new();
        for machine in machines {
            let best = best_of(Some(machine.clone())).await?;
            each.push(MachineBest { machine, best });
        }
        (vec![None; objectives.len()], each)
    } else {
        (best_of(None).await?, vec![])
    };
    let finished = by_state
        .iter()
        .filter(|(state, _)| TrialState::parse(state).is_some_and(TrialState::is_final))
        .map(|(_, n)| *n as u64)
        .sum();
    Ok(StudyProgress {
        counted: trials::counted(db, row.id).await?,
        finished,
        in_flight: views::all(trials::in_flight(db, row.id, IN_FLIGHT_SHOWN).await?),
        best,
        best_by_machine,
    })
}
