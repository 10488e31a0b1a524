//! How far within each bound a configuration would measure: each limit's
//! slack (see [`Observation::slack`]) has a linear model of every setting
//! and pair, as an objective does; a draw whose slack is below 0 breaks
//! the limit.
//!
//! Told only that a trial broke a bound, a model of 0 and 1 spreads the
//! breach over every setting the trial touched; the slack says by how
//! much, and memory adds up over the layers, the caches and the buffers.
//! On `bounded` (the fastest decode within 8 GiB of GPU memory) a model
//! of 0 and 1 kept proposing a layer or two more than fits, with each
//! cache type in turn: 33 trials to 95 % of the best over 45 seeds, 19
//! with the slack's model. A Gaussian process bending it, as the
//! objectives have, took `bounded` from 18 trials to 16 over 15 seeds,
//! but `floor` (the least memory and divergence that still decodes 16
//! tokens a second, measured with a heavy tail) from 101 to more than
//! 200, and as far with its residuals drawn in to 1 or 2 robust
//! deviations. Without the tail, the process and the linear model alone
//! both take 45: the tail is what makes `floor` hard. A trial slowed by
//! one slow request reads as a breach of the speed bound, and the slack
//! is fitted with Student's t errors ([`robust`]): `floor` from 83.5
//! trials (winsorized once) to 60.5 over 30 seeds, `bounded` 19 → 18.

use engine_bridge::Settings;
use rand::Rng;

use super::acquisition::Model;
use super::features::Encoder;
use super::regression::{DrawWise, LinearDraws};
use super::robust;
use crate::study::Observation;

/// `samples` draws of each limit's slack model, read as one: draw by
/// draw the least slack of any limit, below 0 where the draw breaks one;
/// `None` while no trial measured a slack, or every one measured was
/// within the limits.
pub(super) fn slack<'a>(
    history: &[Observation],
    encoder: &'a Encoder,
    samples: usize,
    rng: &mut impl Rng,
) -> Option<Model<'a>> {
    let measured: Vec<(&Settings, &Vec<f64>)> =
        history.iter().filter_map(|o| Some((&o.config, o.slack.as_ref()?))).collect();
    // Nothing broke a bound yet: nothing to steer clear of.
    if !measured.iter().any(|(_, slack)| slack.iter().any(|s| *s < 0.0)) {
        return None;
    }
    let rows: Vec<Vec<f64>> = measured.iter().map(|(c, _)| encoder.row(c)).collect();
    let limits = measured.first()?.1.len();
    let models: Vec<LinearDraws<'a>> = (0..limits)
        .filter_map(|i| {
            let y: Vec<f64> = measured.iter().map(|(_, slack)| slack[i]).collect();
            let fitted = robust::fit(&rows, &y, &encoder.classes)?;
            Some(LinearDraws { encoder, draws: (0..samples).map(|_| fitted.draw(rng)).collect() })
        })
        .collect();
    (!models.is_empty()).then(|| Box::new(DrawWise { models, pick: f64::min }) as Model<'a>)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use engine_bridge::Settings;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::super::failures::draws;
    use super::super::features::Encoder;
    use super::super::regression::{Draw, Posterior};
    use super::slack;
    use crate::planted::{Cost, Judge, Truth, World};
    use crate::study::{Metric, Observation, Study};

    /// A search world's study, and random configurations of it measured as
    /// a search's trials are.
    struct Sampled {
        world: World,
        study: Study,
        /// The baseline's measurement, which relative limits go by.
        baseline: Option<BTreeMap<Metric, f64>>,
    }

    impl Sampled {
        fn of(name: &str, rng: &mut StdRng) -> Self {
            let world = crate::planted::search_worlds()
                .into_iter()
                .find(|w| w.name == name)
                .expect("the world");
            let study = world.study("bayes", 0, 60);
            let baseline = world.measure(&study.baseline, rng).ok();
            Sampled { world, study, baseline }
        }

        fn full(&self, c: &Settings) -> Settings {
            let mut out = self.study.baseline.clone();
            out.extend(c.clone());
            out
        }

        /// `n` random configurations that ran, measured with the world's
        /// noise (its heavy tail too).
        fn trials(&self, n: usize, rng: &mut StdRng) -> Vec<Observation> {
            let mut history = Vec::new();
            while history.len() < n {
                let config = self.study.space.sample(rng);
                if let Ok(m) = self.world.measure_in_search(&self.full(&config), 0, rng) {
                    history.push(self.study.observe(config, Some(&m), self.baseline.as_ref()));
                }
            }
            history
        }

        /// A random configuration that runs, and its true metrics.
        fn running(&self, rng: &mut StdRng) -> (Settings, BTreeMap<Metric, f64>) {
            loop {
                let c = self.study.space.sample(rng);
                if let Truth::Runs(m) = (self.world.truth)(&self.full(&c)) {
                    return (c, m);
                }
            }
        }
    }

    #[test]
    fn a_bound_is_learned_from_how_far_within_it_each_trial_measured() {
        // `bounded`: the fastest decode within 8 GiB of GPU memory and
        // 0.01 nats of divergence. Fitted to forty random trials that
        // ran, five times over, the slack models tell which of a thousand
        // other configurations that run break a bound with far fewer
        // errors than a model of 0 and 1 told only which trials broke one
        // (56 against 564 as written).
        let mut rng = StdRng::seed_from_u64(5);
        let sampled = Sampled::of("bounded", &mut rng);
        let study = &sampled.study;
        let judge = Judge::new(&sampled.world, study, Cost::default());
        let encoder = Encoder::for_space(&study.space, &study.baseline);
        let (mut by_slack, mut by_breach) = (0, 0);
        for _ in 0..5 {
            let history = sampled.trials(40, &mut rng);
            assert!(history.iter().any(|o| !o.feasible) && history.iter().any(|o| o.feasible));
            let told: Vec<Observation> =
                history.iter().cloned().map(|o| Observation { slack: None, ..o }).collect();
            let rows: Vec<Vec<f64>> = history.iter().map(|o| encoder.row(&o.config)).collect();
            let slack = slack(&history, &encoder, 32, &mut rng).unwrap();
            let breach = draws(&told, &rows, &encoder, 32, &mut rng).unwrap();
            for _ in 0..1000 {
                let (c, _) = sampled.running(&mut rng);
                let breaks = judge.values(study, &c).is_none();
                let most = |d: Vec<f64>, broken: fn(f64) -> bool| {
                    d.iter().filter(|v| broken(**v)).count() * 2 > d.len()
                };
                by_slack += usize::from(most(slack.at(&c), |v| v < 0.0) != breaks);
                by_breach += usize::from(most(breach.at(&c), |v| v >= 0.5) != breaks);
            }
        }
        assert!(
            (by_slack as f64) < 0.3 * by_breach as f64,
            "{by_slack} of 5,000 told wrong by the slack, {by_breach} by the breaches alone"
        );
    }

    #[test]
    fn a_speed_bound_measured_with_a_heavy_tail_is_fitted_robustly() {
        // `floor`: decode at least 16 tokens a second, a tenth of the
        // speeds slowed 1.5 to 4 times by one slow request. Fitted to 80
        // random trials that ran, five times over, the slack's model with
        // t errors tells which of a thousand other configurations break
        // the bound with fewer errors than one fitted as if the errors
        // were Gaussian (248 against 362 as written; winsorized once at 2.5
        // robust deviations, 294).
        let mut rng = StdRng::seed_from_u64(5);
        let sampled = Sampled::of("floor", &mut rng);
        let encoder = Encoder::for_space(&sampled.study.space, &sampled.study.baseline);
        let (mut robust, mut as_measured) = (0, 0);
        for _ in 0..5 {
            let history = sampled.trials(80, &mut rng);
            let rows: Vec<Vec<f64>> = history.iter().map(|o| encoder.row(&o.config)).collect();
            let y: Vec<f64> = history.iter().map(|o| o.slack.as_ref().unwrap()[0]).collect();
            let mut draws =
                |post: Posterior| -> Vec<Draw> { (0..32).map(|_| post.draw(&mut rng)).collect() };
            let fitted = draws(super::robust::fit(&rows, &y, &encoder.classes).unwrap());
            let plain = draws(Posterior::fit(&rows, &y, &encoder.classes).unwrap());
            for _ in 0..1000 {
                let (c, m) = sampled.running(&mut rng);
                let breaks = m[&Metric::DecodeTps] < 16.0;
                let row = encoder.row(&c);
                let says = |d: &[Draw]| d.iter().filter(|d| d.at(&row) < 0.0).count() * 2 > d.len();
                robust += usize::from(says(&fitted) != breaks);
                as_measured += usize::from(says(&plain) != breaks);
            }
        }
        assert!(
            (robust as f64) < 0.75 * as_measured as f64,
            "{robust} of 5,000 told wrong fitted robustly, {as_measured} as measured"
        );
    }
}
