//! A study that compares model files (quantizations of one model): what
//! each file costs and saves against the baseline's file, each measured at
//! the baseline's other settings, so that nothing else differs. Medians of
//! what ran, not a test: the effects say what the data can claim beyond
//! the noise.

use engine_bridge::Settings;
use serde::{Deserialize, Serialize};

use super::{Finding, TrialFacts};
use crate::metric::{Metric, Scale};

/// The metrics a file moves that a user choosing one weighs.
const WEIGHED: [Metric; 8] = [
    Metric::PeakRssBytes,
    Metric::PeakGpuBytes,
    Metric::DecodeTps,
    Metric::PrefillTps,
    Metric::KldMean,
    Metric::Perplexity,
    Metric::QualityScore,
    Metric::ContextPassRate,
];

/// One file against the baseline's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileRow {
    /// The file's name in the profile.
    pub file: String,
    /// The trials that loaded it at the baseline's other settings.
    pub trials: Vec<i64>,
    /// Per metric: the file's median, and its change from the baseline
    /// file's median on the metric's scale (a ratio, or a difference).
    pub changes: Vec<(Metric, f64, f64)>,
}

/// Each file the study loaded at the baseline's other settings, against
/// the baseline's file; `None` where the study does not vary `setting`
/// or the baseline's file has no such trial.
pub(super) fn compare(
    done: &[&TrialFacts],
    baseline: &engine_bridge::Settings,
    setting: &str,
) -> Option<Finding> {
    let base = baseline.get(setting)?;
    fn others<'a>(s: &'a Settings, setting: &str) -> Vec<(&'a String, &'a String)> {
        s.iter().filter(|(k, _)| k.as_str() != setting).collect()
    }
    let at_baseline: Vec<&TrialFacts> = done
        .iter()
        .copied()
        .filter(|t| others(&t.settings, setting) == others(baseline, setting))
        .collect();
    let mut files: Vec<&String> =
        at_baseline.iter().filter_map(|t| t.settings.get(setting)).collect();
    files.sort();
    files.dedup();
    let of = |file: &str| -> Vec<&TrialFacts> {
        at_baseline
            .iter()
            .copied()
            .filter(|t| t.settings.get(setting).is_some_and(|f| f == file))
            .collect()
    };
    let median = |trials: &[&TrialFacts], m: Metric| {
        let mut v: Vec<f64> = trials.iter().filter_map(|t| t.metrics.get(&m).copied()).collect();
        (!v.is_empty()).then(|| super::median(&mut v))
    };
    let base_trials = of(base);
    if base_trials.is_empty() || files.len() < 2 {
        return None;
    }
    let rows = files
        .into_iter()
        .filter(|f| *f != base)
        .map(|file| {
            let trials = of(file);
            let changes = WEIGHED
                .iter()
                .filter_map(|&m| {
                    let (x, b) = (median(&trials, m)?, median(&base_trials, m)?);
                    let change = match m.scale() {
                        Scale::Ratio if b > 0.0 => x / b,
                        Scale::Ratio => return None,
                        Scale::Rate | Scale::Difference => x - b,
                    };
                    Some((m, x, change))
                })
                .collect();
            FileRow { file: file.clone(), trials: trials.iter().map(|t| t.id).collect(), changes }
        })
        .collect();
    Some(Finding::Files {
        setting: setting.to_string(),
        base: base.clone(),
        base_trials: base_trials.iter().map(|t| t.id).collect(),
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::{findings, markdown};
    use crate::metric::{Goal, Measure};
    use tunebook_domain::Role;

    fn trial(id: i64, file: &str, threads: &str, rss: f64, decode: f64, kld: f64) -> TrialFacts {
        TrialFacts {
            id,
            role: (id == 1).then_some(Role::Baseline),
            settings: [
                ("model".to_string(), file.to_string()),
                ("threads".to_string(), threads.to_string()),
            ]
            .into(),
            done: true,
            metrics: [
                (Metric::PeakRssBytes, rss),
                (Metric::DecodeTps, decode),
                (Metric::KldMean, kld),
            ]
            .into(),
            ..Default::default()
        }
    }

    #[test]
    fn each_file_is_set_against_the_baseline_s_at_its_other_settings() {
        let trials = [
            trial(1, "q4_k_m", "8", 100.0, 30.0, 0.04),
            trial(2, "f16", "8", 320.0, 12.0, 0.0),
            trial(3, "q8_0", "8", 170.0, 20.0, 0.002),
            // At another thread count: not compared, whatever it measured.
            trial(4, "q8_0", "4", 999.0, 1.0, 0.9),
        ];
        let objectives = [(Measure::Metric(Metric::DecodeTps), Goal::Max)];
        let found = findings(&trials, &["model".to_string(), "threads".to_string()], &objectives);
        let Some(Finding::Files { base, base_trials, rows, .. }) =
            found.iter().find(|f| matches!(f, Finding::Files { .. }))
        else {
            panic!("no file comparison: {found:#?}")
        };
        assert_eq!((base.as_str(), base_trials.as_slice()), ("q4_k_m", &[1][..]));
        let q8 = rows.iter().find(|r| r.file == "q8_0").unwrap();
        assert_eq!(q8.trials, [3]);
        let change = |m: Metric| q8.changes.iter().find(|c| c.0 == m).unwrap().2;
        assert!((change(Metric::PeakRssBytes) - 1.7).abs() < 1e-9);
        assert!((change(Metric::DecodeTps) - 2.0 / 3.0).abs() < 1e-9);
        assert!((change(Metric::KldMean) + 0.038).abs() < 1e-9, "a difference, not a ratio");
        let text = markdown(&found);
        assert!(text.contains("against the baseline's `q4_k_m` (trials 1)"), "{text}");
        assert!(text.contains("`f16` (trials 2): peak RSS (bytes) 3.20×"), "{text}");
        assert!(text.contains("mean KL divergence 0.0020 (−0.0380)"), "{text}");
    }

    #[test]
    fn a_study_that_keeps_one_file_compares_none() {
        let trials = [
            trial(1, "q4_k_m", "8", 100.0, 30.0, 0.04),
            trial(2, "q4_k_m", "4", 100.0, 20.0, 0.04),
        ];
        let found = findings(&trials, &["threads".to_string()], &[]);
        assert!(!found.iter().any(|f| matches!(f, Finding::Files { .. })), "{found:#?}");
    }
}
