//! A trial's metrics as columns of `trials`: one column a metric, named as
//! the metric, whole metrics as integers ([`tunebook_domain::Metric`] lists
//! them). Read from a row by name; written under their names as a map.

use std::ops::{Deref, DerefMut};

use serde::{Deserialize, Serialize};
use sqlx::Row as _;
use tunebook_domain::{Metric, Metrics};

/// What a stored trial measured: [`Metrics`] read from its row.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MetricColumns(pub Metrics);

impl<'r> sqlx::FromRow<'r, sqlx::any::AnyRow> for MetricColumns {
    fn from_row(row: &'r sqlx::any::AnyRow) -> Result<Self, sqlx::Error> {
        let mut metrics = Metrics::default();
        for m in Metric::ALL {
            let value = if m.whole() {
                row.try_get::<Option<i64>, _>(m.name())?.map(|v| v as f64)
            } else {
                row.try_get::<Option<f64>, _>(m.name())?
            };
            metrics.set(m, value);
        }
        Ok(MetricColumns(metrics))
    }
}

impl Deref for MetricColumns {
    type Target = Metrics;
    fn deref(&self) -> &Metrics {
        &self.0
    }
}

impl DerefMut for MetricColumns {
    fn deref_mut(&mut self) -> &mut Metrics {
        &mut self.0
    }
}
