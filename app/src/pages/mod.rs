//! The pages of the app.

pub mod home;
