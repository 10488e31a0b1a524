//! The view types shared by the browser and the server.

mod reports;
mod studies;
mod trials;

pub use reports::*;
pub use studies::*;
pub use trials::*;
