//! What a trial measured: a value for each metric it has, keyed by the
//! metric. Written out (JSON, a database row) it is one field per metric
//! under the metric's name, whole metrics as whole numbers, as the trials'
//! columns are; read back, names that are no metric's and nulls are
//! passed over, so it sits flattened among a trial's other fields.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::Metric;

/// A trial's measured values, by metric.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metrics(pub BTreeMap<Metric, f64>);

impl Metrics {
    /// The metrics given a value, with it: what imports and tests build.
    pub fn of(pairs: impl IntoIterator<Item = (Metric, Option<f64>)>) -> Self {
        let mut out = Metrics::default();
        for (m, v) in pairs {
            out.set(m, v);
        }
        out
    }

    /// The value of `m`, if it was measured.
    pub fn get(&self, m: Metric) -> Option<f64> {
        self.0.get(&m).copied()
    }

    /// Sets `m` to `value`, or takes it out when `None` or not finite.
    pub fn set(&mut self, m: Metric, value: Option<f64>) {
        match value.filter(|v| v.is_finite()) {
            Some(v) => self.0.insert(m, v),
            None => self.0.remove(&m),
        };
    }
}

impl Serialize for Metrics {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (m, v) in &self.0 {
            if m.whole() {
                map.serialize_entry(m.name(), &(v.round() as i64))?;
            } else {
                map.serialize_entry(m.name(), v)?;
            }
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Metrics {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Each;
        impl<'de> Visitor<'de> for Each {
            type Value = Metrics;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of metric names to numbers")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Metrics, A::Error> {
                let mut out = Metrics::default();
                while let Some(name) = map.next_key::<String>()? {
                    match Metric::parse(&name) {
                        Some(m) => out.set(m, map.next_value::<Option<f64>>()?),
                        None => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_map(Each)
    }
}

/// An object of numbers under metric names, as it is written.
#[cfg(feature = "schema")]
impl schemars::JsonSchema for Metrics {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Metrics".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "object",
            "description": "Measured values, one field per metric by its name",
            "additionalProperties": { "type": "number" },
        })
    }
}
