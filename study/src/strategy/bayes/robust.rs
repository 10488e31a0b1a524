//! A linear model that a few wild measurements do not bend: the errors
//! are Student's t rather than Gaussian, fitted by iterated reweighting
//! (the EM algorithm for the t of Lange, Little and Taylor, 1989, with
//! the scale read robustly from each round's residuals instead of
//! re-estimated from the weights). Each round weighs every trial by
//! `(ν + 1) / (ν + r²/s²)`, where `r` is what the last fit left there and
//! `s` their robust spread, and fits again: a trial far off the others'
//! trend counts as a much noisier one.
//!
//! A trial slowed by one slow request reads as a breach of a bound on a
//! speed, and a model fitted as if the errors were Gaussian spreads that
//! breach over every configuration like it. A single pass that draws the
//! wild slacks in (Huber's winsorizing) helps less: a handful of outliers
//! among few trials bend the first fit towards themselves, so their
//! residuals look ordinary; the rounds of reweighting undo the bend a
//! step at a time ([`FREEDOM`] has the figures).
//!
//! The objectives' linear models are fitted this way too, and the
//! processes fitted to what they leave weigh each trial as they did (a
//! trial's noise is the fitted noise over its weight, [`weighted`]).
//! With Gaussian errors, on `numa` (a twentieth of the speeds slowed 1.5
//! to 4 times), two slowed trials among 22 left the decode model's mean a
//! sixth to a third below what the front's trials measured, and the
//! process, to pass near one of them, held that its micro-batch (an idle
//! setting) slowed decode threefold: every untried micro-batch and
//! thread count for the batch then drew gains, and the search spent its
//! trials on them. The strategy benchmark, before and after, the same
//! seeds (15; `numa` 30, `draft` 60, `floor` 13): `numa` 26.5 trials →
//! 27 (75th percentile 60.5 → 48, 90th 147 → 90), `split` 66 → 57 (90th
//! percentile 169 → 83), `noise` 63 → 53, `ridge` 75 → 69, `pocket` 33 →
//! 28, `floor` 69.5 → 62, `offload` 36 → 34, and `cpu` 30 → 35,
//! `midrange` 19 → 21, `bounded` 17 → 19, `ten` 13 → 14, `draft` 14 →
//! 14.5; the others within a trial. Fitted with t errors while the
//! processes took every trial as exact, the objectives had cost
//! `offload` 58 → 68 trials.

use super::features::Class;
use super::regression::Posterior;

/// The t's degrees of freedom: the fewer, the heavier its tails and the
/// less a far trial counts. On `floor` (a speed bound, a tenth of the
/// speeds slowed 1.5 to 4 times; the strategy benchmark, 30 seeds side by
/// side, median trials to 95 % of the front with the 75th and 90th
/// percentiles): 62 (86, 109) at 2, 60.5 (79, 89) at 4, 70 (101, 140, one
/// search short at 200) at 8, against 83.5 (108, 184, two short)
/// winsorized once at 2.5 robust deviations. `bounded` (Gaussian noise,
/// 45 seeds): 21, 18 and 21, against 19. `floor` with Gaussian noise
/// only, at 4: 41.5 (55, 68), against 46.5 (62, 71) fitted as Gaussian.
const FREEDOM: f64 = 4.0;
/// Rounds of reweighting; the weights have settled by then.
const ROUNDS: usize = 5;
/// Trials before what a fit leaves says anything of its spread.
const ROBUST_FROM: usize = 8;

/// `y` on `rows` (columns of the given classes) with t errors of
/// [`FREEDOM`] degrees; `None` only when there is nothing to fit.
pub(super) fn fit(rows: &[Vec<f64>], y: &[f64], classes: &[Class]) -> Option<Posterior> {
    weighted(rows, y, classes).map(|(post, _)| post)
}

/// [`fit`], with the weight each trial had in the last round (all 1
/// before [`ROBUST_FROM`] trials, or where the fit passes through most of
/// them): about 1¼ for a trial on the trend, less the farther off it.
pub(super) fn weighted(
    rows: &[Vec<f64>],
    y: &[f64],
    classes: &[Class],
) -> Option<(Posterior, Vec<f64>)> {
    let mut post = Posterior::fit(rows, y, classes)?;
    let mut weights = vec![1.0; rows.len()];
    if rows.len() < ROBUST_FROM {
        return Some((post, weights));
    }
    for _ in 0..ROUNDS {
        let left: Vec<f64> = rows.iter().zip(y).map(|(r, v)| v - post.mean_at(r)).collect();
        let Some(spread) = robust_spread(&left) else { break };
        weights = left.iter().map(|r| (FREEDOM + 1.0) / (FREEDOM + (r / spread).powi(2))).collect();
        post = Posterior::fit_weighted(rows, y, Some(&weights), classes, 0.0)?;
    }
    Some((post, weights))
}

/// 1.4826 times the median absolute value: the standard deviation, were
/// the values Gaussian, that a minority of wild ones does not inflate.
/// `None` when more than half are 0 (a fit that passes through them).
fn robust_spread(left: &[f64]) -> Option<f64> {
    let mut size: Vec<f64> = left.iter().map(|r| r.abs()).collect();
    size.sort_by(f64::total_cmp);
    let spread = 1.4826 * size.get(size.len() / 2)?;
    (spread > 1e-12).then_some(spread)
}

#[cfg(test)]
mod tests {
    use super::super::features::Class;
    use super::super::regression::normal;
    use super::fit;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    /// A slope of 1 measured with Gaussian noise, a few points thrown far
    /// below: the t fit keeps the slope near 1 where a Gaussian fit is
    /// dragged off it.
    #[test]
    fn a_few_wild_measurements_do_not_bend_the_fit() {
        let mut rng = StdRng::seed_from_u64(3);
        let classes = [Class::Intercept, Class::Main(0)];
        let (mut robust, mut plain) = (0.0, 0.0);
        for _ in 0..20 {
            let rows: Vec<Vec<f64>> =
                (0..30).map(|i| vec![1.0, i as f64 / 29.0 * 2.0 - 1.0]).collect();
            let y: Vec<f64> = rows
                .iter()
                .enumerate()
                // Every tenth trial reads 3 lower, the last among them.
                .map(|(i, r)| r[1] + 0.1 * normal(&mut rng) - if i % 10 == 9 { 3.0 } else { 0.0 })
                .collect();
            let slope = |p: &super::Posterior| p.mean_at(&[1.0, 1.0]) - p.mean_at(&[1.0, 0.0]);
            robust += (slope(&fit(&rows, &y, &classes).unwrap()) - 1.0).abs();
            let gaussian = super::Posterior::fit(&rows, &y, &classes).unwrap();
            plain += (slope(&gaussian) - 1.0).abs();
        }
        assert!(robust < 0.3 * plain, "slope off by {robust} in all, {plain} fitted as Gaussian");
    }
}
