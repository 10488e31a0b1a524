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
//! 200: a slowed trial reads as a breach, and the process carries it to
//! the configurations around it.

use engine_bridge::Settings;
use rand::Rng;

use super::acquisition::Drawn;
use super::features::Encoder;
use super::regression::{LinearDraws, Posterior};
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
) -> Option<Box<dyn Drawn + 'a>> {
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
            let fitted = Posterior::fit(&rows, &y, &encoder.classes)?;
            Some(LinearDraws { encoder, draws: (0..samples).map(|_| fitted.draw(rng)).collect() })
        })
        .collect();
    (!models.is_empty()).then(|| Box::new(Least(models)) as Box<dyn Drawn + 'a>)
}

/// Several models' draws read as one, draw by draw the smallest of them:
/// the limits' least slack.
struct Least<'a>(Vec<LinearDraws<'a>>);

impl Drawn for Least<'_> {
    fn at(&self, config: &Settings) -> Vec<f64> {
        let mut each = self.0.iter().map(|m| m.at(config));
        let first = each.next().unwrap_or_default();
        each.fold(first, |least, v| least.into_iter().zip(v).map(|(a, b)| a.min(b)).collect())
    }
}

#[cfg(test)]
mod tests {
    use engine_bridge::Settings;
    use rand::SeedableRng;

    use super::super::failures::draws;
    use super::super::features::Encoder;
    use super::slack;
    use crate::planted::{Cost, Judge, Truth};
    use crate::study::Observation;

    #[test]
    fn a_bound_is_learned_from_how_far_within_it_each_trial_measured() {
        // `bounded`: the fastest decode within 8 GiB of GPU memory and
        // 0.01 nats of divergence. Fitted to forty random trials that
        // ran, five times over, the slack models tell which of a thousand
        // other configurations that run break a bound with far fewer
        // errors than a model of 0 and 1 told only which trials broke one
        // (56 against 564 as written).
        let world = crate::planted::search_worlds()
            .into_iter()
            .find(|w| w.name == "bounded")
            .expect("the world");
        let study = world.study("bayes", 0, 60);
        let judge = Judge::new(&world, &study, Cost::default());
        let encoder = Encoder::for_space(&study.space, &study.baseline);
        let full = |c: &Settings| {
            let mut out = study.baseline.clone();
            out.extend(c.clone());
            out
        };
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let baseline = world.measure(&study.baseline, &mut rng).ok();
        let (mut by_slack, mut by_breach) = (0, 0);
        for _ in 0..5 {
            let mut history = Vec::new();
            while history.len() < 40 {
                let config = study.space.sample(&mut rng);
                if let Ok(m) = world.measure(&full(&config), &mut rng) {
                    history.push(study.observe(config, Some(&m), baseline.as_ref()));
                }
            }
            assert!(history.iter().any(|o| !o.feasible) && history.iter().any(|o| o.feasible));
            let told: Vec<Observation> =
                history.iter().cloned().map(|o| Observation { slack: None, ..o }).collect();
            let rows: Vec<Vec<f64>> = history.iter().map(|o| encoder.row(&o.config)).collect();
            let slack = slack(&history, &encoder, 32, &mut rng).unwrap();
            let breach = draws(&told, &rows, &encoder, 32, &mut rng).unwrap();
            let mut judged = 0;
            while judged < 1000 {
                let c = study.space.sample(&mut rng);
                if matches!((world.truth)(&full(&c)), Truth::Fails(_)) {
                    continue;
                }
                judged += 1;
                let breaks = judge.values(&study, &c).is_none();
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
}
