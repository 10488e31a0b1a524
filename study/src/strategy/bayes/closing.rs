//! The last part of a model-based study's budget ([`TAIL`]) goes to the
//! findings, not the front. A search led by its models soon measures
//! little but the region near the front, and the settings it holds there
//! together (both cache types changed at once, say) leave the findings
//! unable to tell one setting's effect from the other's. So its last trials
//! change one setting at a time from the baseline: each list's other
//! values and each range's low, middle and high ones, those not yet
//! measured, taken in turns over the settings so that a short tail still
//! reaches every setting.

use engine_bridge::Settings;

use super::Proposal;
use crate::space::Domain;
use crate::study::{Observation, Study};

/// The share of the trial budget the findings get at its end.
const TAIL: usize = 5;

/// The next one-setting change from the baseline, once the study is in
/// the last [`TAIL`]th of its trial budget and while one is left that the
/// constraints allow and no trial has measured.
pub(super) fn proposal(
    study: &Study,
    history: &[Observation],
    fresh: &impl Fn(&Settings) -> bool,
) -> Option<Proposal> {
    let budget = study.def.budget.max_trials as usize;
    if history.len() + budget / TAIL < budget {
        return None;
    }
    let config = changes(study).into_iter().find(fresh)?;
    let note = "findings: one setting changed from the baseline, so that its effect is \
                told apart from the others'"
        .into();
    Some(Proposal { config, note })
}

/// The baseline with one setting changed, in turns: every setting's first
/// other value, then every setting's second, and so on.
fn changes(study: &Study) -> Vec<Settings> {
    let values: Vec<(&str, Vec<String>)> = study
        .space
        .params
        .iter()
        .map(|p| {
            let at = study.baseline.get(&p.name);
            let listed = match &p.domain {
                Domain::Values(v) => v.clone(),
                other => other.span(),
            };
            (p.name.as_str(), listed.into_iter().filter(|v| Some(v) != at).collect())
        })
        .collect();
    let rounds = values.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
    let mut out = Vec::new();
    for k in 0..rounds {
        for (name, v) in &values {
            if let Some(value) = v.get(k) {
                let mut c = study.baseline.clone();
                c.insert((*name).to_string(), value.clone());
                out.push(c);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::super::{Strategy, testing};
    use super::super::Bayes;

    #[tokio::test]
    async fn the_last_fifth_of_the_budget_changes_one_setting_at_a_time() {
        // A budget of 20: the models lead up to trial 16, then each of the
        // last four trials is the baseline with one setting changed, the
        // three settings in turn.
        let mut study = testing::study("bayes", "");
        study.def.budget.max_trials = 20;
        let strategy = Bayes::new(7);
        let mut history = testing::run(&study, 16).await;
        let mut notes = Vec::new();
        while history.len() < 20 {
            let p = strategy.propose(&study, &history).await.unwrap();
            let m = testing::metrics(&testing::full(&study, &p.config));
            history.push(study.observe(p.config, Some(&m), Some(&m)));
            notes.push(p.note);
        }
        assert!(notes.iter().all(|n| n.starts_with("findings:")), "{notes:?}");
        let changed: Vec<Vec<&String>> = history[16..]
            .iter()
            .map(|o| {
                o.config
                    .iter()
                    .filter(|(k, v)| study.baseline.get(*k) != Some(v))
                    .map(|(k, _)| k)
                    .collect()
            })
            .collect();
        assert!(changed.iter().all(|c| c.len() == 1), "{changed:?}");
        let first: std::collections::BTreeSet<&String> =
            changed[..3].iter().map(|c| c[0]).collect();
        assert_eq!(first.len(), 3, "{changed:?}");
        // Before the tail, the models led.
        let before = strategy.propose(&study, &history[..15]).await.unwrap();
        assert!(before.note.starts_with("model:"), "{}", before.note);
    }
}
