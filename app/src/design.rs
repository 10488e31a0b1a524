//! The study designer's form, as plain data, and how it becomes a study
//! file (JSON) the server checks. Kept free of the UI so it is tested on its
//! own.
//!
//! A varied setting's values are written the way people write them:
//! `f16, q8_0, q4_0` (a list), `bool`, `512..4096 log` (the doublings),
//! `1..8 step 1`, `0.80..0.95 points 4` (a float range).

use serde_json::{Map, Value, json};

use crate::types::MetricView;

/// A setting the study varies.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct VaryRow {
    pub key: u32,
    pub name: String,
    pub values: String,
    /// The baseline's value; blank for the engine's default.
    pub baseline: String,
}

/// A setting held at one value.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FixedRow {
    pub key: u32,
    pub name: String,
    pub value: String,
}

/// An objective or bound: a metric, which way is better, optional limits
/// (`baseline - 1%`, `120 GiB`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ObjectiveRow {
    pub key: u32,
    pub metric: String,
    pub goal: String,
    pub min: String,
    pub max: String,
}

/// Everything on the designer's form, as typed.
#[derive(Debug, Clone, PartialEq)]
pub struct Form {
    pub name: String,
    pub profile: String,
    pub model: String,
    pub vary: Vec<VaryRow>,
    pub fixed: Vec<FixedRow>,
    /// One constraint a line.
    pub constraints: String,
    pub objectives: Vec<ObjectiveRow>,
    pub strategy: String,
    pub seed: String,
    /// The name of an endpoint of the server's configuration.
    pub endpoint: String,
    pub max_trials: String,
    pub max_minutes: String,
    pub patience: String,
    pub min_gain: String,
    pub rerun_every: String,
    /// Pairs of re-runs (pick, baseline) before the best is named.
    pub confirm_pairs: String,
    /// Trials for settling what the findings leave open (blank: the
    /// study's default share).
    pub settle_trials: String,
    /// Equivalence margins: speeds and memory in percent, rates in
    /// points; blank for the defaults.
    pub margin_speed: String,
    pub margin_memory: String,
    pub margin_quality: String,
    pub prompt_tokens: String,
    pub n_predict: String,
    pub repeats: String,
    pub quality: bool,
    /// KL divergence from the baseline (llama-perplexity); also run when an
    /// objective or bound reads a divergence.
    pub kld: bool,
    /// Context recall: sizes in tokens and depths (0 to 1), comma separated;
    /// blank sizes leave the probe out.
    pub context_sizes: String,
    pub context_depths: String,
    /// Serving load: a workload (built-in, or a file in the server's
    /// workloads folder; blank: no load probe), its arrival rates a
    /// second, and the p99 time to first token and between tokens it must
    /// hold (ms; a blank bound is not judged).
    pub load_workload: String,
    pub load_rates: String,
    pub load_ttft_ms: String,
    pub load_itl_ms: String,
    /// Where trials run: blank for this server's engine, else workers'
    /// names separated by commas, or `any`.
    pub machines: String,
    /// What the baseline leaves unset, llama.cpp's own fit chooses.
    pub fit_baseline: bool,
}

impl Default for Form {
    fn default() -> Self {
        Self {
            name: String::new(),
            profile: String::new(),
            model: String::new(),
            vary: Vec::new(),
            fixed: Vec::new(),
            constraints: String::new(),
            objectives: vec![
                ObjectiveRow {
                    key: 1,
                    metric: "decode_tps".into(),
                    goal: "max".into(),
                    ..Default::default()
                },
                ObjectiveRow {
                    key: 2,
                    metric: "peak_rss_bytes".into(),
                    goal: "min".into(),
                    ..Default::default()
                },
            ],
            strategy: "bayes".into(),
            seed: "0".into(),
            endpoint: String::new(),
            max_trials: "30".into(),
            max_minutes: String::new(),
            patience: String::new(),
            min_gain: String::new(),
            rerun_every: String::new(),
            confirm_pairs: "3".into(),
            settle_trials: String::new(),
            margin_speed: String::new(),
            margin_memory: String::new(),
            margin_quality: String::new(),
            prompt_tokens: "128".into(),
            n_predict: "32".into(),
            repeats: "2".into(),
            quality: false,
            kld: false,
            context_sizes: String::new(),
            context_depths: "0.1, 0.5, 0.9".into(),
            load_workload: String::new(),
            load_rates: "0.5, 1, 2, 4".into(),
            load_ttft_ms: "2000".into(),
            load_itl_ms: "200".into(),
            machines: String::new(),
            fit_baseline: false,
        }
    }
}

/// A value as JSON: a number where it reads as one, else text.
fn scalar(text: &str) -> Value {
    let t = text.trim();
    if let Ok(i) = t.parse::<i64>() {
        return json!(i);
    }
    match t.parse::<f64>() {
        Ok(f) if f.is_finite() && !t.eq_ignore_ascii_case("nan") => json!(f),
        _ => {
            let unquoted = t.trim_matches('"');
            match unquoted {
                "true" => json!(true),
                "false" => json!(false),
                _ => json!(unquoted),
            }
        }
    }
}

/// Reads a varied setting's values (see the module's comment).
pub fn parse_values(text: &str) -> Result<Value, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("no values".into());
    }
    if t == "bool" {
        return Ok(json!("bool"));
    }
    if let Some((lo, rest)) = t.split_once("..") {
        let mut words = rest.split_whitespace();
        let hi = words.next().ok_or("a range needs an end: `1..8`")?;
        let number = |s: &str| {
            s.trim().parse::<f64>().map_err(|_| format!("`{}` is not a number", s.trim()))
        };
        let (lo_n, hi_n) = (number(lo)?, number(hi)?);
        let whole = |s: &str| s.trim().parse::<i64>().is_ok();
        let mut range = Map::new();
        let is_int = whole(lo) && whole(hi);
        range.insert("min".into(), if is_int { json!(lo_n as i64) } else { json!(lo_n) });
        range.insert("max".into(), if is_int { json!(hi_n as i64) } else { json!(hi_n) });
        while let Some(word) = words.next() {
            match word {
                "log" => {
                    range.insert("log".into(), json!(true));
                }
                "step" | "points" => {
                    let n = words.next().ok_or(format!("`{word}` needs a number after it"))?;
                    let n: i64 = n.parse().map_err(|_| format!("`{n}` is not a whole number"))?;
                    range.insert(word.into(), json!(n));
                }
                other => {
                    return Err(format!("`{other}`: a range takes `log`, `step N` or `points N`"));
                }
            }
        }
        if !is_int && !range.contains_key("points") {
            range.insert("points".into(), json!(3));
        }
        return Ok(Value::Object(range));
    }
    let items: Vec<Value> =
        t.split(',').map(str::trim).filter(|s| !s.is_empty()).map(scalar).collect();
    if items.is_empty() {
        return Err("no values".into());
    }
    Ok(Value::Array(items))
}

fn optional_number(map: &mut Map<String, Value>, key: &str, text: &str) -> Result<(), String> {
    let t = text.trim();
    if !t.is_empty() {
        let v = scalar(t);
        if !v.is_number() {
            return Err(format!("{}: `{t}` is not a number", key.replace('_', " ")));
        }
        map.insert(key.into(), v);
    }
    Ok(())
}

fn list(text: &str) -> Vec<Value> {
    text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(scalar).collect()
}

/// Metrics only the KL-divergence probe measures: those measured against
/// the study's reference.
pub fn divergence() -> Vec<&'static str> {
    use crate::types::Metric;
    Metric::ALL.into_iter().filter(|m| m.against_reference()).map(Metric::name).collect()
}

impl Form {
    /// Whether an objective (or a bound on one) reads one of `metrics`: its
    /// probe then runs whatever its box says, and the box shows it.
    pub fn needs(&self, metrics: &[&str]) -> bool {
        self.objectives.iter().any(|o| metrics.contains(&o.metric.as_str()))
    }

    /// The settings the form varies or fixes, as what an objective or a
    /// bound may read (`setting.ctx_size`: the largest context, or at
    /// least 32K of it); the server refuses one whose values are not
    /// numbers.
    pub fn setting_measures(&self) -> Vec<MetricView> {
        let names = self.vary.iter().map(|r| &r.name).chain(self.fixed.iter().map(|r| &r.name));
        let mut out: Vec<MetricView> = Vec::new();
        for name in names.map(|n| n.trim()).filter(|n| !n.is_empty()) {
            let measure = format!("setting.{name}");
            if !out.iter().any(|m| m.name == measure) {
                out.push(MetricView {
                    name: measure,
                    label: format!("setting {name} (its value)"),
                    goal: "max".into(),
                });
            }
        }
        out
    }

    /// The study as JSON, or what on the form cannot be read (the server
    /// checks everything else).
    pub fn to_json(&self) -> Result<Value, Vec<String>> {
        let mut errors = Vec::new();
        let mut space = Map::new();
        let mut baseline = Map::new();
        for row in self.vary.iter().filter(|r| !r.name.is_empty()) {
            match parse_values(&row.values) {
                Ok(v) => {
                    space.insert(row.name.clone(), v);
                }
                Err(e) => errors.push(format!("`{}`: {e}", row.name)),
            }
            if !row.baseline.trim().is_empty() {
                baseline.insert(row.name.clone(), scalar(&row.baseline));
            }
        }
        let fixed: Map<String, Value> = self
            .fixed
            .iter()
            .filter(|r| !r.name.is_empty() && !r.value.trim().is_empty())
            .map(|r| (r.name.clone(), scalar(&r.value)))
            .collect();
        let objectives: Vec<Value> = self
            .objectives
            .iter()
            .filter(|o| !o.metric.is_empty())
            .map(|o| {
                let mut m = Map::new();
                m.insert("metric".into(), json!(o.metric));
                if !o.goal.is_empty() {
                    m.insert("goal".into(), json!(o.goal));
                }
                for (k, v) in [("min", &o.min), ("max", &o.max)] {
                    if !v.trim().is_empty() {
                        m.insert(k.into(), json!(v.trim()));
                    }
                }
                Value::Object(m)
            })
            .collect();
        let mut strategy = Map::new();
        strategy.insert("kind".into(), json!(self.strategy));
        if let Err(e) = optional_number(&mut strategy, "seed", &self.seed) {
            errors.push(e);
        }
        if self.strategy == "llm" && !self.endpoint.trim().is_empty() {
            strategy.insert("endpoint".into(), json!(self.endpoint.trim()));
        }
        let mut budget = Map::new();
        for (key, text) in [
            ("max_trials", &self.max_trials),
            ("max_minutes", &self.max_minutes),
            ("patience", &self.patience),
            ("min_gain", &self.min_gain),
            ("rerun_baseline_every", &self.rerun_every),
            ("confirm_pairs", &self.confirm_pairs),
            ("settle_trials", &self.settle_trials),
        ] {
            if let Err(e) = optional_number(&mut budget, key, text) {
                errors.push(e);
            }
        }
        let mut margins = Map::new();
        for (key, text) in [
            ("speed_pct", &self.margin_speed),
            ("memory_pct", &self.margin_memory),
            ("quality_rate", &self.margin_quality),
        ] {
            if let Err(e) = optional_number(&mut margins, key, text) {
                errors.push(e);
            }
        }
        // Rates are typed in points, kept as a share.
        if let Some(points) = margins.get("quality_rate").and_then(Value::as_f64) {
            margins.insert("quality_rate".into(), json!(points / 100.0));
        }
        let mut speed = Map::new();
        for (key, text) in [
            ("prompt_tokens", &self.prompt_tokens),
            ("n_predict", &self.n_predict),
            ("repeats", &self.repeats),
        ] {
            if let Err(e) = optional_number(&mut speed, key, text) {
                errors.push(e);
            }
        }
        let mut probes = Map::new();
        probes.insert("speed".into(), Value::Object(speed));
        if self.quality || self.needs(&["quality_score"]) {
            probes.insert("quality".into(), json!({}));
        }
        let served = self.objectives.iter().any(|o| o.metric == "goodput_rps");
        let workload = match self.load_workload.trim() {
            "" if served => "chat",
            w => w,
        };
        if !workload.is_empty() {
            let mut slo = Map::new();
            for (key, text) in
                [("ttft_p99_ms", &self.load_ttft_ms), ("itl_p99_ms", &self.load_itl_ms)]
            {
                if let Err(e) = optional_number(&mut slo, key, text) {
                    errors.push(e);
                }
            }
            probes.insert(
                "load".into(),
                json!({ "workload": workload, "rates": list(&self.load_rates), "slo": slo }),
            );
        }
        if self.kld || self.needs(&divergence()) {
            probes.insert("kld".into(), json!({}));
        }
        let sizes = list(&self.context_sizes);
        if !sizes.is_empty() {
            probes.insert(
                "context".into(),
                json!({ "sizes": sizes, "depths": list(&self.context_depths) }),
            );
        }
        let constraints: Vec<&str> =
            self.constraints.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        if !errors.is_empty() {
            return Err(errors);
        }
        let machines: Vec<&str> =
            self.machines.split(',').map(str::trim).filter(|m| !m.is_empty()).collect();
        Ok(json!({
            "name": self.name.trim(),
            "machines": machines,
            "profile": self.profile,
            "model": self.model,
            "space": space,
            "fixed": fixed,
            "baseline": baseline,
            "fit_baseline": self.fit_baseline,
            "constraints": constraints,
            "objectives": objectives,
            "strategy": strategy,
            "budget": budget,
            "margins": margins,
            "probes": probes,
        }))
    }
}

/// The metric's label, for a name.
pub fn metric_label<'a>(metrics: &'a [MetricView], name: &'a str) -> &'a str {
    metrics.iter().find(|m| m.name == name).map_or(name, |m| m.label.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_read_as_lists_switches_and_ranges() {
        assert_eq!(parse_values("f16, q8_0 ,q4_0").unwrap(), json!(["f16", "q8_0", "q4_0"]));
        assert_eq!(parse_values("128, 512").unwrap(), json!([128, 512]));
        assert_eq!(parse_values("bool").unwrap(), json!("bool"));
        assert_eq!(
            parse_values("4096..32768 log").unwrap(),
            json!({ "min": 4096, "max": 32768, "log": true })
        );
        assert_eq!(parse_values("1..8 step 2").unwrap(), json!({ "min": 1, "max": 8, "step": 2 }));
        assert_eq!(
            parse_values("0.80..0.95 points 4").unwrap(),
            json!({ "min": 0.8, "max": 0.95, "points": 4 })
        );
        assert_eq!(parse_values("0.5..1").unwrap(), json!({ "min": 0.5, "max": 1.0, "points": 3 }));
        assert!(parse_values("").unwrap_err().contains("no values"));
        assert!(parse_values("1..x").unwrap_err().contains("`x` is not a number"));
        assert!(parse_values("1..8 every 2").unwrap_err().contains("`every`"));
        assert!(parse_values("1..8 step").unwrap_err().contains("needs a number"));
    }

    #[test]
    fn a_form_becomes_a_study() {
        let form = Form {
            name: " cache ".into(),
            profile: "demo".into(),
            model: "tiny".into(),
            vary: vec![VaryRow {
                key: 1,
                name: "cache_type_k".into(),
                values: "f16, q8_0".into(),
                baseline: "f16".into(),
            }],
            fixed: vec![FixedRow { key: 2, name: "ctx_size".into(), value: "1024".into() }],
            constraints: "a == b\n\n  c != d ".into(),
            quality: true,
            context_sizes: "1024, 2048".into(),
            ..Form::default()
        };
        let v = form.to_json().unwrap();
        assert_eq!(v["name"], "cache");
        assert_eq!(v["space"]["cache_type_k"], json!(["f16", "q8_0"]));
        assert_eq!(v["baseline"]["cache_type_k"], "f16");
        assert_eq!(v["fixed"]["ctx_size"], 1024);
        assert_eq!(v["constraints"], json!(["a == b", "c != d"]));
        assert_eq!(v["fit_baseline"], false, "the baseline as given");
        let fitted = Form { fit_baseline: true, ..form.clone() }.to_json().unwrap();
        assert_eq!(fitted["fit_baseline"], true);
        assert_eq!(v["objectives"][0], json!({ "metric": "decode_tps", "goal": "max" }));
        let offered: Vec<String> = form.setting_measures().into_iter().map(|m| m.name).collect();
        assert_eq!(offered, ["setting.cache_type_k", "setting.ctx_size"], "varied, then fixed");
        assert_eq!(v["budget"]["max_trials"], 30);
        assert!(v["budget"].get("patience").is_none(), "blank numbers are left out");
        assert_eq!(v["budget"]["confirm_pairs"], 3);
        assert!(v["budget"].get("settle_trials").is_none(), "the study's default share");
        let share = Form { settle_trials: "6".into(), ..form.clone() }.to_json().unwrap();
        assert_eq!(share["budget"]["settle_trials"], 6);
        assert_eq!(v["margins"], json!({}), "the defaults");
        assert_eq!(v["probes"]["quality"], json!({}));
        assert!(v["probes"].get("kld").is_none(), "not asked for");
        let mut judged = form.clone();
        judged.objectives[0].metric = "kld_mean".into();
        let v2 = judged.to_json().unwrap();
        assert_eq!(v2["probes"]["kld"], json!({}), "a divergence objective runs its probe");
        let asked = Form { kld: true, ..form.clone() }.to_json().unwrap();
        assert_eq!(asked["probes"]["kld"], json!({}));
        let mut scored = Form { quality: false, ..form.clone() };
        assert!(scored.to_json().unwrap()["probes"].get("quality").is_none());
        scored.objectives[1].metric = "quality_score".into();
        assert!(scored.needs(&["quality_score"]) && !scored.needs(&divergence()));
        assert_eq!(scored.to_json().unwrap()["probes"]["quality"], json!({}), "needed, so run");
        // Goodput as an objective runs the load probe (the chat workload
        // unless one is named), with the rates and objective typed.
        assert!(v["probes"].get("load").is_none());
        let mut served = form.clone();
        served.objectives[0].metric = "goodput_rps".into();
        let load = &served.to_json().unwrap()["probes"]["load"];
        assert_eq!(load["workload"], "chat");
        assert_eq!(load["rates"], json!([0.5, 1, 2, 4]));
        assert_eq!(load["slo"], json!({ "ttft_p99_ms": 2000, "itl_p99_ms": 200 }));
        // A bound left blank is not judged: it is left out of the objective.
        let first_token_only = Form { load_itl_ms: " ".into(), ..served.clone() };
        let load = &first_token_only.to_json().unwrap()["probes"]["load"];
        assert_eq!(load["slo"], json!({ "ttft_p99_ms": 2000 }));
        let named = Form { load_workload: "team.jsonl".into(), ..form.clone() }.to_json().unwrap();
        assert_eq!(named["probes"]["load"]["workload"], "team.jsonl");
        assert_eq!(v["probes"]["context"]["sizes"], json!([1024, 2048]));
        // Margins: quality typed in points, kept as a share.
        let strict =
            Form { margin_speed: "2".into(), margin_quality: "1".into(), ..Form::default() };
        let v = strict.to_json().unwrap();
        assert_eq!(v["margins"], json!({ "speed_pct": 2, "quality_rate": 0.01 }));
    }

    #[test]
    fn what_the_form_cannot_read_is_listed() {
        let form = Form {
            vary: vec![VaryRow {
                key: 1,
                name: "threads".into(),
                values: " ".into(),
                ..Default::default()
            }],
            max_trials: "lots".into(),
            ..Form::default()
        };
        let errors = form.to_json().unwrap_err();
        assert_eq!(errors, ["`threads`: no values", "max trials: `lots` is not a number"]);
    }
}
