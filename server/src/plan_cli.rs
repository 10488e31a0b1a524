//! `tunebook plan`: what a configuration of a model needs, without
//! launching anything: its weights and K/V cache, where each goes (GPU or
//! host, with experts kept on the CPU and tensor overrides as asked),
//! whether each side fits, and the decode speed memory bandwidth allows.

use std::path::PathBuf;

use engine_bridge::catalog::Catalog;
use engine_bridge::planner::{MemoryPlan, ModelInfo};
use engine_bridge::settings_plan::{self, Asked, Planned};
use serde::Serialize;

use crate::exit_status::{Stopped, Why};
use crate::probe_cli::parse_settings;

/// What `tunebook plan` was asked.
pub struct PlanArgs {
    pub model: PathBuf,
    pub settings: Vec<String>,
    /// Bytes per second; measured when absent.
    pub bandwidth: Option<f64>,
    pub json: bool,
    /// An engine profile whose build's `llama-fit-params` gives llama.cpp's
    /// own choice beside the plan, and the folder of profiles.
    pub profile: Option<String>,
    pub profiles: PathBuf,
}

/// The plan as `--json` prints it.
#[derive(Debug, Serialize)]
pub struct PlanReport {
    pub model: String,
    pub architecture: String,
    pub blocks: u32,
    pub experts: Option<u32>,
    pub experts_used: Option<u32>,
    /// The model's files (several for a split model) and their bytes.
    pub files: Vec<PathBuf>,
    pub file_bytes: u64,
    pub weight_bytes: u64,
    /// For the context asked (the model's own when 0 or unset).
    pub ctx: u64,
    pub kv_bytes: Option<u64>,
    /// Nothing offloaded: the host alone.
    pub host_only: Option<MemoryPlan>,
    pub gpu: Option<MemoryPlan>,
    /// Each GPU's weights and K/V, where `tensor_split` shares them.
    pub gpus: Vec<engine_bridge::planner::GpuShare>,
    pub host: Option<MemoryPlan>,
    pub fits: bool,
    /// Bytes read per generated token at the context's start, where no
    /// K/V cache is read yet: the weights, of the experts only the used share.
    pub bytes_per_token: f64,
    pub bandwidth_bytes_per_s: f64,
    pub decode_ceiling_tps: Option<f64>,
    /// What llama.cpp's `llama-fit-params` chose with these settings fixed.
    pub fitted: Option<engine_bridge::fit::Fitted>,
}

/// Prints the plan; a setting that is not valid is an invalid command (3).
pub async fn run(args: PlanArgs) -> anyhow::Result<()> {
    let invalid = |e: String| Stopped::error(Why::Invalid, e);
    let settings = parse_settings(&args.settings).map_err(|e| invalid(format!("{e:#}")))?;
    let profile = match &args.profile {
        Some(name) => {
            let profiles = engine_bridge::Profile::load_dir(&args.profiles)?;
            let profile = profiles.into_iter().find(|p| &p.name == name).ok_or_else(|| {
                invalid(format!("no engine profile `{name}` in {}", args.profiles.display()))
            })?;
            Some(profile)
        }
        None => None,
    };
    // The settings are llama-server's (with the words the profile's build
    // takes), checked as a study's would be.
    let catalog = profile.as_ref().map_or_else(Catalog::llama_server, |p| p.catalog());
    catalog.render(&settings).map_err(|e| invalid(e.to_string()))?;
    let info = ModelInfo::read(&args.model).map_err(|e| invalid(e.to_string()))?;
    let fitted = match &profile {
        Some(profile) => engine_bridge::fit::fitted(profile, &args.model, &settings)
            .await
            .map_err(anyhow::Error::msg)?,
        None => None,
    };
    let asked = Asked::of(&settings).map_err(invalid)?;
    let (ctx, types) = (asked.ctx_for(&info), asked.types);
    let host_free = engine_bridge::memory::mem_available().unwrap_or(0);
    let gpu_free = engine_bridge::memory::gpu_free_bytes().await;
    let bandwidth = crate::probe_cli::bandwidth_or_measured(args.bandwidth).await?;
    let free = (gpu_free.unwrap_or(0), host_free);
    let (host_only, gpu, gpus, host) = match settings_plan::plan(&info, &asked, ctx, free) {
        Planned::Host(plan) => (Some(plan), None, vec![], None),
        Planned::Placed(plan) => (None, Some(plan.gpu), plan.gpus, Some(plan.host)),
    };
    let fits = [&host_only, &gpu, &host].iter().all(|p| p.as_ref().is_none_or(|p| p.fits));
    let report = PlanReport {
        model: info.name.clone().unwrap_or_else(|| args.model.display().to_string()),
        architecture: info.architecture.clone(),
        blocks: info.layers,
        experts: info.experts,
        experts_used: info.experts_used,
        files: info.files.clone(),
        file_bytes: info.file_bytes,
        weight_bytes: info.weight_bytes(),
        ctx,
        kv_bytes: info.kv_bytes(ctx, types.0, types.1),
        host_only,
        gpu,
        gpus,
        host,
        fits,
        bytes_per_token: info.weight_bytes_per_token(),
        bandwidth_bytes_per_s: bandwidth,
        decode_ceiling_tps: info.decode_ceiling(bandwidth, 0, types.0, types.1),
        fitted,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", text(&report, gpu_free.is_some()));
    }
    Ok(())
}

/// Bytes in GiB, or MiB below one GiB.
fn gib(bytes: u64) -> String {
    let b = bytes as f64;
    if bytes >= 1 << 30 {
        format!("{:.2} GiB", b / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", b / (1u64 << 20) as f64)
    }
}

/// The plan as a person reads it.
fn text(r: &PlanReport, has_gpu: bool) -> String {
    let mut out = String::new();
    let mut line = |label: &str, text: String| out.push_str(&format!("{label:<12}{text}\n"));
    let experts = match (r.experts, r.experts_used) {
        (Some(n), Some(k)) => format!(", {n} experts ({k} used per token)"),
        _ => String::new(),
    };
    line("model", format!("{} ({}), {} blocks{experts}", r.model, r.architecture, r.blocks));
    let parts = if r.files.len() > 1 { format!(" in {} files", r.files.len()) } else { "".into() };
    line("weights", format!("{}{parts}", gib(r.weight_bytes)));
    line("K/V cache", format!("{} for {} tokens", r.kv_bytes.map_or("?".into(), gib), r.ctx));
    let side = |name: &str, p: &MemoryPlan, free: &str| {
        format!(
            "{name}: weights {}, K/V {}, overhead {}: {} of {} {free}: {}",
            gib(p.weights),
            p.kv.map_or("?".into(), gib),
            gib(p.overhead),
            gib(p.total),
            gib(p.available),
            if p.fits { "fits" } else { "does not fit" }
        )
    };
    if let Some(p) = &r.host_only {
        line("memory", side("host", p, "available"));
    }
    if let Some(p) = &r.gpu {
        let free = if has_gpu { "free" } else { "free (no GPU seen)" };
        line("memory", side("GPU", p, free));
    }
    if r.gpus.len() > 1 {
        for (i, g) in r.gpus.iter().enumerate() {
            line("", format!("GPU {i}: weights {}, K/V {}", gib(g.weights), gib(g.kv)));
        }
    }
    if let Some(p) = &r.host {
        line("memory", side("host", p, "available"));
    }
    if let Some(f) = &r.fitted {
        line("llama.cpp", format!("fits with {}", f.args.join(" ")));
    }
    if let Some(c) = r.decode_ceiling_tps {
        line(
            "decode",
            format!(
                "at most {c:.1} tok/s: {} read per token at {:.1} GB/s",
                gib(r.bytes_per_token as u64),
                r.bandwidth_bytes_per_s / 1e9
            ),
        );
    }
    out
}
