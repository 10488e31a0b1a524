//! Search spaces: the settings a study varies, each with its domain, the
//! settings it holds fixed, and the constraints every configuration must
//! satisfy.

use engine_bridge::Settings;
use rand::Rng;
use serde_json::Value as Json;

use crate::expr::Constraint;
use crate::limits::MAX_AXIS_VALUES;

/// How many times its smallest value its largest must be for a range of
/// numbers to be read on a log scale when the study does not say: three
/// doublings (threads 1 to 8, a context of 2048 to 16384).
pub const LOG_SPAN: f64 = 8.0;

/// Whether numbers from `lo` to `hi` are read on a log scale: all above
/// zero, spanning a factor of [`LOG_SPAN`] or more. The search's features
/// and the findings' models both read a range's scale here.
pub fn log_scale(lo: f64, hi: f64) -> bool {
    lo > 0.0 && hi / lo >= LOG_SPAN
}

/// The values one setting takes in a study.
#[derive(Debug, Clone, PartialEq)]
pub enum Domain {
    /// A list (`["f16", "q8_0"]`, `[512, 1024]`) or a switch (`"bool"`).
    Values(Vec<String>),
    /// Whole numbers from `min` to `max`: every `step`-th, or with `log`
    /// the doublings (`2048, 4096, …`).
    Int { min: i64, max: i64, step: i64, log: bool },
    /// Numbers from `min` to `max`; a grid takes `points` of them, evenly
    /// or (with `log`) geometrically spaced.
    Float { min: f64, max: f64, points: usize, log: bool },
}

/// One varied setting.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: String,
    pub domain: Domain,
}

impl Domain {
    /// Reads a domain as written in a study file:
    /// `["a", "b"]`, `"bool"`, `{ min = 1, max = 16, step = 1 }`,
    /// `{ min = 2048, max = 65536, log = true }`,
    /// `{ min = 0.5, max = 1.0, points = 5 }`.
    pub fn from_json(value: &Json) -> Result<Self, String> {
        match value {
            Json::Array(items) => {
                if items.is_empty() {
                    return Err("the list of values is empty".into());
                }
                if items.len() as u64 > MAX_AXIS_VALUES {
                    return Err(format!(
                        "{} values, over the limit of {MAX_AXIS_VALUES} a setting",
                        items.len()
                    ));
                }
                let values: Vec<String> =
                    items.iter().map(scalar_text).collect::<Result<_, _>>()?;
                let mut seen = std::collections::BTreeSet::new();
                if let Some(dup) = values.iter().find(|v| !seen.insert(v.as_str())) {
                    return Err(format!("`{dup}` is listed twice"));
                }
                Ok(Domain::Values(values))
            }
            Json::String(s) if s == "bool" => {
                Ok(Domain::Values(vec!["false".into(), "true".into()]))
            }
            Json::Object(map) => {
                let allowed = ["min", "max", "step", "log", "points"];
                if let Some(k) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
                    return Err(format!(
                        "unknown key `{k}` in a range (use min, max, step, log, points)"
                    ));
                }
                let num = |k: &str| {
                    map.get(k).map(|v| v.as_f64().ok_or(format!("`{k}` must be a number")))
                };
                let (Some(min), Some(max)) = (num("min").transpose()?, num("max").transpose()?)
                else {
                    return Err("a range needs `min` and `max`".into());
                };
                if !(min.is_finite() && max.is_finite()) {
                    return Err("`min` and `max` must be finite numbers".into());
                }
                let log = match map.get("log") {
                    None => false,
                    Some(v) => v.as_bool().ok_or("`log` must be true or false")?,
                };
                if min > max {
                    return Err(format!("the range is empty: min {min} is above max {max}"));
                }
                if log && min <= 0.0 {
                    return Err("a log-scale range needs min above 0".into());
                }
                let is_int = |k: &str| map.get(k).is_none_or(Json::is_i64);
                if is_int("min") && is_int("max") && is_int("step") && !map.contains_key("points") {
                    let step = map.get("step").and_then(Json::as_i64).unwrap_or(1);
                    if step <= 0 {
                        return Err("`step` must be above 0".into());
                    }
                    if log && map.contains_key("step") {
                        return Err("give `step` or `log`, not both".into());
                    }
                    let (min, max) = (map["min"].as_i64(), map["max"].as_i64());
                    let domain =
                        Domain::Int { min: min.expect("i64"), max: max.expect("i64"), step, log };
                    if domain.len() > MAX_AXIS_VALUES {
                        return Err(format!(
                            "{} values from {} to {} (step {step}), over the limit of {MAX_AXIS_VALUES} a setting: give a larger `step`, or `log = true`",
                            domain.len(),
                            min.expect("i64"),
                            max.expect("i64"),
                        ));
                    }
                    return Ok(domain);
                }
                if map.contains_key("step") {
                    return Err("`step` needs whole numbers; for decimals give `points`".into());
                }
                let points = match map.get("points") {
                    None => 5,
                    Some(v) => v.as_u64().filter(|p| (1..=MAX_AXIS_VALUES).contains(p)).ok_or(
                        format!("`points` must be a whole number from 1 to {MAX_AXIS_VALUES}"),
                    )? as usize,
                };
                Ok(Domain::Float { min, max, points, log })
            }
            other => Err(format!(
                "`{other}` is not a domain: give a list of values, \"bool\", or a range {{ min, max }}"
            )),
        }
    }

    /// How many values the grid visits, worked out without listing them.
    pub fn len(&self) -> u64 {
        match self {
            Domain::Values(v) => v.len() as u64,
            Domain::Int { min, max, step, log: false } => {
                ((i128::from(*max) - i128::from(*min)) / i128::from(*step) + 1)
                    .clamp(0, i128::from(u64::MAX)) as u64
            }
            Domain::Int { min, max, log: true, .. } => {
                // min, 2·min, 4·min, … up to max, and max itself.
                if *min <= 0 || min > max {
                    return 1;
                }
                let (mut n, mut last, mut next) = (0, *min, Some(*min));
                while let Some(v) = next.filter(|v| v <= max) {
                    (n, last, next) = (n + 1, v, v.checked_mul(2));
                }
                n + u64::from(last != *max)
            }
            Domain::Float { min, max, points, .. } => {
                if *points == 1 || min == max {
                    1
                } else {
                    *points as u64
                }
            }
        }
    }

    /// Whether the grid visits no value (never, for a checked domain).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first and last values the grid visits, worked out without
    /// listing the grid.
    pub fn ends(&self) -> (String, String) {
        match self {
            Domain::Values(v) => (v[0].clone(), v[v.len() - 1].clone()),
            Domain::Int { min, max, step, log: false } => {
                let (lo, hi, step) = (i128::from(*min), i128::from(*max), i128::from(*step));
                (min.to_string(), (lo + (hi - lo) / step * step).to_string())
            }
            Domain::Int { min, max, .. } => (min.to_string(), max.to_string()),
            Domain::Float { min, max, points, .. } => {
                let last = if *points == 1 { *min } else { *max };
                (fmt_float(*min), fmt_float(last))
            }
        }
    }

    /// Whether every value is a number.
    pub fn numeric(&self) -> bool {
        match self {
            Domain::Values(values) => values.iter().all(|v| v.parse::<f64>().is_ok()),
            Domain::Int { .. } | Domain::Float { .. } => true,
        }
    }

    /// The values a grid visits, in order.
    pub fn grid(&self) -> Vec<String> {
        match self {
            Domain::Values(v) => v.clone(),
            Domain::Int { min, max, step, log: false } => (0..)
                .map(|i| min + i * step)
                .take_while(|v| v <= max)
                .map(|v| v.to_string())
                .collect(),
            Domain::Int { min, max, log: true, .. } => {
                let mut out: Vec<i64> = std::iter::successors(Some(*min), |v| v.checked_mul(2))
                    .take_while(|v| v <= max)
                    .collect();
                if out.last() != Some(max) {
                    out.push(*max);
                }
                out.into_iter().map(|v| v.to_string()).collect()
            }
            Domain::Float { min, max, points, log } => {
                if *points == 1 || min == max {
                    return vec![fmt_float(*min)];
                }
                (0..*points)
                    .map(|i| {
                        let t = i as f64 / (*points - 1) as f64;
                        if *log {
                            (min.ln() + t * (max.ln() - min.ln())).exp()
                        } else {
                            min + t * (max - min)
                        }
                    })
                    .map(fmt_float)
                    .collect()
            }
        }
    }

    /// A value drawn at random: uniform over lists and linear ranges,
    /// log-uniform over log ranges.
    pub fn sample(&self, rng: &mut impl Rng) -> String {
        match self {
            Domain::Float { .. } => self.at(rng.random()),
            Domain::Int { min, max, step, log: false } => {
                let steps = (max - min) / step;
                (min + rng.random_range(0..=steps) * step).to_string()
            }
            _ => {
                let grid = self.grid();
                grid[rng.random_range(0..grid.len())].clone()
            }
        }
    }

    /// The value at `u` in [0, 1) of the distribution [`Self::sample`]
    /// draws from (its inverse CDF): a stratified design picks its `u`s,
    /// one to a stratum.
    pub fn at(&self, u: f64) -> String {
        let u = u.clamp(0.0, 1.0);
        let pick = |n: u64| ((u * n as f64) as u64).min(n.saturating_sub(1));
        match self {
            Domain::Float { min, max, log, .. } => fmt_float(if *log {
                (min.ln() + u * (max.ln() - min.ln())).exp()
            } else {
                min + u * (max - min)
            }),
            Domain::Int { min, step, log: false, .. } => {
                (min + pick(self.len()) as i64 * step).to_string()
            }
            // A list is indexed, not copied: a design asks for hundreds.
            Domain::Values(v) => v[pick(v.len() as u64) as usize].clone(),
            Domain::Int { log: true, .. } => self.grid()[pick(self.len()) as usize].clone(),
        }
    }

    /// Whether `value` is in the domain (on a range: between the ends, on
    /// its step).
    pub fn contains(&self, value: &str) -> bool {
        match self {
            Domain::Values(v) => v.iter().any(|x| x == value),
            Domain::Int { min, max, step, log } => value
                .trim()
                .parse::<i64>()
                .is_ok_and(|v| v >= *min && v <= *max && (*log || (v - min) % step == 0)),
            Domain::Float { min, max, .. } => {
                value.trim().parse::<f64>().is_ok_and(|v| v >= *min - 1e-9 && v <= *max + 1e-9)
            }
        }
    }

    /// Low, middle and high values, for looking at one axis at a time.
    pub fn span(&self) -> Vec<String> {
        let grid = self.grid();
        let mut picks =
            vec![grid[0].clone(), grid[grid.len() / 2].clone(), grid[grid.len() - 1].clone()];
        picks.dedup();
        picks
    }

    /// The values next to `value` on the grid (or next to the nearest grid
    /// value when `value` is off it).
    pub fn neighbours(&self, value: &str) -> Vec<String> {
        let grid = self.grid();
        let at = grid.iter().position(|g| g == value).unwrap_or_else(|| nearest(&grid, value));
        let mut out = Vec::new();
        if at > 0 {
            out.push(grid[at - 1].clone());
        }
        if at + 1 < grid.len() {
            out.push(grid[at + 1].clone());
        }
        if grid[at] != value {
            out.push(grid[at].clone());
        }
        out
    }
}

fn nearest(grid: &[String], value: &str) -> usize {
    let Ok(v) = value.parse::<f64>() else { return 0 };
    (0..grid.len())
        .min_by(|&a, &b| {
            let d = |i: usize| grid[i].parse::<f64>().map_or(f64::MAX, |g| (g - v).abs());
            d(a).total_cmp(&d(b))
        })
        .unwrap_or(0)
}

/// A decimal as a setting's text: short, and exact where it can be.
pub fn fmt_float(x: f64) -> String {
    let rounded = (x * 1e4).round() / 1e4;
    format!("{rounded}")
}

/// A TOML/JSON scalar as a setting's text.
pub fn scalar_text(v: &Json) -> Result<String, String> {
    match v {
        Json::String(s) => Ok(s.clone()),
        Json::Bool(b) => Ok(b.to_string()),
        Json::Number(n) => Ok(n.to_string()),
        other => Err(format!("`{other}` is not a single value")),
    }
}

/// Settings that vary, settings that stay, and the rules between them.
#[derive(Debug, Clone, Default)]
pub struct Space {
    pub params: Vec<Param>,
    pub fixed: Settings,
    pub constraints: Vec<Constraint>,
}

impl Space {
    pub fn param(&self, name: &str) -> Option<&Param> {
        self.params.iter().find(|p| p.name == name)
    }

    /// The number of grid points, before constraints (saturating).
    pub fn grid_size(&self) -> u128 {
        self.params.iter().fold(1u128, |n, p| n.saturating_mul(u128::from(p.domain.len())))
    }

    /// Whether a configuration satisfies every constraint; a constraint
    /// that cannot be evaluated on it counts as broken.
    pub fn allows(&self, config: &Settings) -> bool {
        self.constraints.iter().all(|c| c.holds(config).unwrap_or(false))
    }

    /// The first constraint a configuration breaks, with why.
    pub fn broken(&self, config: &Settings) -> Option<String> {
        self.constraints.iter().find_map(|c| match c.holds(config) {
            Ok(true) => None,
            Ok(false) => Some(format!("breaks `{}`", c.text)),
            Err(e) => Some(e.to_string()),
        })
    }

    /// `varied` on top of the fixed settings.
    pub fn complete(&self, varied: impl IntoIterator<Item = (String, String)>) -> Settings {
        let mut out = self.fixed.clone();
        out.extend(varied);
        out
    }

    /// Every grid configuration, in odometer order: the last parameter
    /// changes fastest, so neighbours in the order share most settings.
    pub fn grid(&self) -> impl Iterator<Item = Settings> + '_ {
        let grids: Vec<Vec<String>> = self.params.iter().map(|p| p.domain.grid()).collect();
        let total = if self.params.is_empty() { 1 } else { self.grid_size() };
        let mut index = vec![0usize; grids.len()];
        (0..total).map(move |n| {
            if n > 0 {
                for d in (0..index.len()).rev() {
                    index[d] += 1;
                    if index[d] < grids[d].len() {
                        break;
                    }
                    index[d] = 0;
                }
            }
            self.complete(
                self.params
                    .iter()
                    .zip(&index)
                    .zip(&grids)
                    .map(|((p, &i), g)| (p.name.clone(), g[i].clone())),
            )
        })
    }

    /// A configuration drawn at random (constraints not checked).
    pub fn sample(&self, rng: &mut impl Rng) -> Settings {
        self.complete(self.params.iter().map(|p| (p.name.clone(), p.domain.sample(rng))))
    }

    /// Checks that a proposed configuration stays in the space: every
    /// varied setting in its domain, fixed ones as fixed, nothing else.
    pub fn check(&self, config: &Settings) -> Result<(), String> {
        for (name, value) in config {
            match (self.param(name), self.fixed.get(name)) {
                (Some(p), _) if !p.domain.contains(value) => {
                    return Err(format!("`{name}` = `{value}` is outside its domain"));
                }
                (None, Some(fixed)) if fixed != value => {
                    return Err(format!("`{name}` is fixed at `{fixed}`, not `{value}`"));
                }
                (None, None) => return Err(format!("`{name}` is not a setting of this study")),
                _ => {}
            }
        }
        if let Some(p) = self.params.iter().find(|p| !config.contains_key(&p.name)) {
            return Err(format!("`{}` has no value", p.name));
        }
        match self.broken(config) {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sizes_and_ends_are_worked_out_without_listing() {
        let cases = [
            json!({"min": 1, "max": 7, "step": 3}),
            json!({"min": 1, "max": 8, "step": 3}),
            json!({"min": 2048, "max": 10000, "log": true}),
            json!({"min": 2048, "max": 8192, "log": true}),
            json!({"min": 3, "max": 3, "log": true}),
            json!({"min": 0.5, "max": 1.0, "points": 3}),
            json!({"min": 0.5, "max": 0.5}),
            json!(["a", "b"]),
        ];
        for v in cases {
            let d = Domain::from_json(&v).unwrap();
            let grid = d.grid();
            assert_eq!(d.len(), grid.len() as u64, "{v}");
            assert_eq!(d.ends(), (grid[0].clone(), grid[grid.len() - 1].clone()), "{v}");
        }
    }

    #[test]
    fn huge_domains_are_refused_before_they_are_built() {
        let e = |v| Domain::from_json(&v).unwrap_err();
        let started = std::time::Instant::now();
        assert!(e(json!({"min": 1, "max": 16777216})).contains("over the limit of 10000"));
        assert!(e(json!({"min": 0, "max": 1_000_000_000_000i64})).contains("over the limit"));
        assert!(e(json!({"min": 0.0, "max": 1.0, "points": 100_000_000})).contains("points"));
        assert!(e(json!({"min": i64::MIN, "max": i64::MAX})).contains("over the limit"));
        assert!(e(json!(vec![1; 10_001])).contains("over the limit"));
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        // A wide range on a log scale is a few dozen values.
        let d = Domain::from_json(&json!({"min": 1, "max": i64::MAX, "log": true})).unwrap();
        assert_eq!(d.len(), 64);
    }

    #[test]
    fn domains_as_written() {
        let d = |v| Domain::from_json(&v).unwrap().grid();
        assert_eq!(d(json!(["f16", "q8_0"])), ["f16", "q8_0"]);
        assert_eq!(d(json!([512, 1024])), ["512", "1024"]);
        assert_eq!(d(json!("bool")), ["false", "true"]);
        assert_eq!(d(json!({"min": 1, "max": 7, "step": 3})), ["1", "4", "7"]);
        assert_eq!(
            d(json!({"min": 2048, "max": 10000, "log": true})),
            ["2048", "4096", "8192", "10000"]
        );
        assert_eq!(d(json!({"min": 0.5, "max": 1.0, "points": 3})), ["0.5", "0.75", "1"]);
    }

    #[test]
    fn bad_domains_say_what_is_wrong() {
        let e = |v| Domain::from_json(&v).unwrap_err();
        assert_eq!(e(json!([])), "the list of values is empty");
        assert!(e(json!({"min": 8, "max": 2})).contains("empty"));
        assert!(e(json!({"min": 1})).contains("needs `min` and `max`"));
        assert!(e(json!({"min": 1, "max": 2, "stp": 1})).contains("unknown key `stp`"));
        assert!(e(json!({"min": 0, "max": 8, "log": true})).contains("above 0"));
        assert!(e(json!(["a", "a"])).contains("twice"));
        assert!(e(json!(42)).contains("not a domain"));
    }

    #[test]
    fn grid_in_odometer_order_and_checks() {
        let space = Space {
            params: vec![
                Param { name: "a".into(), domain: Domain::Values(vec!["x".into(), "y".into()]) },
                Param {
                    name: "b".into(),
                    domain: Domain::Int { min: 1, max: 3, step: 1, log: false },
                },
            ],
            fixed: [("c".to_string(), "1".to_string())].into(),
            constraints: vec![Constraint::parse("b != 2 when a == \"y\"").unwrap()],
        };
        let all: Vec<Settings> = space.grid().collect();
        assert_eq!(all.len(), 6);
        assert_eq!(all[1]["b"], "2");
        assert_eq!(all[3]["a"], "y");
        assert!(all.iter().all(|c| c["c"] == "1"));
        assert_eq!(all.iter().filter(|c| space.allows(c)).count(), 5);
        assert!(space.check(&all[0]).is_ok());
        assert!(space.check(&all[4]).unwrap_err().contains("breaks"));
        let mut off = all[0].clone();
        off.insert("b".into(), "9".into());
        assert!(space.check(&off).unwrap_err().contains("outside"));
        off.insert("b".into(), "1".into());
        off.insert("c".into(), "2".into());
        assert!(space.check(&off).unwrap_err().contains("fixed"));
    }

    #[test]
    fn spans_and_neighbours() {
        let d = Domain::Int { min: 1, max: 9, step: 1, log: false };
        assert_eq!(d.span(), ["1", "5", "9"]);
        assert_eq!(d.neighbours("5"), ["4", "6"]);
        assert_eq!(d.neighbours("1"), ["2"]);
        let f = Domain::Float { min: 0.0, max: 1.0, points: 3, log: false };
        assert_eq!(f.neighbours("0.4"), ["0", "1", "0.5"]);
    }
}
