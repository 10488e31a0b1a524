//! The study crate's integration tests, one binary (each module was once
//! its own): planted worlds, search, fuzzing and the real engine.

#[path = "fuzz.rs"]
mod fuzz;
#[path = "llm_real_engine.rs"]
mod llm_real_engine;
#[path = "planted.rs"]
mod planted;
#[path = "search.rs"]
mod search;
