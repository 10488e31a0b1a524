//! What the pages show, shared by the server, which builds it, and the
//! app, which renders it: the view types ([`types`]) and the figures as
//! Plotly JSON ([`figures`]). Plain data: no web framework, no database.

pub mod figures;
pub mod importance;
pub mod pair;
pub mod spread;
pub mod types;

/// Settings that place a llama.cpp model's layers on GPUs: every value runs
/// alike with a build that has none, so the designer leaves them out there
/// and the server refuses to vary them.
pub const GPU_PLACEMENT: &[&str] = &["n_gpu_layers", "main_gpu", "split_mode", "tensor_split"];
