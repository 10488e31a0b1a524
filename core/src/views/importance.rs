//! How much each varied setting moves each objective, read off the
//! findings (never worked out again): the furthest change a setting's
//! effect was claimed with, the change a "no effect" was shown within, or
//! that it is not determined yet. The study page draws it.

use tunebook_study::findings::{Finding, Interval, Level};
use tunebook_study::{Metric, Scale};
use tunebook_views::types::{ImportanceRow, ImportanceView};

/// A change against the baseline in the unit the page draws: percent of a
/// ratio, points of a share, the metric's own for a difference.
fn told(metric: Metric, x: f64) -> f64 {
    match metric.scale() {
        Scale::Ratio => (x - 1.0) * 100.0,
        Scale::Rate => x * 100.0,
        Scale::Difference => x,
    }
}

/// The level furthest from the baseline's, told.
fn furthest(metric: Metric, levels: &[Level]) -> Option<(String, Interval)> {
    levels
        .iter()
        .filter_map(|l| Some((l, l.vs_base.as_ref()?)))
        .map(|(l, i)| {
            let t = |x| told(metric, x);
            (l.value.clone(), Interval { est: t(i.est), lo: t(i.lo), hi: t(i.hi) })
        })
        .max_by(|a, b| a.1.est.abs().total_cmp(&b.1.est.abs()))
}

/// Each of `objectives`' settings as the findings judged them, the
/// largest change first, then what is within the margin, then what is open.
pub fn importance(found: &[Finding], objectives: &[Metric]) -> Vec<ImportanceView> {
    objectives
        .iter()
        .filter_map(|&metric| {
            let mut rows: Vec<ImportanceRow> = Vec::new();
            let mut margin = None;
            for f in found {
                let (setting, verdict, change) = match f {
                    Finding::Effect { setting, metric: m, levels, .. } if *m == metric => {
                        (setting, "effect", furthest(metric, levels))
                    }
                    Finding::NoEffect { setting, metric: m, levels, .. } if *m == metric => {
                        (setting, "no_effect", furthest(metric, levels))
                    }
                    Finding::NotDetermined { setting, metric: m, .. } if *m == metric => {
                        (setting, "open", None)
                    }
                    Finding::Noise { metric: m, margin: x, .. } if *m == metric => {
                        margin = Some(*x);
                        continue;
                    }
                    _ => continue,
                };
                // A setting's first word stands (an effect before its
                // conditional restatements).
                if rows.iter().any(|r| &r.setting == setting) {
                    continue;
                }
                let (value, i) = change.map_or((String::new(), None), |(v, i)| (v, Some(i)));
                rows.push(ImportanceRow {
                    setting: setting.clone(),
                    value,
                    est: i.as_ref().map(|i| i.est),
                    lo: i.as_ref().map(|i| i.lo),
                    hi: i.as_ref().map(|i| i.hi),
                    verdict: verdict.into(),
                });
            }
            let rank = |r: &ImportanceRow| match r.verdict.as_str() {
                "effect" => 0,
                "no_effect" => 1,
                _ => 2,
            };
            rows.sort_by(|a, b| {
                let size = |r: &ImportanceRow| r.est.map_or(0.0, f64::abs);
                rank(a).cmp(&rank(b)).then(size(b).total_cmp(&size(a)))
            });
            (!rows.is_empty()).then(|| ImportanceView {
                metric: metric.name().into(),
                label: metric.label().into(),
                unit: match metric.scale() {
                    Scale::Ratio => "%",
                    Scale::Rate => "points",
                    Scale::Difference => "",
                }
                .into(),
                margin,
                rows,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tunebook_study::Goal;
    use tunebook_study::findings::Undetermined;

    fn level(value: &str, vs: Option<(f64, f64, f64)>) -> Level {
        Level {
            value: value.into(),
            median: 1.0,
            trials: vec![1],
            vs_base: vs.map(|(est, lo, hi)| Interval { est, lo, hi }),
        }
    }

    #[test]
    fn settings_rank_by_their_furthest_change_then_margin_then_open() {
        let m = Metric::DecodeTps;
        let found = vec![
            Finding::NotDetermined { setting: "c".into(), metric: m, reason: Undetermined::TooFew },
            Finding::Effect {
                setting: "a".into(),
                metric: m,
                goal: Goal::Max,
                base: "1".into(),
                log: true,
                levels: vec![
                    level("1", None),
                    level("2", Some((0.8, 0.75, 0.85))),
                    level("4", Some((1.1, 1.05, 1.15))),
                ],
                size_pct: 30.0,
                p_value: 0.001,
                peak: false,
                given: vec![],
                at: None,
            },
            Finding::Effect {
                setting: "b".into(),
                metric: Metric::PeakRssBytes,
                goal: Goal::Min,
                base: "x".into(),
                log: true,
                levels: vec![],
                size_pct: 5.0,
                p_value: 0.01,
                peak: false,
                given: vec![],
                at: None,
            },
        ];
        let views = importance(&found, &[m]);
        assert_eq!(views.len(), 1);
        let v = &views[0];
        assert_eq!((v.metric.as_str(), v.unit.as_str()), ("decode_tps", "%"));
        let rows: Vec<(&str, &str)> =
            v.rows.iter().map(|r| (r.setting.as_str(), r.verdict.as_str())).collect();
        assert_eq!(
            rows,
            [("a", "effect"), ("c", "open")],
            "another metric's effect is not this one's"
        );
        let a = &v.rows[0];
        assert_eq!(a.value, "2", "0.80× is further than 1.10×");
        assert!((a.est.unwrap() + 20.0).abs() < 1e-9 && (a.lo.unwrap() + 25.0).abs() < 1e-9);
        assert_eq!(v.rows[1].est, None);
        assert!(importance(&found, &[Metric::QualityScore]).is_empty());
    }
}
