//! What a configuration is worth under one draw of the models: the
//! hypervolume it would add to the front of what was measured (both seen
//! through the same drawn models, so that what a draw gets wrong
//! everywhere alike cancels out), and, where nothing gains, how it fares
//! under a random weighting of the objectives. A configuration the drawn
//! risk model expects to fail is worth nothing.

use engine_bridge::Settings;
use rand::Rng;

use super::features::Encoder;
use super::regression::Draw;

/// A configuration's worth: hypervolume gain first, the weighting second.
pub(super) type Worth = (f64, f64);

pub(super) struct Acquisition<'a> {
    pub encoder: &'a Encoder,
    draws: Vec<Draw>,
    /// What a gain must clear per objective: the measurement noise.
    noise: Vec<f64>,
    risk: Option<Draw>,
    front: Vec<Vec<f64>>,
    reference: Vec<f64>,
    base: f64,
    weights: Vec<f64>,
}

/// The hypervolume `points` dominate above `reference` (all maximized).
fn volume(points: &[Vec<f64>], reference: &[f64]) -> f64 {
    let up = vec![optimizer::Direction::Maximize; reference.len()];
    let kept: Vec<Vec<f64>> =
        points.iter().filter(|p| p.iter().zip(reference).all(|(v, r)| v > r)).cloned().collect();
    if kept.is_empty() { 0.0 } else { optimizer::pareto::hypervolume(&kept, reference, &up) }
}

impl<'a> Acquisition<'a> {
    /// `measured`: the rows of the trials that ran within every bound.
    pub fn new(
        encoder: &'a Encoder,
        draws: Vec<Draw>,
        noise: Vec<f64>,
        risk: Option<Draw>,
        measured: &[Vec<f64>],
        rng: &mut impl Rng,
    ) -> Self {
        let front: Vec<Vec<f64>> =
            measured.iter().map(|r| draws.iter().map(|d| d.at(r)).collect()).collect();
        let reference: Vec<f64> = (0..draws.len())
            .map(|j| {
                let col = || front.iter().map(|p| p[j]);
                let (lo, hi) = (col().fold(f64::MAX, f64::min), col().fold(f64::MIN, f64::max));
                if front.is_empty() { f64::MIN / 4.0 } else { lo - 0.1 * (hi - lo).max(0.1) }
            })
            .collect();
        let base = volume(&front, &reference);
        let weights = (0..draws.len()).map(|_| rng.random::<f64>() + 0.05).collect();
        Acquisition { encoder, draws, noise, risk, front, reference, base, weights }
    }

    /// The drawn chance that `config` fails or breaks a bound.
    pub fn risk(&self, config: &Settings) -> f64 {
        self.risk.as_ref().map_or(0.0, |r| r.at(&self.encoder.row(config)))
    }

    /// `None` when the drawn risk model expects `config` to fail.
    pub fn worth(&self, config: &Settings) -> Option<Worth> {
        let row = self.encoder.row(config);
        if self.risk.as_ref().is_some_and(|r| r.at(&row) >= 0.5) {
            return None;
        }
        // A gain within the noise is no gain: without this, copies of the
        // best trial with a bystander changed would look as good as new
        // ground.
        let v: Vec<f64> = self.draws.iter().zip(&self.noise).map(|(d, n)| d.at(&row) - n).collect();
        let dominated = self.front.iter().any(|f| f.iter().zip(&v).all(|(a, b)| a >= b));
        let gain = if dominated {
            0.0
        } else {
            let mut with = self.front.clone();
            with.push(v.clone());
            volume(&with, &self.reference) - self.base
        };
        let tie = v.iter().zip(&self.weights).zip(&self.reference).map(|((v, w), r)| w * (v - r));
        Some((gain, tie.fold(f64::MAX, f64::min)))
    }
}

/// Whether `a` is worth more than `b`.
pub(super) fn better(a: Worth, b: Worth) -> bool {
    a.0 > b.0 || (a.0 == b.0 && a.1 > b.1)
}
