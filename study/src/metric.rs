//! What objectives and bounds read: the [`Metric`]s probes measure, a
//! setting's own value (`setting.ctx_size`), and which way is better.

use std::collections::BTreeMap;

use engine_bridge::Settings;
use serde::{Deserialize, Serialize};
pub use tunebook_domain::metric::{Goal, Metric, Scale};

/// The prefix that names a setting where a metric is expected.
pub const SETTING_PREFIX: &str = "setting.";

/// What an objective or a bound reads: a metric the probes measure, or the
/// value a trial gave a numeric setting (`setting.ctx_size`, to ask for
/// the largest context, or to bound it: `min = "32768"`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Measure {
    Metric(Metric),
    Setting(String),
}

/// As its name (`decode_tps`, `setting.ctx_size`), the way a metric alone
/// is written: pages and reports keep reading findings' JSON as before.
impl Serialize for Measure {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

impl<'de> Deserialize<'de> for Measure {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Measure::parse(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("no metric or setting `{name}`")))
    }
}

/// A string: a metric's name or `setting.` and a setting's.
impl schemars::JsonSchema for Measure {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Measure".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A metric's name (`decode_tps`), or `setting.` and a numeric setting's name",
        })
    }
}

impl Measure {
    /// A metric's name, or `setting.` and a setting's name; the setting is
    /// checked against the study by [`crate::StudyDef::check`].
    pub fn parse(name: &str) -> Option<Self> {
        match name.strip_prefix(SETTING_PREFIX) {
            Some(setting) if !setting.is_empty() => Some(Measure::Setting(setting.to_string())),
            Some(_) => None,
            None => Metric::parse(name).map(Measure::Metric),
        }
    }

    /// As study files write it.
    pub fn name(&self) -> String {
        match self {
            Measure::Metric(m) => m.name().to_string(),
            Measure::Setting(s) => format!("{SETTING_PREFIX}{s}"),
        }
    }

    /// How pages and reports name it.
    pub fn label(&self) -> String {
        match self {
            Measure::Metric(m) => m.label().to_string(),
            Measure::Setting(s) => format!("setting {s}"),
        }
    }

    /// The metric, for what only metrics have (effects, findings).
    pub fn metric(&self) -> Option<Metric> {
        match self {
            Measure::Metric(m) => Some(*m),
            Measure::Setting(_) => None,
        }
    }

    /// Which way is better unless the study says: more of a setting (the
    /// context size) is what a user asking for it wants.
    pub fn natural_goal(&self) -> Goal {
        match self {
            Measure::Metric(m) => m.natural_goal(),
            Measure::Setting(_) => Goal::Max,
        }
    }

    /// Its value for a trial: the metric measured, or the setting as the
    /// configuration gave it (a number, else nothing).
    pub fn value(&self, metrics: &BTreeMap<Metric, f64>, config: &Settings) -> Option<f64> {
        match self {
            Measure::Metric(m) => metrics.get(m).copied(),
            Measure::Setting(s) => {
                config.get(s)?.trim().parse::<f64>().ok().filter(|v| v.is_finite())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use engine_bridge::Catalog;

    use super::*;
    use crate::study::{Study, StudyDef, StudyError};

    /// The largest context that runs fast, with at least 16K of it.
    const CONTEXT: &str = r#"
name = "context"
profile = "p"
model = "m"
strategy = { kind = "KIND", seed = 3 }
[baseline]
ctx_size = 4096
threads = 4
[space]
ctx_size = { min = 2048, max = 65536, log = true }
threads = [2, 4, 8]
[[objectives]]
metric = "decode_tps"
[[objectives]]
metric = "setting.ctx_size"
[[bounds]]
metric = "setting.ctx_size"
min = "16384"
"#;

    fn check(text: &str) -> Result<Study, StudyError> {
        StudyDef::from_toml(text)?.check(&Catalog::llama_server(), &["m".to_string()])
    }

    fn ctx(c: &Settings) -> f64 {
        c["ctx_size"].parse().unwrap()
    }

    #[test]
    fn a_setting_is_an_objective_and_its_bound_a_constraint() {
        let study = check(&CONTEXT.replace("KIND", "random")).unwrap();
        assert_eq!(study.objectives[1].measure, Measure::Setting("ctx_size".into()));
        assert_eq!(study.objectives[1].goal, Goal::Max, "more context is what is asked for");
        assert_eq!(study.baseline["ctx_size"], "4096", "the baseline stays the reference");
        let allowed: Vec<Settings> = study.space.grid().filter(|c| study.space.allows(c)).collect();
        assert_eq!(allowed.len(), 3 * 3, "16K, 32K and 64K at each thread count");
        assert!(allowed.iter().all(|c| ctx(c) >= 16384.0));

        let metrics: BTreeMap<Metric, f64> = [(Metric::DecodeTps, 20.0)].into();
        let wide = study
            .space
            .complete([("ctx_size".into(), "32768".into()), ("threads".into(), "8".into())]);
        let o = study.observe(wide, Some(&metrics), Some(&metrics));
        assert_eq!(o.values, Some(vec![20.0, 32768.0]));
        assert!(o.feasible);
        let o = study.observe(study.baseline.clone(), Some(&metrics), Some(&metrics));
        assert_eq!(o.values, Some(vec![20.0, 4096.0]));
        assert!(!o.feasible, "the baseline's 4K breaks the 16K bound");
    }

    #[test]
    fn a_setting_that_cannot_be_read_as_a_number_is_named() {
        let words = CONTEXT.replace("KIND", "random").replace(
            "threads = [2, 4, 8]\n",
            "threads = [2, 4, 8]\ncache_type_k = [\"f16\", \"q8_0\"]\n",
        ) + "[[objectives]]\nmetric = \"setting.cache_type_k\"\n";
        let e = check(&words).unwrap_err().to_string();
        assert!(e.contains("setting `cache_type_k` takes values that are not numbers"), "{e}");
        let absent = CONTEXT.replace("KIND", "random")
            + "[[bounds]]\nmetric = \"setting.top_k\"\nmin = \"1\"\n";
        let e = check(&absent).unwrap_err().to_string();
        assert!(e.contains("the study neither varies nor fixes `top_k`"), "{e}");
        let empty = CONTEXT.replace("KIND", "random").replace(
            "[[objectives]]\nmetric = \"setting.ctx_size\"",
            "[[objectives]]\nmetric = \"setting.\"",
        );
        let e = check(&empty).unwrap_err().to_string();
        assert!(e.contains("unknown metric `setting.`"), "{e}");
        let impossible =
            CONTEXT.replace("KIND", "random").replace("min = \"16384\"", "min = \"1000000\"");
        let e = check(&impossible).unwrap_err().to_string();
        assert!(e.contains("no configuration satisfies the constraints"), "{e}");
        let relative =
            CONTEXT.replace("KIND", "random").replace("min = \"16384\"", "min = \"baseline * 8\"");
        let study = check(&relative).unwrap();
        assert!(study.space.grid().filter(|c| study.space.allows(c)).all(|c| ctx(&c) >= 32768.0));
    }

    #[tokio::test]
    async fn every_strategy_keeps_within_a_bound_on_a_setting() {
        for kind in ["grid", "random", "two_phase", "motpe", "bayes"] {
            let study = check(&CONTEXT.replace("KIND", kind)).unwrap();
            let strategy = crate::strategy::for_study(&study, None, None);
            // Decode falls with context and peaks at 4 threads.
            let measure = |c: &Settings| -> BTreeMap<Metric, f64> {
                let t: f64 = c["threads"].parse().unwrap();
                [(Metric::DecodeTps, 50.0 - ctx(c).log2() - (t - 4.0).abs())].into()
            };
            let base = measure(&study.baseline);
            let mut history = vec![study.observe(study.baseline.clone(), Some(&base), Some(&base))];
            while let Some(p) = strategy.propose(&study, &history).await {
                assert!(ctx(&p.config) >= 16384.0, "{kind} proposed {:?}", p.config);
                let m = measure(&p.config);
                history.push(study.observe(p.config, Some(&m), Some(&base)));
            }
            assert_eq!(history.len(), 1 + 9, "{kind} tried every allowed configuration once");
        }
    }
}
