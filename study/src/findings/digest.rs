//! The findings in short, for the top of a page: what to run, what
//! matters, what does not, what is still unknown and how noisy the machine
//! was, each a line that names its settings; the sections below give the
//! numbers and the trials behind each.

use std::collections::BTreeMap;

use super::Finding;
use super::numbers::{ratio_text, small};
use super::text::{config_text, names};
use crate::metric::{Metric, Scale};

/// Settings named on one line before "and N more".
const SHOWN: usize = 6;

/// The findings in short, as a markdown list; `None` with nothing to say.
pub fn digest(findings: &[Finding]) -> Option<String> {
    let lines: Vec<String> = [run(findings), matters(findings), not_matters(findings)]
        .into_iter()
        .chain([unknown(findings), noise(findings)])
        .flatten()
        .collect();
    (!lines.is_empty())
        .then(|| lines.iter().map(|l| format!("- {l}")).collect::<Vec<_>>().join("\n"))
}

/// What to run: only a pick confirmed by running it again is named as such.
fn run(findings: &[Finding]) -> Option<String> {
    let confirmed = findings.iter().find_map(|f| match f {
        Finding::Confirmed { settings, ratios, pairs, held, .. } => {
            Some((settings, ratios, pairs, held))
        }
        _ => None,
    });
    if let Some((settings, ratios, pairs, held)) = confirmed {
        let each: Vec<String> =
            ratios.iter().map(|(m, r)| format!("{} {}", m.label(), ratio_text(r))).collect();
        return Some(if *held {
            format!(
                "**Run** `{}`: confirmed over {pairs} runs beside the baseline ({}).",
                config_text(settings),
                each.join("; ")
            )
        } else {
            format!(
                "**Keep the baseline**: the pick `{}` did not hold up when run {pairs} more times beside it ({}).",
                config_text(settings),
                each.join("; ")
            )
        });
    }
    let measured = findings.iter().find_map(|f| match f {
        Finding::Balanced { trial, settings, .. } => Some((*trial, settings, "balanced pick")),
        _ => None,
    });
    let measured = measured.or_else(|| {
        findings.iter().find_map(|f| match f {
            Finding::Best { trial, settings, .. } => Some((*trial, settings, "best trial")),
            _ => None,
        })
    })?;
    let (trial, settings, what) = measured;
    Some(format!(
        "**Not confirmed yet**: the {what} is trial {trial}, `{}`, not yet run again beside the baseline.",
        config_text(settings)
    ))
}

/// Settings grouped by metric, in the order the findings name them.
fn by_metric<'a>(items: impl Iterator<Item = (Metric, &'a str)>) -> Vec<(Metric, Vec<String>)> {
    let mut out: Vec<(Metric, Vec<String>)> = Vec::new();
    for (metric, setting) in items {
        let at = match out.iter().position(|(m, _)| *m == metric) {
            Some(at) => at,
            None => {
                out.push((metric, Vec::new()));
                out.len() - 1
            }
        };
        if !out[at].1.iter().any(|s| s == setting) {
            out[at].1.push(setting.to_string());
        }
    }
    out
}

/// At most [`SHOWN`] names, then how many more.
fn some_names(settings: &[String]) -> String {
    let shown = names(&settings[..settings.len().min(SHOWN)]);
    match settings.len().saturating_sub(SHOWN) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

/// A size on the metric's scale: `12.5 %`, `3.0 points`.
fn size(metric: Metric, x: f64) -> String {
    match metric.scale() {
        Scale::Ratio => format!("{:.1} %", x.abs()),
        Scale::Rate => format!("{:.1} points", x.abs()),
        Scale::Difference => small(x.abs()),
    }
}

/// The effects claimed, the largest first on each metric.
fn matters(findings: &[Finding]) -> Option<String> {
    // (size, setting, where it was shown when not at the baseline)
    let mut effects: BTreeMap<Metric, Vec<(f64, &str, String)>> = BTreeMap::new();
    for f in findings {
        if let Finding::Effect { setting, metric, size_pct, at, .. } = f {
            let at = at.as_ref().map_or(String::new(), |(p, v)| format!(" with `{p}` = {v}"));
            effects.entry(*metric).or_default().push((*size_pct, setting, at));
        }
    }
    let together: Vec<String> = findings
        .iter()
        .filter_map(|f| match f {
            Finding::Interaction { settings: (a, b), metric, .. } => {
                Some(format!("`{a}` with `{b}` on {}", metric.label()))
            }
            _ => None,
        })
        .collect();
    if effects.is_empty() && together.is_empty() {
        return None;
    }
    let mut parts: Vec<String> = effects
        .into_iter()
        .map(|(metric, mut list)| {
            list.sort_by(|a, b| b.0.abs().total_cmp(&a.0.abs()));
            let each: Vec<String> = list
                .iter()
                .take(SHOWN)
                .map(|(x, s, at)| format!("`{s}` ({} apart{at})", size(metric, *x)))
                .collect();
            format!("on {}: {}", metric.label(), each.join(", "))
        })
        .collect();
    if !together.is_empty() {
        parts.push(format!("acting together: {}", together.join(", ")));
    }
    Some(format!("**What matters** — {}.", parts.join("; ")))
}

/// Settings shown to change nothing beyond the margin.
fn not_matters(findings: &[Finding]) -> Option<String> {
    let list = by_metric(findings.iter().filter_map(|f| match f {
        Finding::NoEffect { setting, metric, .. } => Some((*metric, setting.as_str())),
        _ => None,
    }));
    // Where a claim does not reach everywhere, the reader is told so.
    let partial = findings
        .iter()
        .any(|f| matches!(f, Finding::NoEffect { unshown, .. } if !unshown.is_empty()));
    (!list.is_empty()).then(|| {
        let parts: Vec<String> = list
            .iter()
            .map(|(m, settings)| format!("on {}: {}", m.label(), some_names(settings)))
            .collect();
        let reach = if partial { " (some only where they were tried: see below)" } else { "" };
        format!("**What does not matter**, within the margin — {}{reach}.", parts.join("; "))
    })
}

/// What the data cannot separate yet, with where to read why.
fn unknown(findings: &[Finding]) -> Option<String> {
    let list = by_metric(findings.iter().filter_map(|f| match f {
        Finding::NotDetermined { setting, metric, .. } => Some((*metric, setting.as_str())),
        _ => None,
    }));
    (!list.is_empty()).then(|| {
        let parts: Vec<String> = list
            .iter()
            .map(|(m, settings)| format!("on {}: {}", m.label(), some_names(settings)))
            .collect();
        format!(
            "**Still unknown** — {} (why, and what would settle it: \"Not determined yet\").",
            parts.join("; ")
        )
    })
}

/// How noisy each measure was, and where too noisy to tell.
fn noise(findings: &[Finding]) -> Option<String> {
    let parts: Vec<String> = findings
        .iter()
        .filter_map(|f| match f {
            Finding::Noise { metric, trial, margin, too_noisy, .. } => {
                let unit = |x: f64| match metric.scale() {
                    Scale::Ratio => format!("{x:.1} %"),
                    Scale::Rate => format!("{x:.1} points"),
                    Scale::Difference => small(x),
                };
                Some(if *too_noisy {
                    format!(
                        "{} **too noisy to tell** (±{} a trial against a ±{} margin)",
                        metric.label(),
                        unit(*trial),
                        unit(*margin)
                    )
                } else {
                    format!(
                        "{} ±{} a trial (margin ±{})",
                        metric.label(),
                        unit(*trial),
                        unit(*margin)
                    )
                })
            }
            _ => None,
        })
        .collect();
    (!parts.is_empty()).then(|| format!("**Noise** — {}.", parts.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::{Interval, Undetermined};
    use crate::metric::Goal;

    fn settings(pairs: &[(&str, &str)]) -> engine_bridge::Settings {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn names_a_pick_to_run_only_once_confirmed() {
        let best = Finding::Best {
            measure: crate::metric::Measure::Metric(Metric::DecodeTps),
            goal: Goal::Max,
            trial: 7,
            value: 50.0,
            settings: settings(&[("threads", "4")]),
        };
        let said = digest(std::slice::from_ref(&best)).unwrap();
        assert!(said.contains("**Not confirmed yet**: the best trial is trial 7"), "{said}");
        assert!(!said.contains("**Run**"), "{said}");
        let ratio = Interval { est: 1.3, lo: 1.2, hi: 1.4 };
        let confirmed = |held| Finding::Confirmed {
            settings: settings(&[("threads", "4")]),
            balanced: false,
            ratios: vec![(Metric::DecodeTps, ratio)],
            pairs: 3,
            trials: vec![8, 9],
            held,
        };
        let said = digest(&[best.clone(), confirmed(true)]).unwrap();
        assert!(said.starts_with("- **Run** `threads=4`: confirmed over 3 runs"), "{said}");
        let said = digest(&[best, confirmed(false)]).unwrap();
        assert!(said.starts_with("- **Keep the baseline**"), "{said}");
        assert!(digest(&[]).is_none());
    }

    #[test]
    fn groups_what_is_unknown_by_metric_once_each() {
        let open = |s: &str, m| Finding::NotDetermined {
            setting: s.into(),
            metric: m,
            reason: Undetermined::TooFew,
        };
        let found = [
            open("a", Metric::DecodeTps),
            open("b", Metric::DecodeTps),
            open("a", Metric::PeakRssBytes),
            open("a", Metric::DecodeTps),
        ];
        let said = digest(&found).unwrap();
        assert_eq!(said.matches("**Still unknown**").count(), 1, "{said}");
        assert!(said.contains(&format!("on {}: `a`, `b`;", Metric::DecodeTps.label())), "{said}");
    }
}
