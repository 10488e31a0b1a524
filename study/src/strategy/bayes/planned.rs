//! How full the planner predicts a configuration leaves the GPUs, as one
//! more axis of the models (past the settings' own and the context a slot
//! gets; see [`super::features`]).
//!
//! Whether a configuration fits on the GPU, and how much it spills where
//! unified memory lets it, go by one number that four or more settings
//! make together: the layers offloaded, both K/V cache types and the
//! context, and on several GPUs how the layers are dealt among them. No
//! setting's curve and no pair of them draws that diagonal, and the
//! models then take what it does for a main effect of one of them: trials
//! of many layers that ran out of memory, or spilled and ran slowly, with
//! an f16 cache held every configuration of many layers slow, the q4_0
//! cache's too, which fits and is the fastest (the strategy benchmark's
//! `spill` world, where a search stopped at half of the front). The
//! planner knows that number from the model file's own metadata before
//! anything is loaded; given it, the models can learn the cliff once,
//! along it.

use std::sync::Arc;

use engine_bridge::Settings;
use rand::SeedableRng;

use super::axis::Axis;
use crate::space::Space;

/// How full the planner predicts a configuration leaves the GPUs: the
/// fullest GPU's planned bytes over its memory, or, where the GPUs' sizes
/// are not known, their planned bytes together. `None` where no layer is
/// offloaded. The server builds it where the planner reads the study's
/// model (`tunebook_core::memory_plan::gpu_fill`), and leaves it out
/// where the bytes together cannot say which GPU runs out.
pub type GpuFillFn = Arc<dyn Fn(&Settings) -> Option<f64> + Send + Sync>;

/// Configurations drawn to find the axis's ends.
const DRAWS: usize = 512;

/// The planner's fill, placed along its range over the space.
#[derive(Clone)]
pub(super) struct Planned {
    plan: GpuFillFn,
    /// The study's complete baseline: a configuration is planned as the
    /// baseline with the settings it names instead.
    baseline: Settings,
}

impl std::fmt::Debug for Planned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Planned").finish_non_exhaustive()
    }
}

impl Planned {
    /// The axis of `plan`'s fill over `space`, where the plan predicts it
    /// and it differs between configurations (by more than a thousandth):
    /// from the least to the most of the baseline and [`DRAWS`]
    /// configurations drawn with a fixed seed, so that every proposal of
    /// a study codes a configuration alike. One the plan cannot predict
    /// (none offloaded) stands at 0.
    pub fn of(plan: &GpuFillFn, space: &Space, baseline: &Settings) -> Option<(Self, Axis)> {
        let planned = Planned { plan: plan.clone(), baseline: baseline.clone() };
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x9E37_79B9);
        let drawn = (0..DRAWS).map(|_| space.sample(&mut rng));
        let fills: Vec<f64> =
            std::iter::once(baseline.clone()).chain(drawn).map(|c| planned.fill(&c)).collect();
        let lo = fills.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = fills.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (hi.is_finite() && hi > 0.0 && hi - lo > hi * 1e-3).then_some((
            planned,
            Axis::Number { lo, hi, log: false, knots: 5, off: false, inner: None },
        ))
    }

    /// The plan's fill for `config` (the baseline with what it names
    /// instead); 0 where it has none.
    pub fn fill(&self, config: &Settings) -> f64 {
        // A trial and a candidate name every varied setting: most often
        // every one the baseline does, and then nothing is copied.
        let full = if self.baseline.keys().all(|k| config.contains_key(k)) {
            std::borrow::Cow::Borrowed(config)
        } else {
            let mut full = self.baseline.clone();
            full.extend(config.iter().map(|(k, v)| (k.clone(), v.clone())));
            std::borrow::Cow::Owned(full)
        };
        (self.plan)(&full).filter(|b| b.is_finite() && *b > 0.0).unwrap_or(0.0)
    }

    /// `setting`'s value in `config`, else the baseline's.
    pub fn value<'a>(&'a self, config: &'a Settings, setting: &str) -> Option<&'a str> {
        config.get(setting).or_else(|| self.baseline.get(setting)).map(String::as_str)
    }

    /// How each setting of `space` moves the fill, in its order ([`Moves`]):
    /// tried on [`PROBES`] configurations drawn with a fixed seed, each at
    /// every value of the setting, or at [`PROBED_VALUES`] drawn of a
    /// longer range. Words are ordered as listed.
    pub fn moves(&self, space: &Space) -> Vec<Moves> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5EE_D0E5);
        let probes: Vec<Settings> = (0..PROBES).map(|_| space.sample(&mut rng)).collect();
        let mut out = Vec::new();
        for p in &space.params {
            let mut values = if p.domain.len() <= PROBED_VALUES as u64 {
                p.domain.grid()
            } else {
                (0..PROBED_VALUES).map(|_| p.domain.sample(&mut rng)).collect()
            };
            if let Some(numbers) =
                values.iter().map(|v| v.parse::<f64>().ok()).collect::<Option<Vec<f64>>>()
            {
                let mut paired: Vec<(f64, String)> = numbers.into_iter().zip(values).collect();
                paired.sort_by(|a, b| a.0.total_cmp(&b.0));
                values = paired.into_iter().map(|(_, v)| v).collect();
            }
            let (mut up, mut down) = (false, false);
            for c in &probes {
                let fills: Vec<f64> = values
                    .iter()
                    .map(|v| {
                        let mut changed = c.clone();
                        changed.insert(p.name.clone(), v.clone());
                        self.fill(&changed)
                    })
                    .collect();
                for w in fills.windows(2) {
                    let apart = (w[1] - w[0]).abs() > w[0].abs().max(w[1].abs()) * 1e-9;
                    up |= apart && w[1] > w[0];
                    down |= apart && w[1] < w[0];
                }
            }
            out.push(match (up, down) {
                (false, false) => Moves::Not,
                (true, false) => Moves::Up,
                (false, true) => Moves::Down,
                (true, true) => Moves::Both,
            });
        }
        out
    }
}

/// How a setting moves the planned fill over its values in order
/// ([`Planned::moves`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Moves {
    /// Never: the plan does not see it.
    Not,
    /// Never down, or never up.
    Up,
    Down,
    /// Either way, by where the rest of the configuration stands.
    Both,
}

/// Configurations, and values of a setting, tried for how a setting
/// moves the fill ([`Planned::moves`]).
const PROBES: usize = 24;
const PROBED_VALUES: usize = 16;

#[cfg(test)]
mod tests {
    use super::super::features::Encoder;
    use std::sync::Arc;

    use super::super::regression::Posterior;
    use super::*;
    use crate::space::{Domain, Param};

    const GIB: f64 = (1u64 << 30) as f64;

    /// Layers on the GPU (0 to 48) and one cache type: a block takes
    /// 0.2 GiB of weights and 0.1, 0.05 or 0.01 of cache.
    fn layers_and_cache() -> (Space, Settings, GpuFillFn) {
        let types = ["f16", "q8_0", "q4_0"].map(String::from).to_vec();
        let space = Space {
            params: vec![
                Param {
                    name: "n_gpu_layers".into(),
                    domain: Domain::Int { min: 0, max: 48, step: 1, log: false },
                },
                Param { name: "cache_type_k".into(), domain: Domain::Values(types) },
            ],
            ..Space::default()
        };
        let baseline: Settings = [("n_gpu_layers", "0"), ("cache_type_k", "f16")]
            .map(|(k, v)| (k.into(), v.into()))
            .into();
        let plan: GpuFillFn = Arc::new(|s: &Settings| {
            let layers: f64 = s.get("n_gpu_layers")?.parse().ok()?;
            let cache = match s.get("cache_type_k")?.as_str() {
                "f16" => 0.1,
                "q8_0" => 0.05,
                _ => 0.01,
            };
            (layers > 0.0).then_some(layers * (0.2 + cache) * GIB)
        });
        (space, baseline, plan)
    }

    fn at(layers: u32, cache: &str) -> Settings {
        [("n_gpu_layers", layers.to_string()), ("cache_type_k", cache.to_string())]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }

    #[test]
    fn the_planned_bytes_are_one_more_number() {
        let (space, baseline, plan) = layers_and_cache();
        let plain = Encoder::for_space(&space, &baseline);
        let e = Encoder::planned(&space, &baseline, Some(&plan));
        assert_eq!(e.settings(), plain.settings() + 1);
        // Its slope, curvature and three bends, and two columns with each
        // of the two settings' two.
        assert_eq!(e.width(), plain.width() + 5 + 2 * 2 * 2);
        // Its coordinate goes by the bytes alone: 40 blocks of 0.21 GiB
        // stand where 28 of 0.3 do (8.4 GiB), past 20 of them.
        let place = |c: Settings| *e.inputs(&c).last().unwrap();
        assert!((place(at(40, "q4_0")) - place(at(28, "f16"))).abs() < 1e-12);
        assert!(place(at(40, "q4_0")) > place(at(20, "f16")));
        assert_eq!(place(at(0, "f16")), 0.0, "none offloaded: no bytes");
        // A plan that predicts nothing, or the same bytes everywhere,
        // adds no axis.
        let none: GpuFillFn = Arc::new(|_: &Settings| None);
        let flat: GpuFillFn = Arc::new(|_: &Settings| Some(GIB));
        for p in [none, flat] {
            assert_eq!(Encoder::planned(&space, &baseline, Some(&p)).width(), plain.width());
        }
    }

    /// The spill: decode grows with the layers on the GPU until their
    /// bytes pass 10 GiB, then falls steeply. The trials never ran the
    /// smallest cache past 32 layers, where it still fits; fitted to them,
    /// the linear model with the planned bytes predicts it fast there,
    /// the settings' own curves and products alone, slow.
    #[test]
    fn a_cliff_along_the_planned_bytes_is_learned_across_the_settings() {
        let (space, baseline, plan) = layers_and_cache();
        let decode = |c: &Settings| {
            let bytes = plan(c).unwrap_or(0.0) / GIB;
            let layers: f64 = c["n_gpu_layers"].parse().unwrap();
            0.03 * layers - 2.0 * (bytes - 10.0).max(0.0)
        };
        let held: Vec<Settings> = (36..=48).step_by(4).map(|n| at(n, "q4_0")).collect();
        let mut errors = Vec::new();
        for with in [true, false] {
            let e = Encoder::planned(&space, &baseline, with.then_some(&plan));
            let (mut rows, mut y) = (Vec::new(), Vec::new());
            for cache in ["f16", "q8_0", "q4_0"] {
                for n in (0..=48).step_by(4) {
                    let c = at(n, cache);
                    if !held.contains(&c) {
                        rows.push(e.row(&c));
                        y.push(decode(&c));
                    }
                }
            }
            let fit = Posterior::fit(&rows, &y, &e.classes).unwrap();
            let off = |c: &Settings| (fit.mean_at(&e.row(c)) - decode(c)).powi(2);
            errors.push((held.iter().map(off).sum::<f64>() / held.len() as f64).sqrt());
        }
        assert!(
            errors[0] < 0.5 * errors[1],
            "off by {:.3} with the plan, {:.3} without",
            errors[0],
            errors[1]
        );
    }
}
