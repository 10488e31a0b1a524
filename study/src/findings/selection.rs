//! How a metric's model is chosen: each curve's scale and bends, and the
//! interactions that enter it.

use super::ALPHA;
use super::TrialFacts;
use super::design::{Design, Factor, Term};
use super::ols::{Fit, Gram, f_test};

/// At most this many interactions enter one metric's model.
const MAX_INTERACTIONS: usize = 6;
/// A model keeps at least this many degrees of freedom for the noise.
const MIN_NOISE_DF: usize = 3;

/// Each curve on the scale (log or plain), and with the bends (at the
/// values' quantiles or evenly along the range), that fits the
/// main-effects model best: a speed may follow the thread count or its
/// logarithm. Every choice has as many columns.
pub(super) fn choose_scales(factors: &mut [Factor], measured: &[(&TrialFacts, f64)]) {
    let rss = |factors: &[Factor]| {
        let design = Design::new(factors.to_vec(), 0, None);
        let rows: Vec<Vec<f64>> = measured.iter().map(|(t, _)| design.row(&t.settings)).collect();
        let ys: Vec<f64> = measured.iter().map(|(_, y)| *y).collect();
        let mains: Vec<Term> = (0..factors.len()).map(Term::Main).collect();
        Fit::new(&Gram::new(&rows, &ys), &design.columns(&mains)).rss
    };
    for i in 0..factors.len() {
        for other in factors[i].alternatives() {
            let before = rss(factors);
            let kept = std::mem::replace(&mut factors[i], other);
            if rss(factors) >= before {
                factors[i] = kept;
            }
        }
    }
}

/// Interactions chosen by forward selection: the pair (or the plan times a
/// factor) that explains most beyond the model so far enters while its
/// p-value, times the number of candidates still in the running, stays
/// under [`ALPHA`].
pub(super) fn select_pairs(
    design: &Design,
    gram: &Gram,
    mains: &[Term],
    floor: f64,
) -> Vec<(Term, f64)> {
    let mut chosen: Vec<(Term, f64)> = Vec::new();
    let mut candidates: Vec<Term> =
        design.terms.iter().map(|(t, _)| *t).filter(|t| t.acts_with_another()).collect();
    while chosen.len() < MAX_INTERACTIONS && !candidates.is_empty() {
        let mut terms = mains.to_vec();
        terms.extend(chosen.iter().map(|(t, _)| *t));
        let current = Fit::new(gram, &design.columns(&terms));
        let best = candidates
            .iter()
            .filter_map(|c| {
                let mut with = terms.clone();
                with.push(*c);
                let full = Fit::new(gram, &design.columns(&with));
                if full.df() < MIN_NOISE_DF {
                    return None;
                }
                let (p, _) = f_test(&current, &full, floor)?;
                Some((*c, p))
            })
            .min_by(|a, b| a.1.total_cmp(&b.1));
        match best {
            Some((term, p)) if p * candidates.len() as f64 <= ALPHA => {
                chosen.push((term, p));
                candidates.retain(|c| *c != term);
            }
            _ => break,
        }
    }
    chosen
}
