//! The application layer: every operation the pages and the JSON API offer,
//! written once. Each returns [`crate::Error`]: the JSON routes answer it
//! with its HTTP status, the pages' server functions (in the app crate,
//! which call these directly) with [`crate::Error::for_user`]. Each takes only what it touches: the
//! database where that is all it reads, the reports' context, or the
//! [`crate::service::Service`] where it needs profiles, the runners or the
//! events feed as well.
//!
//! Below this layer: storage (`db`), the runners (`trial_runner`,
//! `study_runner`), reports (`report`) and the views built from stored rows
//! (`views`). Above it: the server's `routes` and the app's server
//! functions, which only translate.

pub mod catalog;
pub mod handoff;
pub mod pareto;
pub mod reports;
pub mod settle;
pub mod status;
pub mod studies;
pub mod trials;
pub mod workers;
