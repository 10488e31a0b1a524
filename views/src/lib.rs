//! What the pages show, shared by the server, which builds it, and the
//! app, which renders it: the view types ([`types`]) and the figures as
//! Plotly JSON ([`figures`]). Plain data: no web framework, no database.

pub mod figures;
pub mod types;
