//! When the Gaussian processes' hyperparameters are fitted again. Their
//! fit is the costliest part of a proposal (the likelihood's cube at every
//! step of the ascent) and, past a few dozen trials, one more trial hardly
//! moves them: they are fitted at every trial up to [`EVERY_UP_TO`], then
//! each time the study has grown by a tenth, and kept between.
//!
//! What is kept is the fit at a trial count of the schedule, from the
//! trials up to that count: a resumed study, which has kept nothing, fits
//! them from the same trials and proposes what the uninterrupted one would
//! have.

use std::collections::HashMap;
use std::sync::Mutex;

use super::gp::Hyper;

/// Up to this many trials the hyperparameters are fitted at every one.
const EVERY_UP_TO: usize = 40;
/// Past it, again when the trials have grown by this factor.
const GROWTH: f64 = 1.1;

/// The trial count of the latest fit for a study of `n` trials: `n` itself
/// up to [`EVERY_UP_TO`], then the last of the schedule at or below `n`.
pub(super) fn fitted_at(n: usize) -> usize {
    if n <= EVERY_UP_TO {
        return n;
    }
    let mut at = EVERY_UP_TO;
    loop {
        let next = ((at as f64 * GROWTH).ceil() as usize).max(at + 1);
        if next > n {
            return at;
        }
        at = next;
    }
}

/// The hyperparameters fitted so far, by objective and trial count.
#[derive(Default)]
pub(super) struct Kept(Mutex<HashMap<(usize, usize), Hyper>>);

impl Kept {
    /// Objective `j`'s hyperparameters fitted at `at` trials: kept, or
    /// fitted by `fit` (`None` when there is nothing to fit) and kept.
    pub fn get_or_fit(
        &self,
        j: usize,
        at: usize,
        fit: impl FnOnce() -> Option<Hyper>,
    ) -> Option<Hyper> {
        if let Some(h) = self.0.lock().expect("kept fits").get(&(j, at)) {
            return Some(h.clone());
        }
        let h = fit()?;
        let mut kept = self.0.lock().expect("kept fits");
        // Only the latest count is needed again: older ones go.
        kept.retain(|(k, a), _| *k != j || *a >= at);
        kept.insert((j, at), h.clone());
        Some(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_trial_at_first_then_each_tenth_more() {
        assert_eq!((1..=40).map(fitted_at).collect::<Vec<_>>(), (1..=40).collect::<Vec<_>>());
        assert_eq!(fitted_at(43), 40);
        assert_eq!(fitted_at(44), 44);
        // Never ahead of the trials, never behind by more than a tenth.
        for n in 41..5000 {
            let at = fitted_at(n);
            assert!(at <= n && n as f64 <= at as f64 * GROWTH + 1.0, "{n}: {at}");
        }
        // Few fits in all: about 30 for a thousand trials after the first 40.
        let fits: std::collections::BTreeSet<usize> = (41..=1000).map(fitted_at).collect();
        assert!(fits.len() < 40, "{}", fits.len());
    }

    #[test]
    fn a_fit_is_kept_and_the_older_one_let_go() {
        let kept = Kept::default();
        let h = |s: f64| Hyper { scales: vec![s], signal: 0.0, noise: -4.0 };
        let mut fits = 0;
        for _ in 0..3 {
            kept.get_or_fit(0, 44, || {
                fits += 1;
                Some(h(1.0))
            });
        }
        assert_eq!(fits, 1, "fitted once, then kept");
        let other = kept.get_or_fit(1, 44, || Some(h(2.0))).unwrap();
        assert_eq!(other.scales, [2.0], "each objective its own");
        kept.get_or_fit(0, 49, || Some(h(3.0)));
        assert_eq!(kept.0.lock().unwrap().len(), 2, "objective 0's fit at 44 let go");
        assert!(kept.get_or_fit(0, 1, || None).is_none(), "nothing to fit: none kept");
    }
}
