//! The `tunebook` command: `serve` the app, work for another server, run,
//! export, import or probe from the command line, or write a test model.
//! The commands and their options are `tunebook::cli`; this runs them.

use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use engine_bridge::gguf::{LlamaSpec, write_random_llama};
use tunebook::cli::{Cli, Command, Format, Size};
use tunebook::ops::handoff::Format as Handoff;
use tunebook::study_cli::Export;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match main_inner().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e:#}");
            // Statuses above 255 do not exist; `code` gives none.
            std::process::ExitCode::from(tunebook::exit_status::code(&e) as u8)
        }
    }
}

async fn main_inner() -> anyhow::Result<()> {
    // Logs go to stderr: stdout carries what commands print (`export`'s
    // JSON lines, `probe --json`).
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,sqlx=warn".into()),
        )
        .init();
    match Cli::parse().command {
        Command::Serve {
            addr,
            common,
            site_root,
            probes,
            writer_url,
            writer_model,
            writer_api_key_env,
            allowed_hosts,
            password,
        } => {
            let mut settings = common.settings()?;
            settings.site_root = site_root.unwrap_or_else(tunebook::places::site);
            // Spaces are no password: refused rather than taken for one.
            if password.as_deref().is_some_and(|p| !p.is_empty() && p.trim().is_empty()) {
                anyhow::bail!("TUNEBOOK_PASSWORD is only spaces: set a real password, or none");
            }
            settings.password = password.filter(|p| !p.is_empty());
            settings.allowed_hosts = allowed_hosts;
            if !addr.ip().is_loopback() && settings.password.is_none() {
                anyhow::bail!(
                    "refusing to listen on {addr} without a password: anyone who can reach it could run engines here. Set TUNEBOOK_PASSWORD, or listen on 127.0.0.1"
                );
            }
            settings.writer = writer_url.map(|url| tunebook_study::study::Endpoint {
                url,
                model: writer_model,
                api_key_env: writer_api_key_env,
            });
            if let Some(path) = probes {
                settings.probes = tunebook::probe_cli::load_plan(&path)?;
            }
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr}"))?;
            tunebook::launch(settings, listener, tunebook::shutdown::signal())
                .await
                .context("server failed")?;
        }
        Command::Worker { server, token, common, bandwidth_gbps, class } => {
            let mut settings = common.settings()?;
            settings.bandwidth = bandwidth_gbps.map(|g| g * 1e9);
            let stop = tokio_util::sync::CancellationToken::new();
            let on_signal = stop.clone();
            let signal = tunebook::shutdown::signal();
            tokio::spawn(async move {
                signal.await;
                on_signal.cancel();
            });
            tunebook::worker::work(settings, &server, &token, class.as_deref(), stop).await?;
        }
        Command::Probe {
            profile,
            model,
            profiles,
            plan,
            json,
            load_timeout,
            bandwidth_gbps,
            settings,
        } => {
            tunebook::probe_cli::run(tunebook::probe_cli::ProbeArgs {
                profiles: profiles.unwrap_or_else(tunebook::places::profiles),
                profile,
                model,
                settings,
                plan,
                load_timeout: Duration::from_secs(load_timeout),
                bandwidth: bandwidth_gbps.map(|g| g * 1e9),
                json,
            })
            .await?;
        }
        Command::Run { file, resume, common } => {
            let settings = common.settings()?;
            tunebook::study_cli::run(tunebook::study_cli::RunArgs { settings, file, resume })
                .await?;
        }
        Command::Mcp { server, password } => {
            let password = password.filter(|p| !p.is_empty());
            tunebook::mcp::serve(&server, password.as_deref()).await?;
        }
        Command::Export { study, trial, format, out, common } => {
            let settings = common.settings()?;
            let what = match format {
                Format::Jsonl => Export::Trials { study, csv: false },
                Format::Csv => Export::Trials { study, csv: true },
                Format::OptunaJournal => Export::OptunaJournal(
                    study.context("an Optuna journal is of one study: give --study")?,
                ),
                Format::LlamaSwap | Format::Compose | Format::Systemd => {
                    let handoff = match format {
                        Format::LlamaSwap => Handoff::LlamaSwap,
                        Format::Compose => Handoff::Compose,
                        _ => Handoff::Systemd,
                    };
                    Export::Trial(
                        trial.context("a configuration is one trial's: give --trial")?,
                        handoff,
                    )
                }
            };
            match out {
                Some(path) => {
                    let mut file = std::io::BufWriter::new(
                        std::fs::File::create(&path)
                            .with_context(|| format!("cannot write {}", path.display()))?,
                    );
                    tunebook::study_cli::export(&settings, what, &mut file).await?;
                    std::io::Write::flush(&mut file)?;
                }
                None => {
                    let mut stdout = std::io::stdout().lock();
                    tunebook::study_cli::export(&settings, what, &mut stdout).await?;
                }
            }
        }
        Command::Import { file, profile, common } => {
            let settings = common.settings()?;
            let ids = tunebook::study_cli::import(&settings, &file, &profile).await?;
            println!("imported {} trials", ids.len());
        }
        Command::Plan { model, json, bandwidth_gbps, profile, profiles, settings } => {
            tunebook::plan_cli::run(tunebook::plan_cli::PlanArgs {
                model,
                settings,
                bandwidth: bandwidth_gbps.map(|g| g * 1e9),
                json,
                profile,
                profiles: profiles.unwrap_or_else(tunebook::places::profiles),
            })
            .await?;
        }
        Command::MakeModel { path, size, seed } => {
            let spec = match size {
                Size::Tiny => LlamaSpec::tiny(),
                Size::MemoryBound => LlamaSpec::memory_bound(),
                Size::TinyMoe => LlamaSpec::tiny_moe(),
            };
            let bytes = write_random_llama(&path, &spec, seed)?;
            println!("wrote {} ({:.1} MB)", path.display(), bytes as f64 / 1e6);
        }
    }
    Ok(())
}
