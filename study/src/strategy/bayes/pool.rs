//! The configurations a proposal scores: the whole space where it is
//! small enough to list, else a random pool with the neighbours of the
//! measured front's trials, whose best few are then improved one setting
//! at a time ([`climb`]).

use engine_bridge::Settings;
use rand::Rng;

use super::acquisition::{Acquisition, Worth, better};
use crate::study::{Observation, Study};

/// Configurations scored per proposal when the space is too large to list.
const SAMPLED: usize = 4000;
/// Spaces up to this size are listed whole.
pub(super) const LISTED: u128 = 20_000;
/// In larger spaces, the best few of the pool are improved by coordinate
/// ascent: this many of them, at most this many sweeps over the settings,
/// and at most this many values a setting (wider ranges: the neighbours
/// and this many random values).
pub(super) const CLIMBS: usize = 8;
const SWEEPS: usize = 4;
const MAX_VALUES: usize = 64;
/// The measured front's trials whose neighbours join the pool.
const NEAR: usize = 32;

/// The untried configurations the constraints allow: the whole space when
/// it is small, else random draws and the neighbours of the (at most
/// [`NEAR`]) trials on the measured Pareto front.
pub(super) fn candidates(
    study: &Study,
    history: &[Observation],
    fresh: &impl Fn(&Settings) -> bool,
    rng: &mut impl Rng,
) -> Vec<Settings> {
    if study.space.grid_size() <= LISTED {
        return study.space.grid().filter(fresh).collect();
    }
    let mut out: Vec<Settings> = (0..SAMPLED).map(|_| study.space.sample(rng)).collect();
    let measured: Vec<&Observation> =
        history.iter().filter(|o| o.feasible && o.values.is_some()).collect();
    let points: Vec<Vec<f64>> = measured.iter().filter_map(|o| o.values.clone()).collect();
    let goals: Vec<_> = study.objectives.iter().map(|t| t.goal).collect();
    for i in crate::pareto::front(&points, &goals).into_iter().take(NEAR) {
        let o = measured[i];
        for p in &study.space.params {
            let current = o.config.get(&p.name).cloned().unwrap_or_default();
            for v in p.domain.neighbours(&current) {
                let mut c = o.config.clone();
                c.insert(p.name.clone(), v);
                out.push(c);
            }
        }
    }
    out.sort();
    out.dedup();
    out.retain(fresh);
    out
}

/// Coordinate ascent on the drawn worth from `start`: each setting in turn
/// moves to its best value, until no setting improves.
pub(super) fn climb(
    study: &Study,
    acquisition: &Acquisition,
    start: (Settings, Worth),
    fresh: &impl Fn(&Settings) -> bool,
    rng: &mut impl Rng,
) -> (Settings, Worth) {
    let (mut at, mut worth) = start;
    for _ in 0..SWEEPS {
        let mut moved = false;
        for p in &study.space.params {
            let current = at.get(&p.name).cloned().unwrap_or_default();
            let values = if p.domain.len() <= MAX_VALUES as u64 {
                p.domain.grid()
            } else {
                let mut v = p.domain.neighbours(&current);
                v.extend((0..MAX_VALUES).map(|_| p.domain.sample(rng)));
                v
            };
            for v in values {
                if at.get(&p.name) == Some(&v) {
                    continue;
                }
                let mut c = at.clone();
                c.insert(p.name.clone(), v);
                if let Some(w) = acquisition.worth(&c).filter(|w| better(*w, worth))
                    && fresh(&c)
                {
                    (at, worth, moved) = (c, w, true);
                }
            }
        }
        if !moved {
            break;
        }
    }
    (at, worth)
}
