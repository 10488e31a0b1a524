//! The `tunebook` command line: its commands and their options. Every
//! setting of the machine (addresses, folders, timeouts, keys) may come from
//! a `TUNEBOOK_…` environment variable instead of a flag; what a command acts
//! on (a file, a study, settings) comes on the command line. `main.rs` runs
//! what is parsed here.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::Settings;

#[derive(Parser)]
#[command(name = "tunebook", version, about = "Tune local LLM inference engines, measured.")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Serve the web app (and run the trials it queues).
    Serve {
        /// Address to listen on.
        #[arg(long, env = "TUNEBOOK_ADDR", default_value = "127.0.0.1:3000")]
        addr: SocketAddr,
        #[command(flatten)]
        common: Common,
        /// Folder with the built browser bundle under `pkg/` (default:
        /// `target/site` in a checkout, else installed beside the binary).
        #[arg(long, env = "TUNEBOOK_SITE_ROOT")]
        site_root: Option<PathBuf>,
        /// Probe plan TOML file for single trials (default: speed and the quality suite).
        #[arg(long, env = "TUNEBOOK_PROBES")]
        probes: Option<PathBuf>,
        /// An OpenAI-compatible endpoint (`http://127.0.0.1:8080`) that may
        /// rewrite a report's findings as prose, given only the findings.
        #[arg(long, env = "TUNEBOOK_WRITER_URL")]
        writer_url: Option<String>,
        /// The writer's model (default: the first the endpoint lists).
        #[arg(long, env = "TUNEBOOK_WRITER_MODEL", requires = "writer_url")]
        writer_model: Option<String>,
        /// The environment variable holding the writer's API key, if it needs one.
        #[arg(long, env = "TUNEBOOK_WRITER_API_KEY_ENV", requires = "writer_url")]
        writer_api_key_env: Option<String>,
        /// A name (besides IP addresses and `localhost`) browsers may use
        /// to reach this server, such as the machine's DNS name; repeatable.
        #[arg(long = "allowed-host", env = "TUNEBOOK_ALLOWED_HOSTS", value_delimiter = ',')]
        allowed_hosts: Vec<String>,
        /// Ask for this password before every page and API route except
        /// read-only report links and the worker API (set it in the
        /// environment, not on the command line).
        #[arg(long, env = "TUNEBOOK_PASSWORD", hide_env_values = true)]
        password: Option<String>,
    },
    /// Run trials for a Tunebook server on another machine: register this
    /// machine's hardware and engine profiles, then take trials from the
    /// server's queue one at a time until stopped.
    ///
    /// Example: TUNEBOOK_WORKER_TOKEN=… tunebook worker --server http://lab-server:3000
    Worker {
        /// The server's address.
        #[arg(long, env = "TUNEBOOK_SERVER")]
        server: String,
        /// This worker's token (from `POST /api/workers` on the server).
        #[arg(long, env = "TUNEBOOK_WORKER_TOKEN", hide_env_values = true)]
        token: String,
        #[command(flatten)]
        common: Common,
        /// Memory read bandwidth in GB/s (default: measured once and kept).
        #[arg(long, env = "TUNEBOOK_BANDWIDTH_GBPS")]
        bandwidth_gbps: Option<f64>,
        /// The class of machine this one is: machines of one class are
        /// interchangeable, and studies compare speeds only within a class
        /// (default: from the CPU, GPUs and memory).
        #[arg(long, env = "TUNEBOOK_MACHINE_CLASS")]
        class: Option<String>,
    },
    /// Run a study headless, with a progress bar, into the same database.
    ///
    /// Example: tunebook run examples/study.toml    (Ctrl-C pauses; --resume ID goes on)
    Run {
        /// The study file (TOML, or JSON when it ends in .json).
        file: Option<PathBuf>,
        /// Go on with a paused or interrupted study instead.
        #[arg(long, env = "TUNEBOOK_RESUME", conflicts_with = "file")]
        resume: Option<i64>,
        #[command(flatten)]
        common: Common,
    },
    /// Serve the Model Context Protocol on stdin and stdout for an agent:
    /// tools to list profiles, check, create and follow studies, read
    /// their findings and trials, and pause or stop them, through a
    /// running server's JSON API.
    ///
    /// Example (an agent's MCP settings): {"command": "tunebook", "args": ["mcp"]}
    Mcp {
        /// The running server's address.
        #[arg(long, env = "TUNEBOOK_SERVER", default_value = "http://127.0.0.1:3000")]
        server: String,
        /// The server's password, where it has one (set it in the
        /// environment, not on the command line).
        #[arg(long, env = "TUNEBOOK_PASSWORD", hide_env_values = true)]
        password: Option<String>,
    },
    /// Write trials as JSONL (one record per trial, with every sample) or
    /// CSV, a study as an Optuna journal, or one trial's configuration as a
    /// llama-swap entry, a docker compose service or a systemd unit.
    ///
    /// Example: tunebook export --trial 12 --format llama-swap
    Export {
        /// Only this study's trials.
        #[arg(long, env = "TUNEBOOK_STUDY")]
        study: Option<i64>,
        /// The trial to hand off (llama-swap, compose, systemd).
        #[arg(long, env = "TUNEBOOK_TRIAL", conflicts_with = "study")]
        trial: Option<i64>,
        #[arg(long, env = "TUNEBOOK_FORMAT", value_enum, default_value_t = Format::Jsonl)]
        format: Format,
        /// Write here instead of standard output.
        #[arg(long, env = "TUNEBOOK_OUT")]
        out: Option<PathBuf>,
        #[command(flatten)]
        common: Common,
    },
    /// Read trials from a Tunebook export (JSONL or CSV) or from llama-bench
    /// (`-o json` or `-o jsonl`); all or nothing.
    Import {
        file: PathBuf,
        /// The profile name recorded on llama-bench trials.
        #[arg(long, env = "TUNEBOOK_IMPORT_PROFILE", default_value = "llama-bench")]
        profile: String,
        #[command(flatten)]
        common: Common,
    },
    /// Run one configuration and print what it measured (nothing is stored).
    ///
    /// Example: tunebook probe --profile demo --model tiny-llama -- ctx_size=2048 cache_type_k=q8_0
    Probe {
        /// Engine profile name.
        #[arg(long, env = "TUNEBOOK_PROFILE")]
        profile: String,
        /// Model name within the profile.
        #[arg(long, env = "TUNEBOOK_MODEL")]
        model: String,
        /// Folder of engine profile TOML files (default: `profiles` here,
        /// else ~/.config/tunebook/profiles).
        #[arg(long, env = "TUNEBOOK_PROFILES")]
        profiles: Option<PathBuf>,
        /// Probe plan TOML file (default: speed and the quality suite).
        #[arg(long, env = "TUNEBOOK_PROBES")]
        plan: Option<PathBuf>,
        /// Print JSON instead of a readable report.
        #[arg(long, env = "TUNEBOOK_JSON")]
        json: bool,
        /// Seconds the engine may take to load.
        #[arg(long, env = "TUNEBOOK_LOAD_TIMEOUT", default_value_t = 600)]
        load_timeout: u64,
        /// Memory read bandwidth in GB/s (default: measured now).
        #[arg(long, env = "TUNEBOOK_BANDWIDTH_GBPS")]
        bandwidth_gbps: Option<f64>,
        /// Settings as name=value (ctx_size=4096 threads=8 cache_type_k=q8_0 …).
        #[arg(last = true)]
        settings: Vec<String>,
    },
    /// What a configuration of a model needs, without launching it:
    /// weights, K/V cache, what goes on the GPU and what stays on the host,
    /// whether each fits, and the decode speed memory bandwidth allows.
    ///
    /// Example: tunebook plan --model model.gguf -- ctx_size=32768 n_gpu_layers=99 n_cpu_moe=8
    Plan {
        /// The model file (GGUF; any part of a split model).
        #[arg(long, env = "TUNEBOOK_MODEL_FILE")]
        model: PathBuf,
        /// Print JSON instead of a readable report.
        #[arg(long, env = "TUNEBOOK_JSON")]
        json: bool,
        /// Memory read bandwidth in GB/s (default: measured now).
        #[arg(long, env = "TUNEBOOK_BANDWIDTH_GBPS")]
        bandwidth_gbps: Option<f64>,
        /// An engine profile whose llama.cpp build chooses too
        /// (`llama-fit-params`), shown beside the plan.
        #[arg(long, env = "TUNEBOOK_PROFILE")]
        profile: Option<String>,
        /// Folder of engine profile TOML files (default: `profiles` here,
        /// else ~/.config/tunebook/profiles).
        #[arg(long, env = "TUNEBOOK_PROFILES")]
        profiles: Option<PathBuf>,
        /// llama-server settings as name=value (ctx_size=4096 n_gpu_layers=20 …).
        #[arg(last = true)]
        settings: Vec<String>,
    },
    /// Write a llama GGUF model with random weights (for tests and demos).
    MakeModel {
        /// Where to write the .gguf file.
        path: PathBuf,
        #[arg(long, env = "TUNEBOOK_MODEL_SIZE", value_enum, default_value_t = Size::Tiny)]
        size: Size,
        #[arg(long, env = "TUNEBOOK_SEED", default_value_t = 42)]
        seed: u64,
    },
}

/// Where Tunebook keeps things; the same for every command.
#[derive(Args)]
pub struct Common {
    /// Database URL; default: an SQLite file in the data folder.
    #[arg(long, env = "TUNEBOOK_DATABASE_URL")]
    database_url: Option<String>,
    /// Folder of engine profile TOML files (default: `profiles` here, else
    /// ~/.config/tunebook/profiles).
    #[arg(long, env = "TUNEBOOK_PROFILES")]
    profiles: Option<PathBuf>,
    /// Folder for the default database and engine logs (default: `data`
    /// here, else ~/.local/share/tunebook).
    #[arg(long, env = "TUNEBOOK_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Seconds an engine may take to load before the trial fails.
    #[arg(long, env = "TUNEBOOK_LOAD_TIMEOUT", default_value_t = 600)]
    load_timeout: u64,
    /// A TOML file of OpenAI-compatible endpoints (a judge, a model that
    /// proposes configurations) that studies may name.
    #[arg(long, env = "TUNEBOOK_ENDPOINTS")]
    endpoints: Option<PathBuf>,
}

impl Common {
    pub fn settings(self) -> anyhow::Result<Settings> {
        let mut settings =
            Settings::with_data_dir(self.data_dir.unwrap_or_else(crate::places::data));
        if let Some(path) = &self.endpoints {
            settings.endpoints =
                engine_bridge::endpoints::load(path).map_err(anyhow::Error::msg)?;
        }
        if let Some(url) = self.database_url {
            settings.database_url = url;
        }
        settings.profiles_dir = self.profiles.unwrap_or_else(crate::places::profiles);
        settings.load_timeout = Duration::from_secs(self.load_timeout);
        Ok(settings)
    }
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    /// Trials, one record a line, with every sample.
    Jsonl,
    /// Trials, a row each.
    Csv,
    /// A study (`--study`) as a journal Optuna's `JournalStorage` loads and
    /// optuna-dashboard opens.
    OptunaJournal,
    /// A trial (`--trial`) as a llama-swap `models:` entry.
    LlamaSwap,
    /// A trial (`--trial`) as a docker compose service.
    Compose,
    /// A trial (`--trial`) as a systemd unit.
    Systemd,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Size {
    /// About 10 MB: loads instantly.
    Tiny,
    /// About 500 MB: decoding is memory-bound.
    MemoryBound,
    /// The tiny one as a mixture of experts (8, 2 used per token).
    TinyMoe,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn every_option_has_an_environment_variable() {
        fn walk(command: &clap::Command, missing: &mut Vec<String>) {
            for arg in command.get_arguments() {
                let named = arg.get_long().is_some();
                let builtin = matches!(arg.get_id().as_str(), "help" | "version");
                if named && !builtin && arg.get_env().is_none() {
                    missing.push(format!("{} --{}", command.get_name(), arg.get_id()));
                }
            }
            for sub in command.get_subcommands() {
                walk(sub, missing);
            }
        }
        let mut missing = Vec::new();
        walk(&super::Cli::command(), &mut missing);
        assert!(missing.is_empty(), "options without an environment variable: {missing:?}");
    }
}
