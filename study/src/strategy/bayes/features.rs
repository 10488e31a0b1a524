//! How a configuration becomes a row of numbers for the regression: each
//! setting's main effect, and products of every two settings' coarse
//! codes for their interactions.
//!
//! Each setting is coded on its own ([`super::axis`]); here they are put
//! together:
//!
//! - A number held at 0 by another's 0 (a constraint such as
//!   `draft_min <= draft_max`: without drafting, no minimum draft) is
//!   coded at its range's middle wherever the other is 0: there it was
//!   not chosen, and coded as 0 it would credit part of the other's
//!   switch to itself (the models then held a small `draft_min` slow and
//!   proposed it equal to `draft_max`; the strategy benchmark, `draft`,
//!   60 seeds: median 17 → 16 trials, 90th percentile 39 → 30).
//! - Two word settings that choose from the same list of three or more
//!   values (the K and V cache types) also get a column for whether they
//!   match: mixed types can cost what neither type costs alone, an
//!   interaction with no main effect that pair columns, which follow the
//!   settings that matter alone, would learn last.
//! - Where a study varies llama-server's context and its slots both
//!   ([`engine_bridge::planner::SLOT_CONTEXT`]), the context a slot gets
//!   (their ratio) is one more number, in rows and coordinates alike:
//!   whether a prompt fits goes by it, a diagonal of the two that neither
//!   one's curve nor their product draws (the strategy benchmark,
//!   `serving`, 30 seeds: median 50 trials → 45, 90th percentile 144 →
//!   82, none short of 95 % at 200 trials where two were).
//! - Where the study has a planner that predicts GPU memory (a GGUF
//!   model's metadata, for llama-server), how full it leaves the fullest
//!   GPU is one more number after that ([`super::planned`]).

use std::borrow::Cow;

use engine_bridge::Settings;

use super::axis::Axis;
pub(super) use super::axis::Class;
use super::planned::{GpuFillFn, Planned};
use crate::space::{Domain, Param, Space};

/// Turns configurations into rows.
#[derive(Debug, Clone)]
pub(super) struct Encoder {
    names: Vec<String>,
    axes: Vec<Axis>,
    /// The value a configuration that leaves a setting out has.
    defaults: Vec<String>,
    /// How many columns each setting keeps for its pairs (0 to 2).
    pair_cap: usize,
    /// The settings whose values are compared ([`Class::Same`]).
    matched: Vec<(usize, usize)>,
    /// (held, holder, the held one's middle): where the holder is 0, the
    /// held setting is coded at its middle ([`Encoder::for_space`]).
    held: Vec<(usize, usize, String)>,
    /// (context, slots): their ratio is the last axis, past the settings'
    /// own ([`Encoder::slot_context`]).
    slot: Option<(usize, usize)>,
    /// The planner's GPU bytes: the very last axis ([`Encoder::planned`]).
    planned: Option<Planned>,
    pub classes: Vec<Class>,
}

/// Settings with more values than this are not checked for being held
/// at 0 by another (each value is tried against the constraints).
const MAX_HELD_VALUES: u64 = 64;

/// Pair columns are kept only while the row stays this wide: first two
/// columns a pair of settings, then one, then none (main effects only, for
/// a study of dozens of settings).
const MAX_COLUMNS: usize = 512;

impl Encoder {
    #[cfg(test)]
    pub fn new(params: &[Param], defaults: &Settings) -> Self {
        Self::with_plan(params, defaults, None)
    }

    /// The encoder of `params`, with the planner's GPU bytes as the last
    /// axis where `planned` is given.
    fn with_plan(params: &[Param], defaults: &Settings, planned: Option<(Planned, Axis)>) -> Self {
        let mut axes: Vec<Axis> = params.iter().map(Axis::of).collect();
        let slot = Self::slot_context(params, &axes).map(|(pair, axis)| {
            axes.push(axis);
            pair
        });
        let planned = planned.map(|(planned, axis)| {
            axes.push(axis);
            planned
        });
        let mut classes = vec![Class::Intercept];
        for (i, a) in axes.iter().enumerate() {
            classes.extend(a.main_classes(i));
        }
        let pair_columns = |cap: usize| {
            let widths: Vec<usize> = axes.iter().map(|a| a.pair_width().min(cap)).collect();
            let mut n = 0;
            for (i, a) in widths.iter().enumerate() {
                n += widths[i + 1..].iter().map(|b| a * b).sum::<usize>();
            }
            n
        };
        let pair_cap =
            (0..=2).rev().find(|c| classes.len() + pair_columns(*c) <= MAX_COLUMNS).unwrap_or(0);
        for (i, a) in axes.iter().enumerate() {
            for (j, b) in axes.iter().enumerate().skip(i + 1) {
                let width = a.pair_width().min(pair_cap) * b.pair_width().min(pair_cap);
                classes.extend(std::iter::repeat_n(Class::Pair(i, j), width));
            }
        }
        let mut matched = Vec::new();
        for (i, a) in axes.iter().enumerate() {
            for (j, b) in axes.iter().enumerate().skip(i + 1) {
                if a.words().is_some() && a.words() == b.words() && classes.len() < MAX_COLUMNS {
                    matched.push((i, j));
                    classes.push(Class::Same(i, j));
                }
            }
        }
        let defaults = params
            .iter()
            .map(|p| defaults.get(&p.name).cloned().unwrap_or_else(|| p.domain.ends().0))
            .collect();
        let names = params.iter().map(|p| p.name.clone()).collect();
        Encoder {
            names,
            axes,
            defaults,
            pair_cap,
            matched,
            held: Vec::new(),
            slot,
            planned,
            classes,
        }
    }

    /// The context and slot settings ([`engine_bridge::planner::SLOT_CONTEXT`])
    /// by index, and the axis of their ratio (on a log scale, from the
    /// smallest context over the most slots), when the study varies both
    /// as numbers of positive values.
    fn slot_context(params: &[Param], axes: &[Axis]) -> Option<((usize, usize), Axis)> {
        let (context, slots) = engine_bridge::planner::SLOT_CONTEXT;
        let at = |name: &str| params.iter().position(|p| p.name == name);
        let (c, s) = (at(context)?, at(slots)?);
        let ((c_lo, c_hi), (s_lo, s_hi)) = (axes[c].ends()?, axes[s].ends()?);
        let (lo, hi) = ((c_lo / s_hi).ln(), (c_hi / s_lo).ln());
        let ok = c_lo > 0.0 && s_lo > 0.0 && lo.is_finite() && hi.is_finite() && hi > lo;
        ok.then_some((
            (c, s),
            Axis::Number { lo, hi, log: true, knots: 5, off: false, inner: None },
        ))
    }

    /// As [`Encoder::planned`], without a planner.
    #[cfg(test)]
    pub fn for_space(space: &Space, baseline: &Settings) -> Self {
        Self::planned(space, baseline, None)
    }

    /// The encoder of a study's space, with the GPU bytes `plan` predicts
    /// as one more axis where it predicts bytes that differ over the
    /// space. It also knows the numbers the constraints hold at 0 while
    /// another number is 0: with `baseline`'s other settings and the
    /// holder at 0, the constraints allow the held one its 0 and nothing
    /// else, while the holder at its top allows more.
    pub fn planned(space: &Space, baseline: &Settings, plan: Option<&GpuFillFn>) -> Self {
        let planned = plan.and_then(|p| Planned::of(p, space, baseline));
        let mut encoder = Self::with_plan(&space.params, baseline, planned);
        if space.constraints.is_empty() {
            return encoder;
        }
        let config = |pairs: [(usize, &str); 2]| {
            let mut c = baseline.clone();
            for (i, v) in pairs {
                c.insert(space.params[i].name.clone(), v.to_string());
            }
            c
        };
        // A setting's 0 and its top as written: a range's ends, or the
        // listed values at them (a list need not be in order). Never the
        // whole grid of a range, which may be huge.
        let end = |i: usize, at: f64| match &space.params[i].domain {
            Domain::Values(v) => {
                let axis = &encoder.axes[i];
                let at_end = |x: &&String| {
                    if at == 0.0 { axis.is_off(x) == Some(1.0) } else { axis.position(x) == at }
                };
                v.iter().find(at_end).cloned()
            }
            d => Some(if at == 0.0 { d.ends().0 } else { d.ends().1 }),
        };
        let zero = |i: usize| end(i, 0.0);
        let named: Vec<_> = space.constraints.iter().map(|c| c.settings()).collect();
        let mut held = Vec::new();
        for (a, pa) in space.params.iter().enumerate() {
            let axis = &encoder.axes[a];
            let (Axis::Number { off: true, .. }, Some(middle)) = (axis, axis.middle()) else {
                continue;
            };
            if pa.domain.len() > MAX_HELD_VALUES {
                continue;
            }
            let (values, Some(a_zero)) = (pa.domain.grid(), zero(a)) else { continue };
            for (b, pb) in space.params.iter().enumerate() {
                if b == a || !matches!(encoder.axes[b], Axis::Number { off: true, .. }) {
                    continue;
                }
                // Only pairs that some constraint names together: a study
                // of many ranges from 0 tries no values for the rest.
                if !named.iter().any(|n| n.contains(&pa.name) && n.contains(&pb.name)) {
                    continue;
                }
                let Some(b_zero) = zero(b) else { continue };
                let allowed = |holder: &str| {
                    values.iter().filter(|v| space.allows(&config([(a, v), (b, holder)]))).count()
                };
                let only_zero =
                    allowed(&b_zero) == 1 && space.allows(&config([(a, &a_zero), (b, &b_zero)]));
                if only_zero && end(b, 1.0).is_some_and(|top| allowed(&top) > 1) {
                    held.push((a, b, format!("{middle}")));
                }
            }
        }
        encoder.held = held;
        encoder
    }

    /// The planner's fill, where the encoder has it as an axis.
    pub fn plan(&self) -> Option<&Planned> {
        self.planned.as_ref()
    }

    /// The same encoder with every number's inner knots moved `shift` of
    /// their spacing (see [`Axis::shift_knots`]).
    pub fn shifted(&self, shift: f64) -> Self {
        let mut e = self.clone();
        for axis in &mut e.axes {
            axis.shift_knots(shift);
        }
        e
    }

    pub fn width(&self) -> usize {
        self.classes.len()
    }

    /// Each axis's value in `config`: the settings' own (a held one at
    /// its middle), then the context a slot gets and the planner's GPU
    /// bytes, where they are coded.
    fn values<'c>(&'c self, config: &'c Settings) -> Vec<Cow<'c, str>> {
        let mut values: Vec<Cow<str>> = self
            .names
            .iter()
            .zip(&self.defaults)
            .map(|(n, d)| Cow::Borrowed(config.get(n).map_or(d.as_str(), String::as_str)))
            .collect();
        for (a, b, middle) in &self.held {
            if self.axes[*b].is_off(&values[*b]) == Some(1.0) {
                values[*a] = Cow::Borrowed(middle);
            }
        }
        if let Some((c, s)) = self.slot {
            // A ratio that is no finite positive number (an unreadable,
            // zero or infinite value) stands at its lower end.
            let [x, y] = [c, s].map(|i| values[i].trim().parse::<f64>().unwrap_or(0.0));
            let ratio = Some(x / y).filter(|r| r.is_finite() && *r > 0.0).unwrap_or(0.0);
            values.push(Cow::Owned(ratio.to_string()));
        }
        if let Some(planned) = &self.planned {
            values.push(Cow::Owned(planned.fill(config).to_string()));
        }
        values
    }

    /// The columns of a row that no setting named in `names` touches: the
    /// intercept, the other settings' own columns and the pairs and
    /// matches among them.
    pub fn columns_without(&self, names: &[&str]) -> Vec<usize> {
        let left = |i: &usize| self.names.get(*i).is_none_or(|n| !names.contains(&n.as_str()));
        let keeps = |c: &Class| match c {
            Class::Intercept | Class::Drift => true,
            Class::Main(i) | Class::Shape(i) => left(i),
            Class::Pair(i, j) | Class::Same(i, j) => left(i) && left(j),
        };
        (0..self.classes.len()).filter(|c| keeps(&self.classes[*c])).collect()
    }

    /// How many axes there are: the settings, the context a slot gets
    /// and the planner's GPU bytes where they are coded.
    pub fn settings(&self) -> usize {
        self.axes.len()
    }

    /// Which setting each of [`Self::inputs`]' coordinates belongs to.
    pub fn groups(&self) -> Vec<usize> {
        self.axes
            .iter()
            .enumerate()
            .flat_map(|(i, a)| std::iter::repeat_n(i, a.input_width()))
            .collect()
    }

    /// The coordinates of `config` for a distance-based model (see
    /// [`Axis::inputs`]).
    pub fn inputs(&self, config: &Settings) -> Vec<f64> {
        let mut out = Vec::new();
        for (a, v) in self.axes.iter().zip(self.values(config)) {
            a.inputs(&v, &mut out);
        }
        out
    }

    /// The row of `config`.
    pub fn row(&self, config: &Settings) -> Vec<f64> {
        let values = self.values(config);
        let mut out = Vec::with_capacity(self.width());
        out.push(1.0);
        for (a, v) in self.axes.iter().zip(&values) {
            a.main(v, &mut out);
        }
        let codes: Vec<[f64; 2]> = self.axes.iter().zip(&values).map(|(a, v)| a.pair(v)).collect();
        for i in 0..self.axes.len() {
            for j in i + 1..self.axes.len() {
                for x in &codes[i][..self.axes[i].pair_width().min(self.pair_cap)] {
                    for y in &codes[j][..self.axes[j].pair_width().min(self.pair_cap)] {
                        out.push(x * y);
                    }
                }
            }
        }
        out.extend(self.matched.iter().map(|(i, j)| f64::from(u8::from(values[*i] == values[*j]))));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::axis::MAX_WORDS;
    use super::*;

    fn param(name: &str, domain: Domain) -> Param {
        Param { name: name.into(), domain }
    }

    #[test]
    fn many_settings_or_words_keep_the_row_bounded() {
        let words = |n: usize, k: usize| -> Vec<Param> {
            let values: Vec<String> = (0..k).map(|v| format!("w{v}")).collect();
            (0..n).map(|i| param(&format!("s{i}"), Domain::Values(values.clone()))).collect()
        };
        // 20 settings of 3 words: two columns a pair would make 801; one
        // makes 231, and 190 more say whether two of them match.
        let e = Encoder::new(&words(20, 3), &Settings::new());
        assert_eq!(e.width(), 1 + 20 * 2 + 190 + 190);
        // 64 settings of 10,000 words: 16 indicators each, no pairs.
        let params = words(64, 10_000);
        let e = Encoder::new(&params, &Settings::new());
        assert_eq!(e.width(), 1 + 64 * MAX_WORDS);
        let c: Settings = params.iter().map(|p| (p.name.clone(), "w9999".to_string())).collect();
        assert_eq!(e.row(&c).len(), e.width());
        // A word past the sixteenth stands where the first does, in a
        // distance model's coordinates as in the row.
        let first: Settings = params.iter().map(|p| (p.name.clone(), "w0".to_string())).collect();
        assert_eq!(e.inputs(&c), e.inputs(&first));
        assert_eq!(e.inputs(&c).len(), 64 * (MAX_WORDS + 1));
        // A range of a million values is coded from its ends.
        let wide = [param("ctx", Domain::Int { min: 1, max: 1 << 20, step: 1, log: false })];
        assert_eq!(Encoder::new(&wide, &Settings::new()).width(), 1 + 2 + 3);
    }

    #[test]
    fn rows_have_the_declared_width_and_peaks_are_local() {
        let params = vec![
            param("threads", Domain::Int { min: 1, max: 16, step: 1, log: false }),
            param("batch", Domain::Values(vec!["128".into(), "512".into(), "2048".into()])),
            param("k", Domain::Values(vec!["x".into(), "y".into(), "z".into()])),
        ];
        let e = Encoder::new(&params, &Settings::new());
        // 1 + mains (threads: slope, curvature and 3 bends; batch: slope
        // and curvature; k: 2 indicators, words with no known order) +
        // pairs 2·2 + 2·2 + 2·2.
        assert_eq!(e.width(), 1 + 9 + 12);
        let config = |t: &str, b: &str, k: &str| -> Settings {
            [("threads", t), ("batch", b), ("k", k)]
                .into_iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        let row = |t: &str, b: &str, k: &str| e.row(&config(t, b, k));
        let r = row("3", "512", "y");
        assert_eq!(r.len(), e.width());
        // threads 3 of 1..16, a range from 1 up spanning 16×: on a log
        // axis, t = ln 3 / ln 16, between knots 1 and 2 of 0..4.
        let t = 3f64.ln() / 16f64.ln();
        assert!((r[1] - t).abs() < 1e-9 && (r[2] - (2.0 * t - 1.0).powi(2)).abs() < 1e-9);
        let at = t * 4.0;
        assert!((r[3] - (2.0 - at)).abs() < 1e-9 && (r[4] - (at - 1.0)).abs() < 1e-9, "{r:?}");
        assert_eq!(r[5], 0.0, "{r:?}");
        // 128…2048 spans 16×: a log axis, 512 in its middle.
        assert!((r[6] - 0.5).abs() < 1e-9 && r[7].abs() < 1e-9, "{r:?}");
        assert_eq!(&r[8..10], &[1.0, 0.0], "y is the first indicator");
        assert_ne!(row("1", "128", "x"), row("16", "2048", "z"));
        // A distance model's coordinates: a number its position, a word
        // one coordinate a value, two different words 1 apart.
        assert_eq!(e.groups(), [0, 1, 2, 2, 2]);
        let inputs = |t: &str, b: &str, k: &str| e.inputs(&config(t, b, k));
        let (a, b) = (inputs("3", "512", "y"), inputs("3", "512", "x"));
        assert!((a[0] - t).abs() < 1e-9 && (a[1] - 0.5).abs() < 1e-9, "{a:?}");
        let distance: f64 = a.iter().zip(&b).map(|(x, y)| (x - y).powi(2)).sum();
        assert!((distance - 1.0).abs() < 1e-9, "{a:?} {b:?}");
        // GPU layers (a share of the model's, from 0) and a range spanning
        // less than 8× stay linear.
        for (name, domain) in [
            ("n_gpu_layers", Domain::Int { min: 0, max: 99, step: 1, log: false }),
            ("n", Domain::Int { min: 4, max: 16, step: 1, log: false }),
        ] {
            let e = Encoder::new(&[param(name, domain.clone())], &Settings::new());
            let (lo, hi) = domain.ends();
            let (lo, hi): (f64, f64) = (lo.parse().unwrap(), hi.parse().unwrap());
            let middle = ((lo + hi) / 2.0).round();
            let at = e.inputs(&[(name.to_string(), middle.to_string())].into())[0];
            assert!((at - (middle - lo) / (hi - lo)).abs() < 1e-9, "{domain:?}: {at}");
        }
    }

    #[test]
    fn a_range_from_zero_also_says_whether_it_is_zero() {
        // Drafted tokens 0..24: slope, curvature, three bends, then
        // whether drafting is off; a range from 1 has no such column.
        // Past 0 the tokens are placed on a log scale, as a range from 1
        // spanning 8× or more is.
        let draft = param("draft", Domain::Int { min: 0, max: 24, step: 1, log: false });
        let slots = param("slots", Domain::Values(["1", "2", "4"].map(String::from).to_vec()));
        let e = Encoder::new(&[draft, slots], &Settings::new());
        let config = |d: &str, s: &str| -> Settings {
            [("draft".to_string(), d.to_string()), ("slots".to_string(), s.to_string())].into()
        };
        // 1 + mains (6 + 2) + the pair's 2·2.
        assert_eq!(e.width(), 1 + 8 + 4);
        assert_eq!(e.classes[6], Class::Main(0));
        let (off, on) = (e.row(&config("0", "4")), e.row(&config("1", "4")));
        assert_eq!((off[6], on[6]), (1.0, 0.0));
        // In the pair with the slots, 0 and 1 drafted tokens differ by the
        // whole step, not by a 24th of the range: drafting with four
        // slots can fail where not drafting runs.
        // (The pair's columns: the slope by each of the slots' two codes,
        // then whether it is 0 by each.)
        assert!((off[9] - on[9]).abs() < 0.1, "{off:?} {on:?}");
        assert!((off[11] - on[11]).abs() > 1.9, "{off:?} {on:?}");
        // A distance model sees 0 as far from 1 as 1 is from 24, and 24
        // tokens as far from 5 as 5 are from 1: by their ratios.
        let x = |d: &str| e.inputs(&config(d, "1"));
        assert_eq!(e.groups(), [0, 0, 1]);
        let apart = |a: &str, b: &str| -> f64 {
            x(a).iter().zip(x(b)).map(|(p, q)| (p - q).powi(2)).sum::<f64>().sqrt()
        };
        assert!((apart("0", "1") - 1.0).abs() < 1e-9, "{}", apart("0", "1"));
        assert!((apart("1", "24") - 1.0).abs() < 1e-9, "{}", apart("1", "24"));
        assert!((apart("1", "5") - apart("5", "24")).abs() < 0.02);
        let from_one = param("layers", Domain::Int { min: 1, max: 24, step: 1, log: false });
        assert_eq!(Encoder::new(&[from_one], &Settings::new()).width(), 1 + 5);
    }

    #[test]
    fn a_listed_minus_one_turns_the_feature_off() {
        // SGLang's chunked prefill: -1 prefills each prompt whole. It is
        // not a chunk one step below 512, so it is coded as a range from
        // 0 codes its 0, and the chunks past it by their ratios.
        let list = |v: &[&str]| Domain::Values(v.iter().map(|s| s.to_string()).collect());
        let chunks = ["-1", "512", "1024", "2048", "4096", "8192"];
        let e = Encoder::new(&[param("chunk", list(&chunks))], &Settings::new());
        let x = |v: &str| e.inputs(&[("chunk".to_string(), v.to_string())].into());
        let apart = |a: &str, b: &str| -> f64 {
            x(a).iter().zip(x(b)).map(|(p, q)| (p - q).powi(2)).sum::<f64>().sqrt()
        };
        assert_eq!(x("-1").len(), 2, "a column for whether it is off");
        assert!((apart("-1", "512") - 1.0).abs() < 1e-9, "{}", apart("-1", "512"));
        assert!((apart("512", "1024") - apart("4096", "8192")).abs() < 1e-9);
        // Two values below 1 are two values of a line.
        let line = Encoder::new(&[param("n", list(&["-1", "0", "512", "4096"]))], &Settings::new());
        assert_eq!(line.inputs(&[("n".to_string(), "0".to_string())].into()).len(), 1);
    }

    #[test]
    fn a_number_held_at_zero_by_another_is_coded_at_its_middle_there() {
        let most = param("draft_max", Domain::Int { min: 0, max: 24, step: 1, log: false });
        let fewest = param("draft_min", Domain::Int { min: 0, max: 8, step: 1, log: false });
        let threads = param("threads", Domain::Int { min: 0, max: 8, step: 1, log: false });
        let constraint = crate::expr::Constraint::parse("draft_min <= draft_max").unwrap();
        let space = Space {
            params: vec![most, fewest, threads],
            constraints: vec![constraint],
            ..Space::default()
        };
        let baseline: Settings = [("draft_max", "0"), ("draft_min", "0"), ("threads", "4")]
            .map(|(k, v)| (k.into(), v.into()))
            .into();
        let e = Encoder::for_space(&space, &baseline);
        let config = |most: &str, fewest: &str| -> Settings {
            let mut c = baseline.clone();
            c.insert("draft_max".into(), most.into());
            c.insert("draft_min".into(), fewest.into());
            c
        };
        // Not drafting, the minimum was not chosen: it stands at the middle
        // of 1..8 as placed (on a log scale: √8), in the row and in a
        // distance model's coordinates.
        let plain = Encoder::new(&space.params, &baseline);
        let middle = 8f64.sqrt().to_string();
        let alike = |a: Vec<f64>, b: Vec<f64>| {
            assert_eq!(a.len(), b.len());
            assert!(a.iter().zip(&b).all(|(x, y)| (x - y).abs() < 1e-9), "{a:?} {b:?}");
        };
        alike(e.row(&config("0", "0")), plain.row(&config("0", &middle)));
        alike(e.inputs(&config("0", "0")), plain.inputs(&config("0", &middle)));
        // (The drafted tokens take two coordinates, the minimum the next.)
        assert!((e.inputs(&config("0", "0"))[2] - 0.5).abs() < 1e-9);
        // Drafting, a minimum of 0 is chosen, and coded as such.
        assert_eq!(e.row(&config("6", "0")), plain.row(&config("6", "0")));
        // Nothing holds the drafted tokens, nor the threads (no constraint
        // names them together with a setting at 0).
        assert_eq!(e.row(&config("0", "0")).len(), plain.width());
        assert_eq!(e.held.len(), 1, "{:?}", e.held);
        // Without the constraint, nothing is held.
        let free = Space { constraints: vec![], ..space.clone() };
        assert!(Encoder::for_space(&free, &baseline).held.is_empty());
        // A list out of order is read by its values, not its first and last.
        let listed = ["4", "0", "8"].map(String::from).to_vec();
        let mut unordered = space.clone();
        unordered.params[1].domain = Domain::Values(listed);
        assert_eq!(Encoder::for_space(&unordered, &baseline).held.len(), 1);
    }

    #[test]
    fn cache_types_also_stand_along_their_precision() {
        let types = |v: &[&str]| Domain::Values(v.iter().map(|s| s.to_string()).collect());
        let e = Encoder::new(&[param("k", types(&["f16", "q8_0", "q4_0"]))], &Settings::new());
        // The intercept, the place along the order, then two indicators.
        assert_eq!(e.width(), 1 + 3);
        let at = |v: &str| e.row(&[("k".to_string(), v.to_string())].into());
        assert_eq!(at("f16")[1], 1.0);
        assert_eq!(at("q4_0")[1], 0.0);
        let q8 = at("q8_0");
        assert!(q8[1] > 0.3 && q8[1] < 0.7, "{q8:?}");
        assert_eq!(&q8[2..], &[1.0, 0.0]);
        // A distance model sees q8_0 nearer f16 than q4_0 is.
        let inputs = |v: &str| e.inputs(&[("k".to_string(), v.to_string())].into());
        let distance = |a: &str, b: &str| -> f64 {
            inputs(a).iter().zip(inputs(b)).map(|(x, y)| (x - y).powi(2)).sum()
        };
        assert!(distance("q8_0", "f16") < distance("q4_0", "f16"));
        assert_eq!(e.groups(), [0, 0, 0, 0]);
        // A word with no known precision leaves the list unordered.
        let mixed = Encoder::new(&[param("k", types(&["f16", "turbo3"]))], &Settings::new());
        assert_eq!(mixed.width(), 1 + 1);
    }

    #[test]
    fn settings_of_one_list_of_words_also_say_whether_they_match() {
        let types = || Domain::Values(["f16", "q8_0", "q4_0"].map(String::from).to_vec());
        let switch = || Domain::Values(["off", "on"].map(String::from).to_vec());
        let params = [
            param("k", types()),
            param("v", types()),
            param("fa", switch()),
            param("mlock", switch()),
        ];
        let e = Encoder::new(&params, &Settings::new());
        // The intercept, mains (3 + 3 + 1 + 1), pairs (2·2 + 2 + 2 + 2 + 2
        // + 1), and one column for K matching V: two switches are already
        // fully modelled by their pair.
        assert_eq!(e.width(), 1 + 8 + 13 + 1);
        assert_eq!(e.classes.last(), Some(&Class::Same(0, 1)));
        let row = |k: &str, v: &str| {
            let c: Settings = [("k", k), ("v", v), ("fa", "on"), ("mlock", "off")]
                .into_iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect();
            e.row(&c)
        };
        assert_eq!(row("q8_0", "q8_0").last(), Some(&1.0));
        assert_eq!(row("q8_0", "q4_0").last(), Some(&0.0));
        assert_eq!(row("f16", "f16").len(), e.width());
    }

    /// Context and slots as llama-server's catalog names them, and a
    /// third setting.
    fn serving(slots: &str) -> Vec<Param> {
        let list = |v: &[&str]| Domain::Values(v.iter().map(|x| x.to_string()).collect());
        vec![
            param("ctx_size", list(&["8192", "16384", "32768", "65536", "131072"])),
            param(slots, list(&["1", "2", "4", "8", "16"])),
            param("threads", Domain::Int { min: 1, max: 16, step: 1, log: false }),
        ]
    }

    fn at(slots: &str, ctx: u32, n: u32) -> Settings {
        [("ctx_size", ctx.to_string()), (slots, n.to_string()), ("threads", "4".into())]
            .into_iter()
            .map(|(a, b)| (a.to_string(), b))
            .collect()
    }

    #[test]
    fn the_context_a_slot_gets_is_a_number_of_its_own() {
        let e = Encoder::new(&serving("parallel"), &Settings::new());
        let other = Encoder::new(&serving("slots"), &Settings::new());
        // Its slope, curvature and three bends, and two columns with each
        // of the three settings' two.
        assert_eq!(e.width(), other.width() + 5 + 3 * 2 * 2);
        assert_eq!(e.settings(), 4);
        // The last coordinate is the ratio's place, from 8192 / 16 to
        // 131072 / 1 on a log scale: alike wherever the ratio is.
        let place = |ctx, n| *e.inputs(&at("parallel", ctx, n)).last().unwrap();
        assert_eq!(place(16384, 2), place(32768, 4));
        assert!((place(8192, 16) - 0.0).abs() < 1e-12 && (place(131072, 1) - 1.0).abs() < 1e-12);
        assert!((place(8192, 1) - 0.5).abs() < 1e-12, "{}", place(8192, 1));
        // Ends whose ratio overflows code no ratio at all.
        let list3 = |v: [&str; 3]| Domain::Values(v.map(String::from).to_vec());
        let mut huge = serving("parallel");
        huge[0] = param("ctx_size", list3(["1e300", "1e304", "1e308"]));
        huge[1] = param("parallel", list3(["1e-300", "1e-100", "1"]));
        assert_eq!(Encoder::new(&huge, &Settings::new()).settings(), 3);
    }

    #[test]
    fn a_response_of_the_context_a_slot_gets_is_learned_across_the_diagonal() {
        // Each request's speed grows with its slot's context up to 8,192
        // tokens and no further: a bend along the diagonal of the two
        // settings. Fitted to every other cell of the grid, the linear
        // model predicts the cells held out near the bend from the
        // ratio's column; under a name the encoder does not know, the
        // same slots leave it the two settings' own curves and products.
        let speed = |ctx: u32, n: u32| (f64::from(ctx / n).min(8192.0)).ln();
        let held = [(16384, 1), (65536, 8), (32768, 2), (131072, 16), (16384, 4)];
        let mut errors = Vec::new();
        for name in ["parallel", "slots"] {
            let e = Encoder::new(&serving(name), &Settings::new());
            let (mut rows, mut y) = (Vec::new(), Vec::new());
            for ctx in [8192, 16384, 32768, 65536, 131072] {
                for n in [1, 2, 4, 8, 16] {
                    if !held.contains(&(ctx, n)) {
                        rows.push(e.row(&at(name, ctx, n)));
                        y.push(speed(ctx, n));
                    }
                }
            }
            let fit = super::super::regression::Posterior::fit(&rows, &y, &e.classes).unwrap();
            let off = |&(ctx, n): &(u32, u32)| {
                (fit.mean_at(&e.row(&at(name, ctx, n))) - speed(ctx, n)).powi(2)
            };
            errors.push((held.iter().map(off).sum::<f64>() / held.len() as f64).sqrt());
        }
        assert!(
            errors[0] < 0.5 * errors[1],
            "off by {:.3} with the ratio, {:.3} without",
            errors[0],
            errors[1]
        );
    }
}
