//! What a configuration is worth under one draw of the models: the
//! hypervolume it would add to the front of what was measured (both seen
//! through the same drawn models, so that what a draw gets wrong
//! everywhere alike cancels out), and, where nothing gains, how it fares
//! under a random weighting of the objectives. A configuration the drawn
//! risk model expects to fail gains nothing in that draw.

use engine_bridge::Settings;
use rand::Rng;

use super::features::Encoder;
use super::regression::Draw;

/// A configuration's worth: hypervolume gain first, the weighting second.
pub(super) type Worth = (f64, f64);

pub(super) struct Acquisition<'a> {
    pub encoder: &'a Encoder,
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
        Acquisition { encoder, samples, risks, weights }
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
        let gain = running.iter().map(|w| w.0).sum::<f64>() / n;
        let tie = running.iter().map(|w| w.1).sum::<f64>() / running.len() as f64;
        Some((gain, tie))
    }
}

/// Whether `a` is worth more than `b`.
pub(super) fn better(a: Worth, b: Worth) -> bool {
    a.0 > b.0 || (a.0 == b.0 && a.1 > b.1)
}
