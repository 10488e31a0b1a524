//! One setting's coding: the columns of its main effect and their
//! [`Class`]es, its two codes for interactions, and its coordinates for
//! a distance model ([`super::features`] puts the settings together).
//!
//! - A number (a range, or a list of three or more numbers) is placed at
//!   `t` in [0, 1] along its values, on a log scale where its domain says
//!   so or where it spans a factor of 8 or more from 1 up (thread counts,
//!   batch and context sizes, whose effects go by ratios); its main effect is a
//!   slope and a curvature, so a peak anywhere in the range is as easy to
//!   learn as a slope, and bends at up to 3 inner knots (hat functions,
//!   shrunk harder) for curves a parabola does not fit. Between two knots
//!   the bends are straight, so a peak between them is drawn at a knot:
//!   each objective's linear model takes its knots evenly spaced or moved
//!   a third of their spacing either way, whichever the evidence favours
//!   ([`Axis::shift_knots`]; the strategy benchmark, `numa`, whose decode
//!   peaks at 16 threads of 1 to 32, between the knots at 13.5 and 32:
//!   median 54.5 trials → 26.5 over 30 seeds).
//! - A number whose range starts at 0 (on a linear scale, with three
//!   values or more) also gets whether it is 0, in its main effect, its
//!   code for interactions (in place of its curvature) and a distance
//!   model's coordinates: 0 often turns a feature off (no drafted tokens,
//!   no layers on the GPU, no experts on the CPU), a step between 0 and
//!   1 that no curve through the other values fits (the strategy
//!   benchmark: `draft` 20.5 trials → 17.5 over 60 seeds, `experts`
//!   31 → 23 and `offload` 63 → 59 over 15; no other world had such a
//!   range). Past 0 its values are placed as a range from the first of
//!   them would be: on a log scale where they span 8× or more, as thread
//!   counts are (drafted tokens: each next one is accepted less often).
//!   Along a line, 1 to 24 drafted tokens put the bends at 6, 12 and 18
//!   and the model's peak at 6, past the 4 or 5 where decode peaks (the
//!   strategy benchmark, `draft`, 60 seeds: median 17 trials → 13, 90th
//!   percentile 27 → 24). A count of a model's layers
//!   ([`engine_bridge::planner::LAYER_COUNTS`]) stays on a line: what it
//!   moves goes by the share of the layers, and its front lies near the
//!   top of the range, which a log scale squeezes (`layers` took 77
//!   trials over its first 3 seeds on one, 44 over 15 on a line;
//!   `experts` 35 against 29.5 over 30).
//! - A list of numbers with one value below 1 at its bottom (SGLang's
//!   `chunked_prefill_size = -1`, each prompt prefilled whole) is coded
//!   as a range from 0: that value turns the feature off, or sets it
//!   beyond any listed value, and is not a step below the next one. Along
//!   a line, -1 stood beside 512 and the chunks from 512 to 2,048 within
//!   a quarter of the range (the strategy benchmark, `sglang`, 15 seeds:
//!   median 97 trials → 60, five searches short of 95 % at 200 → none).
//! - A word (a list of texts, a switch) gets one indicator per value
//!   beyond its first. Words with a known order (K/V cache types, by the
//!   bytes an element takes) also get their place along it, so that what
//!   was learned of `f16` and `q4_0` says something of `q8_0` before it is
//!   tried, while the indicators still let a value stray from the trend.
//! - For interactions each setting keeps at most two columns: a number
//!   its centred slope and curvature (a range from 0: whether it is 0
//!   instead of the curvature), a word its first two indicators.
//!   That keeps the row short (a few hundred columns for ten settings)
//!   while a 3×3 pair such as the K and V cache types is still fully
//!   modelled.

use crate::space::{Domain, Param, log_scale};

/// What a column's prior is, and which settings (by index) it belongs
/// to: the regression shrinks pair columns harder than main effects, and
/// pairs of settings that show no effect alone hardest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    Intercept,
    Main(usize),
    /// A number's local bends, beyond its slope and curvature.
    Shape(usize),
    Pair(usize, usize),
    /// Whether two settings of the same list of values match.
    Same(usize, usize),
    /// The trial's place in the study (the machine's drift), past the row.
    Drift,
}

/// One setting's coding.
#[derive(Debug, Clone)]
pub(super) enum Axis {
    /// Positions map a value to `t`; a slope, a curvature when there are
    /// three values or more, and with four or more bends at the
    /// `knots − 2` inner knots; `off`: the range starts at 0, and whether
    /// a value is 0 is a column of its own (with `log`, `lo` is the log of
    /// the first value past 0, where 0 is placed too).
    ///
    /// `inner`: the inner knots' places in (0, 1) where they were moved
    /// ([`Axis::shift_knots`]); `None`: evenly spaced.
    Number { lo: f64, hi: f64, log: bool, knots: usize, off: bool, inner: Option<Vec<f64>> },
    Word {
        values: Vec<String>,
        /// Each value's place in [0, 1] along a known order, when every
        /// value has one.
        order: Option<Vec<f64>>,
    },
}

/// A word setting's values past this many (after its first) share the
/// first value's row: the model cannot tell them apart, and a list of
/// thousands of words would otherwise make the row thousands wide.
pub(super) const MAX_WORDS: usize = 16;

fn numbers(values: &[String]) -> Option<Vec<f64>> {
    values.iter().map(|v| v.trim().parse::<f64>().ok().filter(|x| x.is_finite())).collect()
}

/// The places of `values` along the order of precision, when every one is
/// a K/V cache type ([`engine_bridge::planner::cache_type_bytes`], on a log
/// scale) and they are not all alike: memory, quality and often speed move
/// with it.
fn ordered(values: &[String]) -> Option<Vec<f64>> {
    let bytes: Vec<f64> = values
        .iter()
        .map(|v| engine_bridge::planner::cache_type_bytes(v).map(f64::ln))
        .collect::<Option<_>>()?;
    let (lo, hi) = bytes.iter().fold((f64::MAX, f64::MIN), |(l, h), b| (l.min(*b), h.max(*b)));
    (hi > lo).then(|| bytes.iter().map(|b| (b - lo) / (hi - lo)).collect())
}

impl Axis {
    /// A setting's coding, worked out from its domain's ends and size (a
    /// range of a million values is never listed) and, for a range from
    /// 0, whether it counts a model's layers.
    pub(super) fn of(param: &Param) -> Self {
        let domain = &param.domain;
        let knots = domain.len().clamp(2, 5) as usize;
        let layers = engine_bridge::planner::LAYER_COUNTS.contains(&param.name.as_str());
        // `declared`: the domain says it is on a log scale; `off`: its
        // smallest value turns the feature off (0, or a list's one value
        // below 1 such as -1); `first`: the smallest value past it.
        let span = |xs: &[f64], declared: bool, off: bool, first: Option<f64>| {
            let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if off && knots >= 3 {
                // Whether a value is 0 is a column of its own; the values
                // past it are placed as a range from `first` would be.
                return match first.filter(|f| !layers && log_scale(*f, hi)) {
                    Some(f) => Axis::Number {
                        lo: f.ln(),
                        hi: hi.ln(),
                        log: true,
                        knots,
                        off: true,
                        inner: None,
                    },
                    None => Axis::Number { lo, hi, log: false, knots, off: true, inner: None },
                };
            }
            let log = (declared || log_scale(lo, hi)) && lo > 0.0;
            let (lo, hi) = if log { (lo.ln(), hi.ln()) } else { (lo, hi) };
            Axis::Number { lo, hi, log, knots, off: false, inner: None }
        };
        match domain {
            Domain::Values(v) => match numbers(v) {
                Some(xs) if xs.len() >= 3 => {
                    let first = xs.iter().copied().filter(|x| *x > 0.0).reduce(f64::min);
                    let off = xs.iter().filter(|x| **x <= 0.0).count() == 1;
                    span(&xs, false, off, first)
                }
                _ => {
                    let values: Vec<String> = v.iter().take(MAX_WORDS + 1).cloned().collect();
                    let order = ordered(&values);
                    Axis::Word { values, order }
                }
            },
            Domain::Int { log, .. } | Domain::Float { log, .. } => {
                let (lo, hi) = domain.ends();
                let xs = numbers(&[lo, hi]).unwrap_or_default();
                let first = match domain {
                    Domain::Int { min: 0, step, log: false, .. } => Some(*step as f64),
                    _ => None,
                };
                let from_zero = xs.first() == Some(&0.0);
                span(&xs, *log, from_zero, first)
            }
        }
    }

    /// Moves a number's inner knots `shift` of their spacing along its
    /// axis (a third either way: a peak that falls between two evenly
    /// spaced knots falls near one of the moved ones).
    pub(super) fn shift_knots(&mut self, shift: f64) {
        let Axis::Number { knots, inner, .. } = self else { return };
        if *knots >= 4 {
            let spacing = 1.0 / (*knots - 1) as f64;
            *inner = Some((1..*knots - 1).map(|k| (k as f64 + shift) * spacing).collect());
        }
    }

    /// Where `value` sits along a number's range, in [0, 1].
    pub(super) fn position(&self, value: &str) -> f64 {
        let Axis::Number { lo, hi, log, .. } = self else { return 0.0 };
        let x: f64 = value.trim().parse().unwrap_or(*lo);
        let x = if *log { x.max(f64::MIN_POSITIVE).ln() } else { x };
        if hi > lo { ((x - lo) / (hi - lo)).clamp(0.0, 1.0) } else { 0.0 }
    }

    /// A number's two ends as values (not as placed); for a range from 0
    /// placed on a log scale, its first value past 0 and its top.
    pub(super) fn ends(&self) -> Option<(f64, f64)> {
        let Axis::Number { lo, hi, log, .. } = self else { return None };
        Some(if *log { (lo.exp(), hi.exp()) } else { (*lo, *hi) })
    }

    /// Whether `value` is the 0 a range from 0 starts at (0 or 1).
    pub(super) fn is_off(&self, value: &str) -> Option<f64> {
        let Axis::Number { off: true, .. } = self else { return None };
        let x: f64 = value.trim().parse().unwrap_or(0.0);
        Some(f64::from(u8::from(x <= 0.0)))
    }

    /// The value a number places at its range's middle.
    pub(super) fn middle(&self) -> Option<f64> {
        let Axis::Number { lo, hi, log, .. } = self else { return None };
        let middle = (lo + hi) / 2.0;
        Some(if *log { middle.exp() } else { middle })
    }

    /// The classes of its main-effect columns, as setting `i`.
    pub(super) fn main_classes(&self, i: usize) -> Vec<Class> {
        match self {
            Axis::Number { knots: 2, .. } => vec![Class::Main(i)],
            Axis::Number { knots, off, .. } => {
                let mut out = vec![Class::Main(i), Class::Main(i)];
                if *knots >= 4 {
                    out.extend(std::iter::repeat_n(Class::Shape(i), knots - 2));
                }
                if *off {
                    out.push(Class::Main(i));
                }
                out
            }
            Axis::Word { values, order } => {
                vec![Class::Main(i); values.len() - 1 + usize::from(order.is_some())]
            }
        }
    }

    /// A word setting's values, when there are three or more: two settings
    /// of the same list can be compared ([`Class::Same`]).
    pub(super) fn words(&self) -> Option<&[String]> {
        match self {
            Axis::Word { values, .. } if values.len() >= 3 => Some(values),
            _ => None,
        }
    }

    pub(super) fn pair_width(&self) -> usize {
        match self {
            Axis::Number { knots, .. } => 1 + usize::from(*knots > 2),
            Axis::Word { values, .. } => (values.len() - 1).min(2),
        }
    }

    pub(super) fn main(&self, value: &str, out: &mut Vec<f64>) {
        match self {
            Axis::Number { knots, inner, .. } => {
                let t = self.position(value);
                out.push(t);
                if *knots > 2 {
                    out.push((2.0 * t - 1.0).powi(2));
                }
                // Hat functions at the inner knots: each 1 at its knot and
                // 0 at the next knot on either side (or the range's end).
                if *knots >= 4 {
                    let even = |k: usize| k as f64 / (knots - 1) as f64;
                    let place = |k: usize| match (k, inner) {
                        (0, _) => 0.0,
                        (k, _) if k == knots - 1 => 1.0,
                        (k, Some(inner)) => inner[k - 1],
                        (k, None) => even(k),
                    };
                    out.extend((1..knots - 1).map(|k| {
                        let (left, at, right) = (place(k - 1), place(k), place(k + 1));
                        let up = if at > left { (t - left) / (at - left) } else { 1.0 };
                        let down = if right > at { (right - t) / (right - at) } else { 1.0 };
                        up.min(down).clamp(0.0, 1.0)
                    }));
                }
                out.extend(self.is_off(value));
            }
            Axis::Word { values, .. } => {
                out.extend(self.place(value));
                out.extend(values[1..].iter().map(|v| f64::from(u8::from(v == value))));
            }
        }
    }

    /// The setting's coordinates for a distance-based model: a number its
    /// position (and a range from 0 whether it is 0, which sets 0 as far
    /// from 1 as the range's two ends are from each other), a word one
    /// coordinate a value, scaled so that any two different words lie at
    /// distance 1 (and further apart along their order, where they have
    /// one).
    /// A word past [`MAX_WORDS`] stands where the first value does, as in
    /// its row.
    pub(super) fn inputs(&self, value: &str, out: &mut Vec<f64>) {
        match self {
            Axis::Number { .. } => {
                out.push(self.position(value));
                out.extend(self.is_off(value));
            }
            Axis::Word { values, .. } => {
                out.extend(self.place(value));
                let at = Self::index(values, value);
                out.extend(
                    (0..values.len())
                        .map(|i| if i == at { std::f64::consts::FRAC_1_SQRT_2 } else { 0.0 }),
                );
            }
        }
    }

    fn index(values: &[String], value: &str) -> usize {
        values.iter().position(|v| v == value).unwrap_or(0)
    }

    /// A word's place along its order, if it has one.
    fn place(&self, value: &str) -> Option<f64> {
        let Axis::Word { values, order: Some(order) } = self else { return None };
        Some(order[Self::index(values, value)])
    }

    pub(super) fn input_width(&self) -> usize {
        match self {
            Axis::Number { off, .. } => 1 + usize::from(*off),
            Axis::Word { values, order } => values.len() + usize::from(order.is_some()),
        }
    }

    pub(super) fn pair(&self, value: &str) -> [f64; 2] {
        match self {
            Axis::Number { .. } => {
                let c = self.position(value) - 0.5;
                match self.is_off(value) {
                    Some(off) => [2.0 * c, 2.0 * off - 1.0],
                    None => [2.0 * c, 12.0 * c * c - 1.0],
                }
            }
            Axis::Word { values, .. } => {
                let is = |i: usize| f64::from(u8::from(values.get(i).is_some_and(|v| v == value)));
                [is(1), is(2)]
            }
        }
    }
}
