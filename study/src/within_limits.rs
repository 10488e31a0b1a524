//! A study's sizes checked against [`crate::limits`] before anything is
//! built from it; each error names the bound that was passed.

use crate::limits::*;
use crate::study::StudyDef;

/// Every bound the study passes, one line each (empty: within all).
pub fn check(def: &StudyDef) -> Vec<String> {
    let mut errors = Vec::new();
    let mut over = |what: &str, n: usize, limit: usize| {
        if n > limit {
            errors.push(format!("{what}: {n}, over the limit of {limit}"));
        }
    };
    over("characters in the name", def.name.chars().count(), MAX_NAME);
    over("characters in the profile's name", def.profile.chars().count(), MAX_NAME);
    over("characters in the model's name", def.model.chars().count(), MAX_NAME);
    over("settings varied", def.space.len(), MAX_SETTINGS);
    over("settings fixed", def.fixed.len(), MAX_SETTINGS);
    over("baseline settings", def.baseline.len(), MAX_SETTINGS);
    over("constraints", def.constraints.len(), MAX_CONSTRAINTS);
    over("objectives and bounds", def.objectives.len() + def.bounds.len(), MAX_TARGETS);
    over("machines", def.machines.len(), MAX_MACHINES);
    if def.budget.max_trials > MAX_TRIALS {
        errors.push(format!(
            "budget.max_trials: {}, over the limit of {MAX_TRIALS}",
            def.budget.max_trials
        ));
    }
    let b = &def.budget;
    if b.confirm_pairs != 0 && !(3..=MAX_CONFIRM_PAIRS).contains(&b.confirm_pairs) {
        errors.push(format!(
            "budget.confirm_pairs: {}, not 0 (no confirmation) nor between 3 and {MAX_CONFIRM_PAIRS}",
            b.confirm_pairs
        ));
    }
    if let Some(n) = b.settle_trials.filter(|n| *n > b.max_trials / 2) {
        errors.push(format!(
            "budget.settle_trials: {n}, over half the budget ({})",
            b.max_trials / 2
        ));
    }
    for (what, value, limit) in [
        ("budget.max_minutes", b.max_minutes, 525_600.0),
        ("budget.drift_pct", Some(b.drift_pct), 10_000.0),
        ("budget.min_gain", Some(b.min_gain.abs()), 1e15),
    ] {
        if let Some(v) = value.filter(|v| !(v.is_finite() && *v >= 0.0 && *v <= limit)) {
            errors.push(format!("{what}: {v} is not a number from 0 to {limit}"));
        }
    }
    if let Some(plan) = &def.probes {
        errors.extend(plan.limit_errors());
        if plan.perplexity.as_ref().is_some_and(|p| p.text.is_some()) {
            errors.push(
                "probes.perplexity.text: a study cannot name a file; the server's own probe plan (--probes) chooses the text".into(),
            );
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_bound_is_named() {
        let mut def: StudyDef = toml::from_str(
            "name = \"x\"\nprofile = \"p\"\nmodel = \"m\"\n[space]\nthreads = [1, 2]\n",
        )
        .unwrap();
        assert!(check(&def).is_empty());
        def.name = "n".repeat(MAX_NAME + 1);
        def.constraints = vec!["true".into(); MAX_CONSTRAINTS + 1];
        def.budget.max_trials = MAX_TRIALS + 1;
        def.budget.max_minutes = Some(f64::INFINITY);
        let all = check(&def).join("\n");
        for expected in [
            "characters in the name: 201, over the limit of 200",
            "constraints: 33, over the limit of 32",
            "budget.max_trials: 100001",
            "budget.max_minutes: inf",
        ] {
            assert!(all.contains(expected), "missing `{expected}` in:\n{all}");
        }
    }

    #[test]
    fn a_study_names_no_perplexity_file() {
        let def: StudyDef = toml::from_str(
            "name = \"x\"\nprofile = \"p\"\nmodel = \"m\"\n[probes.perplexity]\ntext = \"/etc/shadow\"\n",
        )
        .unwrap();
        assert!(check(&def).join("\n").contains("cannot name a file"));
    }
}
