//! The JSON API and the event stream, one module per resource.

pub mod events;
pub mod log;
pub mod reports;
pub mod studies;
pub mod trials;
pub mod workers;
