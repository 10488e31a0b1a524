//! A study's trials as its pages show them: the trials on the Pareto
//! front of the chosen objectives. What the trials say is
//! [`crate::study_facts`]'s.

use std::collections::BTreeMap;

use tunebook_domain::TrialState;
use tunebook_study::{Goal, Measure, Metric, pareto};
use tunebook_views::types::{ParetoPointView, ParetoView, SettingValues};

use crate::trial::Trial;

/// The done trials that measured every chosen metric, with those values.
pub fn points<'a>(trials: &'a [Trial], chosen: &[(Metric, Goal)]) -> Vec<(&'a Trial, Vec<f64>)> {
    trials
        .iter()
        .filter(|t| t.state == TrialState::Done)
        .filter_map(|t| {
            Some((t, chosen.iter().map(|(k, _)| t.value(*k)).collect::<Option<Vec<f64>>>()?))
        })
        .collect()
}

/// Done trials on chosen metrics (id, settings, one value per metric), the
/// Pareto front marked, what each differs in from the baseline, and the
/// values each took of the `varied` settings.
pub fn pareto_view(
    done: Vec<(i64, BTreeMap<String, String>, Vec<f64>)>,
    chosen: &[(Measure, Goal)],
    baseline: &BTreeMap<String, String>,
    varied: &[String],
) -> ParetoView {
    let values: Vec<Vec<f64>> = done.iter().map(|(_, _, v)| v.clone()).collect();
    let goals: Vec<Goal> = chosen.iter().map(|(_, g)| *g).collect();
    let front = pareto::front(&values, &goals);
    let mut settings: Vec<SettingValues> =
        varied.iter().map(|name| SettingValues { name: name.clone(), values: vec![] }).collect();
    let configs: Vec<Vec<u32>> = done
        .iter()
        .map(|(_, config, _)| {
            settings
                .iter_mut()
                .map(|s| {
                    let value = config.get(&s.name).map_or("", String::as_str);
                    let at = s.values.iter().position(|v| v == value).unwrap_or_else(|| {
                        s.values.push(value.to_string());
                        s.values.len() - 1
                    });
                    at as u32
                })
                .collect()
        })
        .collect();
    ParetoView {
        settings,
        machines: vec![],
        machine: None,
        metrics: chosen.iter().map(|(m, _)| m.name()).collect(),
        goals: goals
            .iter()
            .map(|g| if *g == Goal::Max { "max" } else { "min" }.to_string())
            .collect(),
        points: done
            .into_iter()
            .zip(configs)
            .enumerate()
            .map(|(i, ((trial_id, settings, values), config))| ParetoPointView {
                trial_id,
                values,
                on_front: front.binary_search(&i).is_ok(),
                differs: tunebook_views::types::differences(&settings, baseline).join(" "),
                config,
            })
            .collect(),
    }
}
