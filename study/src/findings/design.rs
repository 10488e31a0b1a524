//! How settings enter the findings' models: each varied setting is a
//! factor coded against its baseline value, so that every coefficient is a
//! contrast with the baseline and a row of all-baseline settings is all
//! zeros. A setting with a few values gets a column per other value; a
//! number with many (what random and model-based searches sample) gets a
//! line with bends at the quartiles of its values (a linear spline in its
//! value, or its logarithm when it spans a factor of 8 or more:
//! [`crate::space::log_scale`]) and a
//! square term, which follows an optimum in the middle of the range or a
//! plateau without inventing wiggles, and bends between its knots as a
//! smooth peak does (a misfit there would pass for an interaction). Two
//! factors act together through the products of their columns (a
//! number's straight part only). Memory may also have the planner's
//! prediction as a column of its own, and that column times a factor's
//! (see [`super::planned`]).

use std::collections::{BTreeMap, BTreeSet};

use engine_bridge::Settings;

use super::planned::Against;

/// A numeric setting with more distinct values than this is a curve.
const MAX_LEVELS: usize = 6;

/// A setting of words with more distinct values than this is left out of
/// the models: a column each would make every fit cost the square of it.
const MAX_WORDS: usize = 48;

/// At most this many values a curve is stated at.
const CURVE_POINTS: usize = 9;

/// How one setting is coded.
#[derive(Debug, Clone, PartialEq)]
pub enum Coding {
    /// One column per value other than the base (treatment coding).
    Levels { values: Vec<String>, base: String },
    /// A line in the (log-)value with bends at `knots` (on the same
    /// scale), scaled by `scale`, measured from the base; `values`: the
    /// distinct values tried.
    Curve { log: bool, base: f64, scale: f64, knots: Vec<f64>, values: Vec<f64> },
}

/// A varied setting as the models see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Factor {
    pub setting: String,
    pub coding: Coding,
}

/// The value a trial gave `setting` (`""`: left to the engine).
pub fn value_of(settings: &Settings, setting: &str) -> String {
    settings.get(setting).cloned().unwrap_or_default()
}

impl Factor {
    /// The factor for `setting` over the values the trials gave it, coded
    /// against `base` (the baseline's value); `None` when it took one value,
    /// or more words than [`MAX_WORDS`].
    pub fn new(setting: &str, values: &[String], base: Option<&str>) -> Option<Factor> {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for v in values {
            *counts.entry(v.as_str()).or_default() += 1;
        }
        if counts.len() < 2 {
            return None;
        }
        let numbers: Option<Vec<f64>> = counts.keys().map(|v| v.parse::<f64>().ok()).collect();
        let numbers = numbers.filter(|n| n.len() > MAX_LEVELS && n.iter().all(|x| x.is_finite()));
        let coding = match numbers {
            Some(mut xs) => {
                xs.sort_by(f64::total_cmp);
                let log = crate::space::log_scale(xs[0], xs[xs.len() - 1]);
                let base = base.and_then(|b| b.parse::<f64>().ok()).unwrap_or(xs[xs.len() / 2]);
                curve(xs, base, log, false)
            }
            None if counts.len() > MAX_WORDS => return None,
            None => {
                // The most common value (the first of equals) stands in for a
                // baseline the trials never ran.
                let top = counts.values().copied().max().unwrap_or(0);
                let most = counts.iter().find(|(_, n)| **n == top).map_or("", |(v, _)| *v);
                let base = base.filter(|b| counts.contains_key(b)).unwrap_or(most).to_string();
                Coding::Levels { values: counts.keys().map(|v| v.to_string()).collect(), base }
            }
        };
        Some(Factor { setting: setting.to_string(), coding })
    }

    /// The same curve with its bends placed otherwise, and on the other
    /// scale (log or plain) where its values allow: as many columns each,
    /// for the data to choose from. None for levels.
    pub fn alternatives(&self) -> Vec<Factor> {
        let Coding::Curve { log, base, values, .. } = &self.coding else { return vec![] };
        let scales = if values[0] > 0.0 { vec![*log, !log] } else { vec![false] };
        scales
            .into_iter()
            .flat_map(|log| [(log, false), (log, true)])
            .map(|(log, even)| curve(values.clone(), *base, log, even))
            .filter(|c| *c != self.coding)
            .map(|coding| Factor { setting: self.setting.clone(), coding })
            .collect()
    }

    /// Columns it takes in a model.
    pub fn width(&self) -> usize {
        match &self.coding {
            Coding::Levels { values, .. } => values.len() - 1,
            Coding::Curve { knots, .. } => 2 + knots.len(),
        }
    }

    /// Columns it takes in an interaction: a number's line and its bend,
    /// so that another setting may steepen it and curve it too (prefill
    /// that grows with threads the more steeply, and the more bent, the
    /// larger the micro-batch).
    pub fn linear_width(&self) -> usize {
        match &self.coding {
            Coding::Levels { .. } => self.width(),
            Coding::Curve { .. } => 2,
        }
    }

    /// Its columns for `value` (zeros for the base).
    pub fn encode(&self, value: &str) -> Vec<f64> {
        match &self.coding {
            Coding::Levels { values, base } => values
                .iter()
                .filter(|v| *v != base)
                .map(|v| if v == value { 1.0 } else { 0.0 })
                .collect(),
            Coding::Curve { log, base, scale, knots, .. } => {
                let t = |x: f64| if *log { x.ln() } else { x };
                let x = t(value.parse().unwrap_or(*base));
                let b = t(*base);
                let mut columns = vec![(x - b) / scale];
                columns.extend(knots.iter().map(|k| ((x - k).max(0.0) - (b - k).max(0.0)) / scale));
                // A bend everywhere: a smooth peak between knots is no
                // misfit for another setting to pass for an interaction.
                columns.push(((x - b) / scale).powi(2));
                columns
            }
        }
    }

    /// Its interaction columns for `value`.
    pub fn encode_linear(&self, value: &str) -> Vec<f64> {
        let columns = self.encode(value);
        match &self.coding {
            Coding::Levels { .. } => columns,
            Coding::Curve { .. } => vec![columns[0], columns[columns.len() - 1]],
        }
    }

    /// The base value, as a setting's text.
    pub fn base(&self) -> String {
        match &self.coding {
            Coding::Levels { base, .. } => base.clone(),
            Coding::Curve { base, .. } => crate::space::fmt_float(*base),
        }
    }

    /// The values an effect is stated at: every value tried, or for a
    /// curve up to [`CURVE_POINTS`] of them spread over its range.
    pub fn points(&self) -> Vec<String> {
        match &self.coding {
            Coding::Levels { values, .. } => values.clone(),
            Coding::Curve { values, .. } => {
                let n = values.len();
                let picks: BTreeSet<usize> = (0..CURVE_POINTS.min(n))
                    .map(|k| k * (n - 1) / (CURVE_POINTS.min(n) - 1).max(1))
                    .collect();
                picks.into_iter().map(|i| crate::space::fmt_float(values[i])).collect()
            }
        }
    }

    /// Whether it is a number stated along a range.
    pub fn is_curve(&self) -> bool {
        matches!(self.coding, Coding::Curve { .. })
    }
}

/// A curve through the sorted distinct `xs`: bends at 3 to 5 evenly
/// spread quantiles of them (more where more values were tried), or with
/// `even` evenly along the range, which follows a curve that falls away
/// across a stretch few values were tried in.
fn curve(xs: Vec<f64>, base: f64, log: bool, even: bool) -> Coding {
    let t = |x: f64| if log { x.ln() } else { x };
    let (lo, hi) = (xs[0], xs[xs.len() - 1]);
    let scale = ((t(hi) - t(lo)) / 2.0).max(f64::MIN_POSITIVE);
    let bends = ((xs.len() - 1) / 3).clamp(3, 5);
    let knots = (1..=bends)
        .map(|q| {
            if even {
                t(lo) + (t(hi) - t(lo)) * q as f64 / (bends + 1) as f64
            } else {
                t(xs[q * (xs.len() - 1) / (bends + 1)])
            }
        })
        .collect();
    Coding::Curve { log, base, scale, knots, values: xs }
}

/// A term of a model: one factor, or two acting together; the planner's
/// prediction, or that prediction scaled by a factor (a flash-attention
/// factor on the K/V cache's bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Term {
    Main(usize),
    Pair(usize, usize),
    Plan,
    PlanWith(usize),
}

impl Term {
    /// Whether it is a term of two things acting together: two factors,
    /// or the plan and a factor (the candidates a model chooses among).
    pub fn acts_with_another(self) -> bool {
        matches!(self, Term::Pair(..) | Term::PlanWith(_))
    }
}

/// Every column a study's models may use: the intercept, each factor's
/// main columns, and each pair's interaction columns; which columns each
/// term owns.
#[derive(Debug, Clone)]
pub struct Design {
    pub factors: Vec<Factor>,
    pub terms: Vec<(Term, std::ops::Range<usize>)>,
    pub width: usize,
    /// The planner's prediction, where the metric is modelled with it,
    /// and which factors move it.
    pub plan: Option<(Against, Vec<bool>)>,
}

impl Design {
    /// The design of `factors` with every pair of them as a candidate
    /// interaction, up to `max_pair_width` columns a pair; with `plan`,
    /// its prediction's column and that column times each factor's.
    pub fn new(factors: Vec<Factor>, max_pair_width: usize, plan: Option<Against>) -> Design {
        let mut terms = Vec::new();
        let mut at = 1;
        for (i, f) in factors.iter().enumerate() {
            terms.push((Term::Main(i), at..at + f.width()));
            at += f.width();
        }
        for i in 0..factors.len() {
            for j in i + 1..factors.len() {
                let w = factors[i].linear_width() * factors[j].linear_width();
                if w <= max_pair_width {
                    terms.push((Term::Pair(i, j), at..at + w));
                    at += w;
                }
            }
        }
        let plan = plan.map(|against| {
            terms.push((Term::Plan, at..at + 1));
            at += 1;
            for (i, f) in factors.iter().enumerate() {
                terms.push((Term::PlanWith(i), at..at + f.linear_width()));
                at += f.linear_width();
            }
            let moves = factors.iter().map(|f| against.moved_by(&f.setting, &f.points())).collect();
            (against, moves)
        });
        Design { factors, terms, width: at, plan }
    }

    /// Whether `term` changes with `factor`: its own terms, and the plan's
    /// where the factor moves the plan (the K cache's type and the context
    /// move it; threads do not).
    pub fn involves(&self, term: Term, factor: usize) -> bool {
        let moves = |i: usize| self.plan.as_ref().is_some_and(|(_, moves)| moves[i]);
        match term {
            Term::Main(a) => a == factor,
            Term::Pair(a, b) => a == factor || b == factor,
            Term::Plan => moves(factor),
            Term::PlanWith(a) => a == factor || moves(factor),
        }
    }

    /// Whether the plan moves factor `i`.
    pub fn plan_moves(&self, i: usize) -> bool {
        self.plan.as_ref().is_some_and(|(_, moves)| moves[i])
    }

    /// The design row of a configuration.
    pub fn row(&self, settings: &Settings) -> Vec<f64> {
        let mut row = vec![0.0; self.width];
        row[0] = 1.0;
        let value = |i: usize| value_of(settings, &self.factors[i].setting);
        // The plan's share over the baseline's less one: 0 at the baseline.
        let planned = self.plan.as_ref().map_or(0.0, |(p, _)| p.ratio_to(settings) - 1.0);
        for (term, range) in &self.terms {
            let columns = match *term {
                Term::Main(i) => self.factors[i].encode(&value(i)),
                Term::Pair(i, j) => {
                    let a = self.factors[i].encode_linear(&value(i));
                    let b = self.factors[j].encode_linear(&value(j));
                    a.iter().flat_map(|x| b.iter().map(move |y| x * y)).collect()
                }
                Term::Plan => vec![planned],
                Term::PlanWith(i) => {
                    self.factors[i].encode_linear(&value(i)).iter().map(|x| x * planned).collect()
                }
            };
            row[range.clone()].copy_from_slice(&columns);
        }
        row
    }

    /// The columns of the intercept and `terms`.
    pub fn columns(&self, terms: &[Term]) -> Vec<usize> {
        let mut out = vec![0];
        for (term, range) in &self.terms {
            if terms.contains(term) {
                out.extend(range.clone());
            }
        }
        out
    }

    /// The baseline configuration: every factor at its base.
    pub fn base_settings(&self) -> Settings {
        self.factors.iter().map(|f| (f.setting.clone(), f.base())).collect()
    }

    /// `values` (setting to value) over the baseline, as a contrast row:
    /// that configuration's row minus the baseline's.
    pub fn contrast(&self, values: &[(usize, &str)]) -> Vec<f64> {
        let base = self.base_settings();
        let mut changed = base.clone();
        for (i, v) in values {
            changed.insert(self.factors[*i].setting.clone(), v.to_string());
        }
        let (a, b) = (self.row(&changed), self.row(&base));
        a.iter().zip(&b).map(|(x, y)| x - y).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn words_are_levels_against_the_baseline_and_many_numbers_a_curve() {
        let cache = Factor::new("k", &strings(&["f16", "q8_0", "q4_0", "f16"]), Some("q8_0"));
        let cache = cache.unwrap();
        assert_eq!(cache.width(), 2);
        assert_eq!(cache.encode("q8_0"), [0.0, 0.0]);
        assert_eq!(cache.encode("f16"), [1.0, 0.0]);
        let threads: Vec<String> = (1..=16).map(|t| t.to_string()).collect();
        let threads = Factor::new("threads", &threads, Some("4")).unwrap();
        assert!(threads.is_curve());
        assert_eq!(threads.width(), 7, "a line, five bends and a curvature");
        assert_eq!(threads.encode("4"), [0.0; 7]);
        assert_eq!(threads.points().len(), 9);
        let Coding::Curve { log, .. } = threads.coding else { unreachable!() };
        assert!(log, "1 to 16 spans a factor of 16");
        // The alternatives the data choose from: the other scale, and
        // bends evenly along the range on each.
        let others = threads.alternatives();
        assert_eq!(others.len(), 3, "{others:?}");
        assert!(others.iter().all(|f| f.width() == threads.width()));
        let even = others.iter().find_map(|f| match &f.coding {
            Coding::Curve { log: false, knots, .. } if knots[0] == 1.0 + 15.0 / 6.0 => Some(knots),
            _ => None,
        });
        assert!(
            even.is_some_and(|k| k.len() == 5 && (k[4] - (1.0 + 5.0 * 15.0 / 6.0)).abs() < 1e-9)
        );
        assert_eq!(Factor::new("mlock", &strings(&["true", "true"]), None), None);
        let words: Vec<String> = (0..100).map(|k| format!("w{k}")).collect();
        assert_eq!(Factor::new("chat_template", &words, None), None, "too many words to model");
    }

    #[test]
    fn a_pair_s_columns_vanish_when_either_is_at_its_base() {
        let k = Factor::new("k", &strings(&["f16", "q8_0"]), Some("f16")).unwrap();
        let v = Factor::new("v", &strings(&["f16", "q8_0"]), Some("f16")).unwrap();
        let design = Design::new(vec![k, v], 16, None);
        assert_eq!(design.width, 4);
        let row = |k: &str, v: &str| {
            design.row(&[("k".to_string(), k.to_string()), ("v".to_string(), v.to_string())].into())
        };
        assert_eq!(row("f16", "f16"), [1.0, 0.0, 0.0, 0.0]);
        assert_eq!(row("q8_0", "f16"), [1.0, 1.0, 0.0, 0.0]);
        assert_eq!(row("q8_0", "q8_0"), [1.0, 1.0, 1.0, 1.0]);
        assert_eq!(design.contrast(&[(0, "q8_0"), (1, "q8_0")]), [0.0, 1.0, 1.0, 1.0]);
        assert_eq!(design.columns(&[Term::Main(1)]), [0, 2]);
    }
}
