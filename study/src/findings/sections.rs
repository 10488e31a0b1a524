//! The sections of a write-up: which findings each holds, and each
//! section, or the whole write-up, in markdown.

use super::text::names;
use super::{Finding, Undetermined};
use crate::metric::Metric;

/// Which findings a section of a write-up holds.
pub type Pick = fn(&Finding) -> bool;

/// The sections of a write-up, in order: a key that names it (reports
/// find their cells by it), a title and which findings it holds.
pub const SECTIONS: [(&str, &str, Pick); 13] = [
    ("noise", "How noisy the measurements were", |f| matches!(f, Finding::Noise { .. })),
    ("best", "Best configurations", |f| {
        matches!(
            f,
            Finding::Best { .. }
                | Finding::Boundary { .. }
                | Finding::Balanced { .. }
                | Finding::Confirmed { .. }
        )
    }),
    ("at_pick", "At the pick", |f| matches!(f, Finding::AtPick { .. })),
    ("free_wins", "Free wins", |f| matches!(f, Finding::FreeWin { .. })),
    ("effects", "What each setting changes", |f| {
        matches!(f, Finding::Effect { .. } | Finding::Files { .. })
    }),
    ("interactions", "Settings that act together", |f| matches!(f, Finding::Interaction { .. })),
    ("no_effect", "No effect, shown within the margin", |f| matches!(f, Finding::NoEffect { .. })),
    ("not_determined", "Not determined yet", |f| matches!(f, Finding::NotDetermined { .. })),
    ("anomalies", "Anomalies", |f| matches!(f, Finding::Anomaly { .. })),
    ("failures", "Failures", |f| matches!(f, Finding::Failures { .. })),
    ("ceiling", "Ceiling", |f| matches!(f, Finding::Ceiling { .. })),
    ("plan", "Memory against the plan", |f| matches!(f, Finding::Planned { .. })),
    ("drift", "Drift", |f| matches!(f, Finding::Drift { .. })),
];

impl Undetermined {
    /// Why, in a few words.
    pub fn text(&self) -> String {
        match self {
            Undetermined::Aliased { with } if !with.is_empty() => {
                format!("changed only together with {}", names(with))
            }
            Undetermined::Aliased { .. } => "never changed on its own".into(),
            Undetermined::MoreTrials { about: Some(1) } => {
                "about 1 more trial would decide it".into()
            }
            Undetermined::MoreTrials { about: Some(n) } => {
                format!("about {n} more trials would decide it")
            }
            Undetermined::MoreTrials { about: None } => {
                "the noise hides it: many more trials than this study ran would be needed".into()
            }
            Undetermined::TooFew => "too few trials to judge".into(),
            Undetermined::Unreached => {
                "not measured beside the other settings' values there: runs changed in it alone would".into()
            }
            Undetermined::FewItems { items, chance } => {
                format!("{items} items cannot tell a change under {:.0} points", chance * 100.0)
            }
        }
    }
}

/// Why some settings are not determined: the reason, and the settings.
type Why = (String, Vec<String>);

/// One section's findings as a markdown list, or `None` when it has none.
/// What is not determined yet comes one line a metric, its settings
/// grouped by why: "`a`, `b` and `c` (the noise hides it…)".
pub fn section_markdown(findings: &[Finding], pick: Pick) -> Option<String> {
    let mut items: Vec<String> = Vec::new();
    let mut open: Vec<(Metric, Vec<Why>)> = Vec::new();
    for f in findings.iter().filter(|f| pick(f)) {
        match f {
            Finding::NotDetermined { setting, metric, reason } => {
                let why = reason.text();
                let at = match open.iter().position(|(m, _)| m == metric) {
                    Some(at) => at,
                    None => {
                        open.push((*metric, Vec::new()));
                        open.len() - 1
                    }
                };
                let reasons = &mut open[at].1;
                match reasons.iter_mut().find(|(w, _)| *w == why) {
                    Some((_, settings)) => settings.push(setting.clone()),
                    None => reasons.push((why, vec![setting.clone()])),
                }
            }
            _ => items.push(format!("- {}", f.markdown())),
        }
    }
    items.extend(open.into_iter().map(|(m, reasons)| {
        let parts: Vec<String> =
            reasons.iter().map(|(why, settings)| format!("{} ({why})", names(settings))).collect();
        format!(
            "- **Not determined yet on {}**: {} — neither an effect nor its absence within the margin is shown yet.",
            m.label(),
            parts.join("; ")
        )
    }));
    (!items.is_empty()).then(|| items.join("\n"))
}

/// Every finding as a markdown document, section by section.
pub fn markdown(findings: &[Finding]) -> String {
    SECTIONS
        .iter()
        .filter_map(|(_, title, pick)| {
            Some(format!("## {title}\n\n{}\n\n", section_markdown(findings, *pick)?))
        })
        .collect()
}
