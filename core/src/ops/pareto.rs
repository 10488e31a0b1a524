//! A study's Pareto front on chosen metrics, of one class of machine at a
//! time: the data the study page plots and the API answers.

use tunebook_study::{Goal, Measure};
use tunebook_views::types::ParetoView;

use crate::db::trials;
use crate::error::{Error, Result};
use crate::service::Service;

/// The most metrics a front is asked on: a plot draws three.
const MAX_METRICS: usize = 8;

/// Done trials on `metrics` (the objectives when empty), of one class of
/// machine where the study ran on several (`machine`, or the first).
pub async fn front(
    service: &Service,
    id: i64,
    metrics: &[String],
    machine: Option<&str>,
) -> Result<ParetoView> {
    if metrics.len() > MAX_METRICS {
        return Err(Error::BadRequest(format!(
            "{} metrics asked for, over the limit of {MAX_METRICS}",
            metrics.len()
        )));
    }
    let db = &service.db;
    let row = super::studies::row(db, id).await?;
    let def = &row.definition;
    let objectives = crate::study_facts::measures_of(def);
    let chosen: Vec<(Measure, Goal)> = if metrics.is_empty() {
        objectives
    } else {
        let chosen = |name: &String| {
            let m = match Measure::parse(name) {
                Some(Measure::Setting(s))
                    if !def.space.contains_key(&s) && !def.fixed.contains_key(&s) =>
                {
                    return Err(Error::BadRequest(format!(
                        "study {id} neither varies nor fixes `{s}`"
                    )));
                }
                Some(m) => m,
                None => return Err(Error::BadRequest(format!("unknown metric `{name}`"))),
            };
            let goal = objectives.iter().find(|(o, _)| *o == m).map_or(m.natural_goal(), |o| o.1);
            Ok((m, goal))
        };
        metrics.iter().map(chosen).collect::<Result<_>>()?
    };
    let measures: Vec<Measure> = chosen.iter().map(|(m, _)| m.clone()).collect();
    // Never a front across classes of machine: one at a time.
    let machines = trials::machines(db, id).await?;
    let shown = match machine {
        Some(m) if machines.iter().any(|k| k == m) => Some(m.to_string()),
        Some(m) => return Err(Error::BadRequest(format!("no trial of study {id} ran on `{m}`"))),
        None if machines.len() > 1 => machines.first().cloned(),
        None => None,
    };
    let done = trials::points(db, id, &measures, shown.as_deref()).await?;
    let baseline = super::studies::baseline_of(&service.checked, &row).unwrap_or_default();
    let varied: Vec<String> = def.space.keys().cloned().collect();
    let mut view = crate::views::studies::pareto_view(done, &chosen, &baseline, &varied);
    if machines.len() > 1 {
        view.machines = machines;
        view.machine = shown;
    }
    Ok(view)
}
