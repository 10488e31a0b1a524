//! Tunebook's vocabulary: the types every layer speaks, from storage to
//! the pages in the browser, defined once. A metric ([`Metric`]), a
//! trial's state ([`TrialState`]) and its role in a study ([`Role`]), and
//! what a trial measured ([`Metrics`]).
//! Nothing here reads or writes anything.

pub mod metric;
pub mod metrics;
pub mod trial;

pub use metric::{Goal, Metric, Scale};
pub use metrics::Metrics;
pub use trial::{Role, TrialState, TrialSupport};
