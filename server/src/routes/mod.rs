//! The JSON API's handlers and the event streams, one module per resource
//! (`crate::api` routes and describes them), and what they read from a path.

pub mod events;
pub mod log;
pub mod params;
pub mod reports;
pub mod studies;
pub mod trials;
pub mod workers;
