//! engine-bridge's integration tests, one binary (each module was once its
//! own): real and fake engines launched, measured and faulted.

mod common;

#[path = "faults.rs"]
mod faults;
#[path = "load_probe.rs"]
mod load_probe;
#[path = "openai_engines.rs"]
mod openai_engines;
#[path = "real_engine.rs"]
mod real_engine;
