//! Studies: what a user varies ([`space`]), the rules between settings and
//! the bounds on metrics ([`expr`]), what objectives read ([`metric`]),
//! what "better" means ([`study`]), Pareto fronts ([`pareto`]), the bounds
//! on a study's sizes ([`limits`]), the strategies that pick the next
//! configuration ([`strategy`]), and the runs that settle a finding left
//! open ([`settle`]). Nothing here launches an engine; the server's study
//! runner does.

pub mod check;
pub mod confirm;
pub mod expr;
pub mod findings;
pub mod limits;
pub mod margins;
pub mod metric;
pub mod pareto;
pub mod planted;
pub mod settle;
pub mod space;
pub mod strategy;
pub mod study;
pub mod within_limits;

pub use metric::{Goal, Measure, Metric, Scale};
pub use space::{Domain, Space};
pub use strategy::{Proposal, Strategy};
pub use study::{Observation, Study, StudyDef, StudyError};
