//! engine-bridge: launch, supervise and measure local inference engines.
//!
//! The pieces, from the outside in:
//! - [`profile`]: which engine binaries and models may run (server-side TOML);
//! - [`catalog`]: each engine's settings, their domains and flags;
//! - [`engine`]: plan a command line, launch, wait until ready, probe, stop;
//! - [`flags`]: each setting spelled the way the user's binary accepts it;
//! - [`children`]: how every program is started (own group, dies with Tunebook);
//! - [`process`]: engine processes, output capture, SIGTERM then SIGKILL;
//! - [`probes`]: speed, depth curve, concurrency, quality, context recall;
//! - [`ask`]: a question through the model's chat template, thinking apart;
//! - [`openai`]: OpenAI-compatible servers, timed on the client;
//! - [`http`]: the HTTP client everything is sent with (TLS by ring);
//! - [`endpoints`]: the judge and other models Tunebook asks, configured on the server;
//! - [`llama_server`]: llama-server's health, props and timed completions;
//! - [`memory`]: peak RSS of the process group, MemAvailable, GPU memory;
//! - [`registry`]: a record of running engines, so none outlives a crash;
//! - [`failure`]: why an engine failed, with its own words as evidence;
//! - [`planner`]: model metadata, weight and K/V cache memory before launch;
//! - [`gguf`]: random-weight GGUF models for tests and demos.

pub mod applied;
pub mod ask;
pub mod catalog;
pub mod chat;
pub mod children;
pub mod devices;
pub mod endpoints;
pub mod engine;
pub mod failure;
pub mod fit;
pub mod flags;
pub mod gguf;
pub mod http;
pub mod llama_server;
pub mod measure;
pub mod memory;
pub mod openai;
pub mod output_lines;
pub mod pipeline;
pub mod placement;
pub mod planner;
pub mod probes;
pub mod process;
pub mod profile;
pub mod registry;
pub mod settings_plan;
pub mod workloads;

pub use catalog::{Catalog, Settings};
pub use engine::{RunningEngine, free_port, plan};
pub use failure::{Failure, FailureKind};
pub use measure::Outcome;
pub use probes::{Measurement, ProbePlan, SpeedProbe, SpeedSummary};
pub use profile::Profile;
