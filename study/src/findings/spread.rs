//! The finding that heads a study's findings: how noisy its measurements
//! were (see [`super::noise`]), in the metric's own terms, and whether
//! that noise is beyond the margin a reader would act on. Where it is,
//! the findings say the machine was too noisy to tell, and the pages warn.

use std::fmt::Write as _;

use super::Finding;
use super::analysis::Analysis;
use super::numbers::{num, small};
use super::support::items_chance;
use crate::margins::Margins;
use crate::metric::{Metric, Scale};

/// A spread (as a log ratio for speeds and memory) in the metric's terms:
/// percent of a ratio, points of a share, nats of a divergence.
fn told(metric: Metric, x: f64) -> f64 {
    match metric.scale() {
        Scale::Ratio => (x.exp() - 1.0) * 100.0,
        Scale::Rate => x * 100.0,
        Scale::Difference => x,
    }
}

/// How noisy `a`'s metric was, where the study measured anything of it.
pub(super) fn spread(a: &Analysis, margins: &Margins) -> Option<Finding> {
    let n = &a.noise;
    if n.repeats.is_none() && n.reruns.is_none() && n.items.is_none() && n.slowed.is_empty() {
        return None;
    }
    let m = margins.on_model_scale(a.metric);
    // One trial's noise beyond the margin: no "no effect" can be shown in
    // a few trials, and only effects several times the margin stand out.
    let one = (a.sigma2.unwrap_or(0.0).max(a.floor()) + n.between(1)).sqrt();
    Some(Finding::Noise {
        metric: a.metric,
        repeats: n.repeats.map(|(v, trials)| (told(a.metric, a.as_log(v.sqrt())), trials)),
        reruns: n.reruns.map(|v| (n.baseline.len(), told(a.metric, a.as_log(v.sqrt())))),
        drift: n.drifted_by().map(|d| told(a.metric, a.as_log(d))),
        items: n.items.map(|(k, _)| (k, told(a.metric, items_chance(a)))),
        paired: n.paired.is_some(),
        trial: told(a.metric, a.as_log(one)),
        margin: told(a.metric, m),
        too_noisy: a.as_log(one) > m,
        slowed: n.slowed.clone(),
    })
}

/// The finding's paragraph.
pub(super) fn markdown(f: &Finding) -> String {
    let Finding::Noise {
        metric,
        repeats,
        reruns,
        drift,
        items,
        paired,
        trial,
        margin,
        too_noisy,
        slowed,
    } = f
    else {
        return String::new();
    };
    let unit = |x: f64| match metric.scale() {
        Scale::Ratio => format!("{} %", num(x)),
        Scale::Rate => format!("{} points", num(x)),
        Scale::Difference => format!("{} nats", small(x)),
    };
    let mut parts = Vec::new();
    if let Some((spread, trials)) = repeats {
        parts.push(format!(
            "a trial's own requests put its value within ±{} (median over {trials} trials)",
            unit(*spread)
        ));
    }
    // A share of few items repeats its greedy answers: its items speak for it.
    if let Some((runs, spread)) = reruns.filter(|_| items.is_none()) {
        parts.push(format!(
            "the baseline, run {runs} times, moved ±{} from run to run",
            unit(spread)
        ));
    }
    if let Some(d) = drift {
        parts.push(format!(
            "it drifted {}{} over the study, which is taken out of every trial before effects are judged",
            if *d >= 0.0 { "+" } else { "−" },
            unit(d.abs())
        ));
    }
    match items {
        Some((k, chance)) if *paired => parts.push(format!(
            "it is counted over {k} items, compared one by one between configurations: a trial typically differs from the baseline by up to {} by chance alone (the items they answered differently), however often each is run",
            unit(*chance)
        )),
        Some((k, chance)) => parts.push(format!(
            "it is counted over {k} items, so two configurations differ by up to {} by chance alone, however often each is run",
            unit(*chance)
        )),
        None => {}
    }
    if !slowed.is_empty() {
        let ids: Vec<String> = slowed.iter().map(i64::to_string).collect();
        parts.push(format!(
            "{} {} left out: most of {} requests ran far slower than {} fastest, slowed by something else on the machine",
            if slowed.len() == 1 { "trial" } else { "trials" },
            ids.join(", "),
            if slowed.len() == 1 { "its" } else { "their" },
            if slowed.len() == 1 { "its" } else { "each one's" },
        ));
    }
    let mut s = String::new();
    let _ = write!(s, "**How noisy {} was**: {}.", metric.label(), parts.join("; "));
    if *too_noisy {
        let _ = write!(
            s,
            " **Too noisy to tell** differences of the ±{} margin: one trial carries ±{}, so only effects several times that are claimed, and no \"no effect\" can be shown.",
            unit(*margin),
            unit(*trial)
        );
    } else {
        let _ = write!(
            s,
            " One trial carries ±{}, inside the ±{} margin.",
            unit(*trial),
            unit(*margin)
        );
    }
    s
}
