//! The first trials' design, before the models lead: a Latin hypercube
//! over the settings, the most spread-out of [`DESIGNS`] random ones
//! (maximin), as BoTorch and SMAC start from a space-filling design.
//!
//! Each setting's range is cut into as many strata as the design has
//! points, and every stratum gets one point, so each setting alone is
//! spread evenly: a thread count of 1 to 32 over five points gets one in
//! 7 to 13, where such peaks sit. A design that only maximizes the
//! distance between points pushes them into the space's corners (in ten
//! settings, four of five start trials at 29 threads or more), and a peak
//! in the middle of one setting is then found late.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use engine_bridge::Settings;

use super::features::Encoder;
use crate::space::Space;

/// Random Latin hypercubes drawn; the one whose closest two points (the
/// baseline among them) lie farthest apart is kept.
const DESIGNS: usize = 64;

/// `n` configurations of a Latin hypercube over `space`, chosen to lie
/// far from `baseline` and from each other. The same for a seed whatever
/// has run, so that each proposal of the start takes the next point.
pub(super) fn latin(
    space: &Space,
    encoder: &Encoder,
    baseline: &Settings,
    n: usize,
    seed: u64,
) -> Vec<Settings> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x1A71_4C0B);
    let base = encoder.inputs(baseline);
    (0..DESIGNS)
        .map(|_| {
            let design = one(space, n, &mut rng);
            let mut x: Vec<Vec<f64>> = design.iter().map(|c| encoder.inputs(c)).collect();
            x.push(base.clone());
            (closest(&x), design)
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, design)| design)
        .unwrap_or_default()
}

/// One random Latin hypercube of `n` points.
fn one(space: &Space, n: usize, rng: &mut impl Rng) -> Vec<Settings> {
    let mut points = vec![Settings::new(); n];
    for p in &space.params {
        let mut strata: Vec<usize> = (0..n).collect();
        strata.shuffle(rng);
        for (point, stratum) in points.iter_mut().zip(strata) {
            let u = (stratum as f64 + rng.random::<f64>()) / n as f64;
            point.insert(p.name.clone(), p.domain.at(u));
        }
    }
    points.into_iter().map(|c| space.complete(c)).collect()
}

/// The squared distance between `a` and `b`.
pub(super) fn squared(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(p, q)| (p - q).powi(2)).sum()
}

/// The squared distance between the closest two of `x`.
fn closest(x: &[Vec<f64>]) -> f64 {
    let mut least = f64::MAX;
    for (i, a) in x.iter().enumerate() {
        for b in &x[i + 1..] {
            least = least.min(squared(a, b));
        }
    }
    least
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::space::{Domain, Param};

    #[test]
    fn every_setting_alone_is_spread_over_its_strata() {
        let space = Space {
            params: vec![
                Param {
                    name: "threads".into(),
                    domain: Domain::Int { min: 1, max: 32, step: 1, log: false },
                },
                Param {
                    name: "batch".into(),
                    domain: Domain::Int { min: 128, max: 4096, step: 1, log: true },
                },
                Param {
                    name: "k".into(),
                    domain: Domain::Values(vec!["f16".into(), "q8_0".into(), "q4_0".into()]),
                },
            ],
            ..Space::default()
        };
        let baseline: Settings = [("threads", "4"), ("batch", "2048"), ("k", "f16")]
            .map(|(k, v)| (k.into(), v.into()))
            .into();
        let encoder = Encoder::new(&space.params, &baseline);
        for seed in 0..20 {
            let design = latin(&space, &encoder, &baseline, 5, seed);
            assert_eq!(design, latin(&space, &encoder, &baseline, 5, seed), "the same for a seed");
            // A point in each fifth of 1..32 threads: 1–7, 7–13, …
            let threads: Vec<f64> =
                design.iter().map(|c| c["threads"].parse::<f64>().unwrap()).collect();
            for s in 0..5 {
                let (lo, hi) = (
                    1.0 + (6.4 * f64::from(s)).floor(),
                    1.0 + (6.4 * f64::from(s + 1) - 1e-9).floor(),
                );
                assert!(threads.iter().any(|t| (lo..=hi).contains(t)), "seed {seed}: {threads:?}");
            }
            // Each cache type at least once: the first and last fifths
            // fall on the ends of the list, the middle fifth on its middle.
            for k in ["f16", "q8_0", "q4_0"] {
                let times = design.iter().filter(|c| c["k"] == k).count();
                assert!((1..=3).contains(&times), "seed {seed}: {k} {times} times");
            }
        }
    }
}
