//! What a configuration is worth under one draw of the models: the
//! hypervolume it would add to the front of what was measured (both seen
//! through the same drawn models, so that what a draw gets wrong
//! everywhere alike cancels out), counted in the objectives' own units
//! ([`Units`]) as a share of that front's, and, where nothing gains, how
//! it fares under a random weighting of the objectives. A configuration
//! the drawn risk model expects to fail gains nothing in that draw. A
//! gain is counted per unit of cost: a configuration that keeps the
//! running engine (it changes only request-time settings) costs its
//! probes, one that needs a reload costs [`RELOAD`] more.

/// What a reload costs, in units of a trial's probes. Loads of the models
/// this is for take minutes, their quick probes about one. On `ridge` (an
/// idle request-time `top_k`; the strategy benchmark, 30 seeds, 5 minutes
/// a load and 1 of probes) the searches take 79 trials and 7.0 modelled
/// hours to 95 % of the front, and with every trial costed as a reload
/// 99.5 trials and 9.7 hours: a repeat at another `top_k` is one more
/// measurement of a noisy point, and cheap. (Over 15 seeds of an earlier
/// search it had traded trials for time: 70 trials and 5.8 hours against
/// 61 and 6.1.)
pub(super) const RELOAD: f64 = 3.0;

use engine_bridge::Settings;
use rand::Rng;

/// A configuration's worth: hypervolume gain first, the weighting second.
pub(super) type Worth = (f64, f64);

/// How an objective's modelled values map back to its own units, in which
/// the hypervolume is counted: the front a user reads, and the one the
/// search is judged by, is in tokens a second and bytes, not in their
/// logarithms. Counted on the log scale, a front's slow and small end
/// weighs as much as its fast end: on `vllm` the searches spent trials
/// refining the configurations of a third of the best goodput, and
/// missed the best ones at 90 % of the GPU.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Units {
    /// Modelled as measured.
    AsModelled,
    /// Modelled as measured, and only between `lo` and `hi` (oriented):
    /// a rate from 0 to 1, a divergence from 0 up. A draw past either
    /// end is read as the end: a divergence drawn below 0 would gain over
    /// a measured 0 by nothing real. On `floor` (a divergence 0 for f16
    /// caches, measured with noise) the searches spent most of their
    /// trials on f16 caches at every layer count for such gains.
    Clamped { lo: f64, hi: f64 },
    /// Modelled as the logarithm, oriented by `sign` (+1 a larger value
    /// is better, −1 a smaller one): the value is `sign·exp(sign·y)`.
    Log { sign: f64 },
}

impl Units {
    fn natural(self, y: f64) -> f64 {
        match self {
            Units::AsModelled => y,
            Units::Clamped { lo, hi } => y.clamp(lo, hi),
            Units::Log { sign } => sign * (sign * y).exp(),
        }
    }
}

/// A fitted model read through its draws: a configuration's value under
/// each one (the same draws for every configuration, so that each draw is
/// one whole function). Shared between threads: candidates are scored
/// on every core.
pub(super) trait Drawn: Sync {
    fn at(&self, config: &Settings) -> Vec<f64>;
}

/// A model read through its draws.
pub(super) type Model<'a> = Box<dyn Drawn + 'a>;

/// Several models' draws side by side, as one model: a mixture, whose
/// draws are some from each.
pub(super) struct Pooled<'a>(pub Vec<Box<dyn Drawn + 'a>>);

impl Drawn for Pooled<'_> {
    fn at(&self, config: &Settings) -> Vec<f64> {
        self.0.iter().flat_map(|m| m.at(config)).collect()
    }
}

pub(super) struct Acquisition<'a> {
    /// The last trial's settings (its engine runs now), and which settings
    /// are request-time; `None` when nothing ran yet.
    pub engine: Option<(Settings, &'a std::collections::BTreeSet<String>)>,
    /// Every objective's model, oriented so that larger is better.
    objectives: Vec<Box<dyn Drawn + 'a>>,
    samples: Vec<Sample>,
    /// The risk model: a draw above one half expects a failure; `None`
    /// when nothing failed.
    risk: Option<Model<'a>>,
    /// The bounds' least slack: a draw below 0 breaks one; `None` when no
    /// trial broke one.
    slack: Option<Model<'a>>,
    /// No trial was measured within every bound yet.
    nothing_within: bool,
    weights: Vec<f64>,
    /// The measured front's hypervolume, averaged over the draws: gains
    /// are shares of it, whatever the objectives' units.
    front: f64,
}

/// The measured front as one draw of the models sees it, in the
/// objectives' own units.
struct Sample {
    front: Vec<Vec<f64>>,
    reference: Vec<f64>,
    /// The reference as modelled, for the random weighting, which compares
    /// objectives by their modelled spread rather than by their units.
    modelled: Vec<f64>,
    units: Vec<Units>,
    /// With two objectives: the front's points by the first objective,
    /// largest first (the second then rises), for [`gain_2d`].
    staircase: Option<Vec<(f64, f64)>>,
}

/// The hypervolume `v` adds to the two-objective front `staircase` (sorted
/// as [`Sample::staircase`]) above `reference`: the area `v` dominates
/// less the part the front already does, in one pass and nothing
/// allocated, where a general hypervolume costs a sort and a copy of the
/// front for every candidate and draw.
fn gain_2d(staircase: &[(f64, f64)], v: (f64, f64), reference: (f64, f64)) -> f64 {
    let (rx, ry) = reference;
    if v.0 <= rx || v.1 <= ry {
        return 0.0;
    }
    // The front clipped to `v`'s box is still a staircase; its area there,
    // slab by slab along the first objective.
    let mut covered = 0.0;
    let mut iter = staircase.iter().map(|(x, y)| (x.min(v.0), y.min(v.1))).peekable();
    while let Some((x, y)) = iter.next() {
        let next_x = iter.peek().map_or(rx, |p| p.0).max(rx);
        if x > next_x && y > ry {
            covered += (x - next_x) * (y - ry);
        }
    }
    ((v.0 - rx) * (v.1 - ry) - covered).max(0.0)
}

/// The hypervolume `points` dominate above `reference` (all maximized).
fn volume(points: &[Vec<f64>], reference: &[f64]) -> f64 {
    let up = vec![optimizer::Direction::Maximize; reference.len()];
    let kept: Vec<Vec<f64>> =
        points.iter().filter(|p| p.iter().zip(reference).all(|(v, r)| v > r)).cloned().collect();
    if kept.is_empty() { 0.0 } else { optimizer::pareto::hypervolume(&kept, reference, &up) }
}

/// The hypervolume `v` adds to `front` above `reference`, any number of
/// objectives: the volume `v` dominates less what the front already does
/// within it, which is the volume of the front clipped to `v`'s box. Few
/// clipped points stay undominated, so this costs far less than the
/// volume of the whole front with `v`.
fn gain_clipped(front: &[Vec<f64>], v: &[f64], reference: &[f64]) -> f64 {
    if v.iter().zip(reference).any(|(a, r)| a <= r) {
        return 0.0;
    }
    let clipped: Vec<Vec<f64>> =
        front.iter().map(|f| f.iter().zip(v).map(|(a, b)| a.min(*b)).collect()).collect();
    let dominates = |q: &Vec<f64>, p: &Vec<f64>| q.iter().zip(p).all(|(a, b)| a >= b);
    let mut kept: Vec<Vec<f64>> = Vec::new();
    for (i, p) in clipped.iter().enumerate() {
        // Undominated, and the first of equal points.
        let beaten =
            clipped.iter().enumerate().any(|(k, q)| k != i && dominates(q, p) && (q != p || k < i));
        if !beaten {
            kept.push(p.clone());
        }
    }
    let whole: f64 = v.iter().zip(reference).map(|(a, r)| a - r).product();
    (whole - volume(&kept, reference)).max(0.0)
}

/// A tenth of objective `j`'s spread over `points` past the worst of them:
/// at least 0.1, or with `relative` a hundredth of the values' size.
fn past_worst(points: &[Vec<f64>], j: usize, relative: bool) -> f64 {
    if points.is_empty() {
        return f64::MIN / 4.0;
    }
    let col = || points.iter().map(|p| p[j]);
    let (lo, hi) = (col().fold(f64::MAX, f64::min), col().fold(f64::MIN, f64::max));
    let least = if relative { 0.1 * lo.abs().max(hi.abs()) } else { 0.1 };
    lo - 0.1 * (hi - lo).max(least)
}

impl Sample {
    /// `front`: the measured configurations' values under this draw, as
    /// modelled; `units`: how each objective's map to its own. The
    /// reference lies a tenth of the front's spread past its worst, in
    /// each objective's own units (for a logarithm's, at least a
    /// hundredth of the value: a front of one point still has a box).
    /// Mapped from a reference taken on the log scale, it sat far nearer
    /// the front, and on `pocket` (the context as an objective) left the
    /// short contexts' fast configurations next to no volume.
    fn new(front: Vec<Vec<f64>>, units: &[Units]) -> Self {
        let objectives = units.len();
        let modelled: Vec<f64> = (0..objectives).map(|j| past_worst(&front, j, false)).collect();
        let natural =
            |v: &[f64]| -> Vec<f64> { v.iter().zip(units).map(|(y, u)| u.natural(*y)).collect() };
        let front: Vec<Vec<f64>> = front.iter().map(|p| natural(p)).collect();
        let reference: Vec<f64> = (0..objectives)
            .map(|j| past_worst(&front, j, matches!(units[j], Units::Log { .. })))
            .collect();
        // Only the non-dominated points matter to a gain; keeping just
        // them makes scoring a candidate cost the front, not the history.
        let front: Vec<Vec<f64>> = front
            .iter()
            .filter(|p| {
                !front.iter().any(|q| q != *p && q.iter().zip(p.iter()).all(|(a, b)| a >= b))
            })
            .cloned()
            .collect();
        let staircase = (objectives == 2).then(|| {
            let mut points: Vec<(f64, f64)> = front.iter().map(|p| (p[0], p[1])).collect();
            points.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.total_cmp(&b.1)));
            points
        });
        Sample { front, reference, modelled, units: units.to_vec(), staircase }
    }

    /// The hypervolume gain of the values `y` (as modelled), and their
    /// random weighting.
    fn worth(&self, y: &[f64], weights: &[f64]) -> Worth {
        let v: Vec<f64> = y.iter().zip(&self.units).map(|(y, u)| u.natural(*y)).collect();
        let v = v.as_slice();
        let dominated = self.front.iter().any(|f| f.iter().zip(v).all(|(a, b)| a >= b));
        // With nothing measured there is no front to gain over, and a
        // reference to take volumes from: the weighting decides.
        let gain = if dominated || self.front.is_empty() {
            0.0
        } else if let Some(staircase) = &self.staircase {
            gain_2d(staircase, (v[0], v[1]), (self.reference[0], self.reference[1]))
        } else {
            gain_clipped(&self.front, v, &self.reference)
        };
        let tie = y.iter().zip(weights).zip(&self.modelled).map(|((y, w), r)| w * (y - r));
        (gain, tie.fold(f64::MAX, f64::min))
    }
}

impl<'a> Acquisition<'a> {
    /// `objectives`: every objective's model, `draws` draws each, with
    /// its units; `risk`, the chance to fail, and `slack`, the bounds'
    /// least slack (see [`super::failures`] and [`super::bounds`]); `measured`: the trials that
    /// ran within every bound.
    pub fn new(
        objectives: Vec<Box<dyn Drawn + 'a>>,
        units: Vec<Units>,
        (risk, slack): (Option<Model<'a>>, Option<Model<'a>>),
        measured: &[&Settings],
        draws: usize,
        rng: &mut impl Rng,
    ) -> Self {
        let weights = (0..objectives.len()).map(|_| rng.random::<f64>() + 0.05).collect();
        let values: Vec<Vec<Vec<f64>>> =
            measured.iter().map(|c| objectives.iter().map(|m| m.at(c)).collect()).collect();
        let samples = (0..draws)
            .map(|s| {
                let front = values.iter().map(|v| v.iter().map(|m| m[s]).collect()).collect();
                Sample::new(front, &units)
            })
            .collect::<Vec<_>>();
        let volumes = samples.iter().map(|s| volume(&s.front, &s.reference));
        let front = volumes.sum::<f64>() / draws.max(1) as f64;
        let front = if front.is_finite() && front > 0.0 { front } else { 1.0 };
        let nothing_within = measured.is_empty();
        Acquisition {
            engine: None,
            objectives,
            samples,
            risk,
            slack,
            nothing_within,
            weights,
            front,
        }
    }

    /// The load-time part of `config`, in order, without copying it: what
    /// [`Self::cost`] compares for every candidate scored.
    fn load_part<'s>(
        config: &'s Settings,
        request_time: &'s std::collections::BTreeSet<String>,
    ) -> impl Iterator<Item = (&'s String, &'s String)> {
        config.iter().filter(|(k, _)| !request_time.contains(*k))
    }

    /// Keeps the engine of the last trial running: what `config` costs is
    /// its probes; else a reload too.
    pub fn cost(&self, config: &Settings) -> f64 {
        match &self.engine {
            Some((running, request_time))
                if Self::load_part(config, request_time)
                    .eq(Self::load_part(running, request_time)) =>
            {
                1.0
            }
            _ => 1.0 + RELOAD,
        }
    }

    /// Notes the engine that runs now: the settings of `last`, the trial
    /// it was loaded for.
    pub fn running(
        &mut self,
        last: &Settings,
        request_time: &'a std::collections::BTreeSet<String>,
    ) {
        self.engine = Some((last.clone(), request_time));
    }

    /// Nothing was measured within the bounds yet, and the worth is how
    /// near a configuration comes to holding them (see [`Self::worth`]).
    pub fn seeks_the_bounds(&self) -> bool {
        self.nothing_within && self.slack.is_some()
    }

    /// The chance that `config` fails, as the risk model's draws see it
    /// on average, less how far within the bounds the slack's draws
    /// expect it on average: the lower, the likelier it counts.
    pub fn risk(&self, config: &Settings) -> f64 {
        let mean = |d: Vec<f64>| d.iter().sum::<f64>() / d.len().max(1) as f64;
        let fails = self.risk.as_ref().map_or(0.0, |r| mean(r.at(config)));
        fails - self.slack.as_ref().map_or(0.0, |s| mean(s.at(config)))
    }

    /// The mean worth over the draws, a draw whose risk model expects
    /// `config` to fail, or whose slack breaks a bound, counting no gain;
    /// `None` when every one does.
    ///
    /// Before any trial was measured within the bounds there is no front
    /// to gain over, and a random weighting of the objectives leads away
    /// from the bounds as often as not (on `floor`, the least memory that
    /// still decodes 16 tokens a second, it proposed the fewest layers on
    /// the GPU, far too slow, for 14 trials in a row): then the worth is
    /// the mean drawn slack, over the draws that run, and the search goes
    /// where the bounds are nearest to holding.
    pub fn worth(&self, config: &Settings) -> Option<Worth> {
        let risks = self.risk.as_ref().map(|r| r.at(config));
        let runs = |s: usize| risks.as_ref().is_none_or(|r| r.get(s).is_none_or(|v| *v < 0.5));
        let slack = self.slack.as_ref().map(|r| r.at(config));
        if self.seeks_the_bounds()
            && let Some(slack) = &slack
        {
            let drawn: Vec<f64> = (0..slack.len()).filter(|s| runs(*s)).map(|s| slack[s]).collect();
            let mean = drawn.iter().sum::<f64>() / drawn.len().max(1) as f64;
            return (!drawn.is_empty()).then_some((0.0, mean));
        }
        let holds = |s: usize| slack.as_ref().is_none_or(|r| r.get(s).is_none_or(|v| *v >= 0.0));
        let values: Vec<Vec<f64>> = self.objectives.iter().map(|m| m.at(config)).collect();
        let running: Vec<Worth> = (0..self.samples.len())
            .filter(|s| runs(*s) && holds(*s))
            .map(|s| {
                let v: Vec<f64> = values.iter().map(|m| m[s]).collect();
                self.samples[s].worth(&v, &self.weights)
            })
            .collect();
        if running.is_empty() {
            return None;
        }
        let n = self.samples.len() as f64;
        let gain = running.iter().map(|w| w.0).sum::<f64>() / n / self.front / self.cost(config);
        let tie = running.iter().map(|w| w.1).sum::<f64>() / running.len() as f64;
        Some((gain, tie))
    }
}

/// The worth of each of `pool` (see [`Acquisition::worth`]), by index,
/// those every draw expects to fail left out: scored on the machine's
/// cores, which are idle between trials (at most four).
pub(super) fn scored(acquisition: &Acquisition, pool: &[Settings]) -> Vec<(usize, Worth)> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()).min(4);
    let chunk = pool.len().div_ceil(cores).max(1);
    std::thread::scope(|scope| {
        let parts: Vec<_> = pool
            .chunks(chunk)
            .enumerate()
            .map(|(k, part)| {
                scope.spawn(move || {
                    let offset = k * chunk;
                    part.iter()
                        .enumerate()
                        .filter_map(|(i, c)| Some((offset + i, acquisition.worth(c)?)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        parts.into_iter().flat_map(|p| p.join().expect("scoring does not panic")).collect()
    })
}

/// Whether `a` is worth more than `b`.
pub(super) fn better(a: Worth, b: Worth) -> bool {
    a.0 > b.0 || (a.0 == b.0 && a.1 > b.1)
}

#[cfg(test)]
mod tests {
    use super::super::super::testing;
    use super::*;

    #[test]
    fn a_candidates_gain_is_the_general_hypervolumes() {
        // In two objectives (the staircase) and three (the clipped front),
        // on random fronts, for candidates inside and outside the
        // reference box, modelled as measured or on log scales: the gain
        // equals the front's volume with the candidate less its volume
        // without, in the objectives' own units.
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let (up, down) = (Units::Log { sign: 1.0 }, Units::Log { sign: -1.0 });
        for units in [
            vec![Units::AsModelled; 2],
            vec![Units::AsModelled; 3],
            vec![down, up],
            vec![up, down, Units::AsModelled],
        ] {
            let objectives = units.len();
            for round in 0..200 {
                let n = 1 + round % 40;
                let points: Vec<Vec<f64>> =
                    (0..n).map(|_| (0..objectives).map(|_| rng.random()).collect()).collect();
                let sample = Sample::new(points, &units);
                let weights = vec![1.0; objectives];
                for _ in 0..20 {
                    let y: Vec<f64> =
                        (0..objectives).map(|_| rng.random_range(-0.3..1.2)).collect();
                    let v: Vec<f64> = y.iter().zip(&units).map(|(y, u)| u.natural(*y)).collect();
                    let mut with = sample.front.clone();
                    with.push(v.clone());
                    let general =
                        volume(&with, &sample.reference) - volume(&sample.front, &sample.reference);
                    let (gain, _) = sample.worth(&y, &weights);
                    assert!((general - gain).abs() < 1e-9, "{general} against {gain} at {v:?}");
                    let clipped = gain_clipped(&sample.front, &v, &sample.reference);
                    assert!((general - clipped).abs() < 1e-9, "{general} against {clipped}");
                }
            }
        }
    }

    #[test]
    fn a_tenth_faster_counts_more_at_the_fast_end_of_the_front() {
        // A front of speed (log, larger better) against memory (log,
        // smaller better): 1 token/s at 1 GiB, 10 at 4 GiB, 20 at 8 GiB. A
        // tenth faster at the same memory adds more where tokens a second
        // are many (as the front is read, in its own units); on the log
        // scale the slow end would count as much or more.
        let (up, down) = (Units::Log { sign: 1.0 }, Units::Log { sign: -1.0 });
        let point = |speed: f64, gib: f64| vec![speed.ln(), -gib.ln()];
        let front = vec![point(1.0, 1.0), point(10.0, 4.0), point(20.0, 8.0)];
        let natural = Sample::new(front.clone(), &[up, down]);
        let logs = Sample::new(front, &[Units::AsModelled; 2]);
        let weights = [1.0, 1.0];
        let (slow, fast) = (point(1.1, 1.0), point(11.0, 4.0));
        let gain = |s: &Sample, v: &[f64]| s.worth(v, &weights).0;
        assert!(gain(&natural, &fast) > 5.0 * gain(&natural, &slow));
        assert!(gain(&logs, &fast) <= gain(&logs, &slow));
    }

    #[test]
    fn a_reload_costs_more_than_a_request_time_change() {
        let mut def = testing::study("bayes", "").def;
        def.space.insert("top_k".into(), serde_json::json!([1, 40]));
        def.baseline.insert("top_k".into(), serde_json::json!(40));
        let study = def.check(&engine_bridge::Catalog::llama_server(), &["m".into()]).unwrap();
        assert_eq!(study.request_time, ["top_k".to_string()].into(), "from the catalog");
        let mut rng = rand::rng();
        let mut acquisition = Acquisition::new(vec![], vec![], (None, None), &[], 1, &mut rng);
        assert_eq!(acquisition.cost(&study.baseline), 1.0 + RELOAD, "no engine runs yet");
        acquisition.running(&study.baseline, &study.request_time);
        let mut other_top_k = study.baseline.clone();
        other_top_k.insert("top_k".into(), "1".into());
        assert_eq!(acquisition.cost(&other_top_k), 1.0, "the engine keeps running");
        let mut other_threads = study.baseline.clone();
        other_threads.insert("threads".into(), "8".into());
        assert_eq!(acquisition.cost(&other_threads), 1.0 + RELOAD);
    }

    #[test]
    fn before_anything_holds_the_bounds_the_nearest_to_holding_them_leads() {
        // One objective that favours fewer threads, and a bound whose
        // slack grows with them, broken below 9 to 11 threads as the draws
        // have it. With nothing measured within the bound there is no
        // front, and the configuration drawn nearest to holding it is
        // worth most, however the objective weighs it; once one held, a
        // draw that breaks the bound gains nothing.
        struct Linear(Vec<f64>, f64);
        impl Drawn for Linear {
            fn at(&self, c: &Settings) -> Vec<f64> {
                let threads: f64 = c["threads"].parse().unwrap();
                self.0.iter().map(|offset| offset + self.1 * threads).collect()
            }
        }
        let at = |threads: u32| -> Settings { [("threads".into(), threads.to_string())].into() };
        let models = || -> (Vec<Model<'static>>, Option<Model<'static>>) {
            let fewer = Box::new(Linear(vec![0.0; 4], -1.0));
            let slack = Box::new(Linear(vec![-9.0, -10.0, -10.0, -11.0], 1.0));
            (vec![fewer], Some(slack))
        };
        let mut rng = rand::rng();
        let (objectives, slack) = models();
        let units = vec![Units::AsModelled];
        let none = Acquisition::new(objectives, units.clone(), (None, slack), &[], 4, &mut rng);
        let (two, twelve) = (none.worth(&at(2)).unwrap(), none.worth(&at(12)).unwrap());
        assert!(better(twelve, two), "{twelve:?} against {two:?}");
        assert_eq!(none.worth(&at(10)).unwrap().1, 0.0, "the mean drawn slack");

        let (objectives, slack) = models();
        let held = at(12);
        let some = Acquisition::new(objectives, units, (None, slack), &[&held], 4, &mut rng);
        assert!(some.worth(&at(11)).unwrap().0 > 0.0, "every draw holds: a gain");
        assert_eq!(some.worth(&at(5)), None, "every draw breaks it");
    }
}
