//! What a configuration is worth under one draw of the models: the
//! hypervolume it would add to the front of what was measured (both seen
//! through the same drawn models, so that what a draw gets wrong
//! everywhere alike cancels out), and, where nothing gains, how it fares
//! under a random weighting of the objectives. A configuration the drawn
//! risk model expects to fail gains nothing in that draw. A gain is
//! counted per unit of cost: a configuration that keeps the running
//! engine (it changes only request-time settings) costs its probes, one
//! that needs a reload costs [`RELOAD`] more.

/// What a reload costs, in units of a trial's probes. Loads of the models
/// this is for take minutes, their quick probes about one.
pub(super) const RELOAD: f64 = 3.0;

use engine_bridge::Settings;
use rand::Rng;

use super::features::Encoder;
use super::regression::Draw;

/// A configuration's worth: hypervolume gain first, the weighting second.
pub(super) type Worth = (f64, f64);

pub(super) struct Acquisition<'a> {
    pub encoder: &'a Encoder,
    /// The last trial's settings (its engine runs now), and which settings
    /// are request-time; `None` when nothing ran yet.
    pub engine: Option<(Settings, &'a std::collections::BTreeSet<String>)>,
    samples: Vec<Sample>,
    /// Draws of the risk model, one a sample; none when nothing failed.
    risks: Vec<Draw>,
    weights: Vec<f64>,
}

/// One draw of every objective's model, and the measured front it sees.
struct Sample {
    draws: Vec<Draw>,
    front: Vec<Vec<f64>>,
    reference: Vec<f64>,
    base: f64,
}

/// The hypervolume `points` dominate above `reference` (all maximized).
fn volume(points: &[Vec<f64>], reference: &[f64]) -> f64 {
    let up = vec![optimizer::Direction::Maximize; reference.len()];
    let kept: Vec<Vec<f64>> =
        points.iter().filter(|p| p.iter().zip(reference).all(|(v, r)| v > r)).cloned().collect();
    if kept.is_empty() { 0.0 } else { optimizer::pareto::hypervolume(&kept, reference, &up) }
}

impl Sample {
    fn new(draws: Vec<Draw>, measured: &[Vec<f64>]) -> Self {
        let front: Vec<Vec<f64>> =
            measured.iter().map(|r| draws.iter().map(|d| d.at(r)).collect()).collect();
        let reference: Vec<f64> = (0..draws.len())
            .map(|j| {
                let col = || front.iter().map(|p| p[j]);
                let (lo, hi) = (col().fold(f64::MAX, f64::min), col().fold(f64::MIN, f64::max));
                if front.is_empty() { f64::MIN / 4.0 } else { lo - 0.1 * (hi - lo).max(0.1) }
            })
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
        let base = volume(&front, &reference);
        Sample { draws, front, reference, base }
    }

    /// The hypervolume gain of `row`, and its random weighting.
    fn worth(&self, row: &[f64], weights: &[f64]) -> Worth {
        let v: Vec<f64> = self.draws.iter().map(|d| d.at(row)).collect();
        let dominated = self.front.iter().any(|f| f.iter().zip(&v).all(|(a, b)| a >= b));
        let gain = if dominated {
            0.0
        } else {
            let mut with = self.front.clone();
            with.push(v.clone());
            volume(&with, &self.reference) - self.base
        };
        let tie = v.iter().zip(weights).zip(&self.reference).map(|((v, w), r)| w * (v - r));
        (gain, tie.fold(f64::MAX, f64::min))
    }
}

impl<'a> Acquisition<'a> {
    /// `samples`: draws of every objective's model; `measured`: the rows
    /// of the trials that ran within every bound.
    pub fn new(
        encoder: &'a Encoder,
        samples: Vec<Vec<Draw>>,
        risks: Vec<Draw>,
        measured: &[Vec<f64>],
        rng: &mut impl Rng,
    ) -> Self {
        let objectives = samples.first().map_or(0, Vec::len);
        let weights = (0..objectives).map(|_| rng.random::<f64>() + 0.05).collect();
        let samples = samples.into_iter().map(|d| Sample::new(d, measured)).collect();
        Acquisition { encoder, engine: None, samples, risks, weights }
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

    /// The chance that `config` fails or breaks a bound, as the risk
    /// model's draws see it on average.
    pub fn risk(&self, config: &Settings) -> f64 {
        let row = self.encoder.row(config);
        self.risks.iter().map(|r| r.at(&row)).sum::<f64>() / self.risks.len().max(1) as f64
    }

    /// The mean worth over the samples, a sample whose risk draw expects
    /// `config` to fail counting no gain; `None` when every one does.
    pub fn worth(&self, config: &Settings) -> Option<Worth> {
        let row = self.encoder.row(config);
        let runs = |i: usize| self.risks.get(i).is_none_or(|r| r.at(&row) < 0.5);
        let running: Vec<Worth> = (0..self.samples.len())
            .filter(|i| runs(*i))
            .map(|i| self.samples[i].worth(&row, &self.weights))
            .collect();
        if running.is_empty() {
            return None;
        }
        let n = self.samples.len() as f64;
        let gain = running.iter().map(|w| w.0).sum::<f64>() / n / self.cost(config);
        let tie = running.iter().map(|w| w.1).sum::<f64>() / running.len() as f64;
        Some((gain, tie))
    }
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
    fn a_reload_costs_more_than_a_request_time_change() {
        let mut def = testing::study("bayes", "").def;
        def.space.insert("top_k".into(), serde_json::json!([1, 40]));
        def.baseline.insert("top_k".into(), serde_json::json!(40));
        let study = def.check(&engine_bridge::Catalog::llama_server(), &["m".into()]).unwrap();
        assert_eq!(study.request_time, ["top_k".to_string()].into(), "from the catalog");
        let encoder = Encoder::new(&study.space.params, &study.baseline);
        let mut rng = rand::rng();
        let mut acquisition = Acquisition::new(&encoder, vec![], vec![], &[], &mut rng);
        assert_eq!(acquisition.cost(&study.baseline), 1.0 + RELOAD, "no engine runs yet");
        acquisition.running(&study.baseline, &study.request_time);
        let mut other_top_k = study.baseline.clone();
        other_top_k.insert("top_k".into(), "1".into());
        assert_eq!(acquisition.cost(&other_top_k), 1.0, "the engine keeps running");
        let mut other_threads = study.baseline.clone();
        other_threads.insert("threads".into(), "8".into());
        assert_eq!(acquisition.cost(&other_threads), 1.0 + RELOAD);
    }
}
