//! The server's integration tests, one binary: each module was once a
//! binary of its own, and every one linked the whole application. They
//! run together now, two at a time as before (the acceptance study, which
//! compares speeds, runs alone after them); their helpers are in
//! `common/`.

mod common;

#[path = "acceptance.rs"]
mod acceptance;
#[path = "assets.rs"]
mod assets;
#[path = "browser/mod.rs"]
mod browser;
#[path = "cli_plan.rs"]
mod cli_plan;
#[path = "cli_probe.rs"]
mod cli_probe;
#[path = "closed_doors.rs"]
mod closed_doors;
#[path = "crash_recovery.rs"]
mod crash_recovery;
#[path = "databases.rs"]
mod databases;
#[path = "faults.rs"]
mod faults;
#[path = "handoff.rs"]
mod handoff;
#[path = "live_feed.rs"]
mod live_feed;
#[path = "load_progress.rs"]
mod load_progress;
#[path = "login.rs"]
mod login;
#[path = "mcp.rs"]
mod mcp;
#[path = "metrics.rs"]
mod metrics;
#[path = "openapi.rs"]
mod openapi;
#[path = "queue.rs"]
mod queue;
#[path = "real_trial.rs"]
mod real_trial;
#[path = "reports.rs"]
mod reports;
#[path = "studies/mod.rs"]
mod studies;
#[path = "views.rs"]
mod views;
#[path = "workers.rs"]
mod workers;
