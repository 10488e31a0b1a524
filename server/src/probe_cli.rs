//! `tunebook probe`: one configuration from the command line, measured and
//! printed (a readable report, or JSON), nothing stored.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use engine_bridge::pipeline::{self, AfterDirs, Planned, Start};
use engine_bridge::planner::ModelInfo;
use engine_bridge::probes::Stats;
use engine_bridge::{FailureKind, Outcome, ProbePlan, Profile, Settings};
use serde_json::json;

use crate::exit_status::{Stopped, Why};

/// What to probe, and how.
pub struct ProbeArgs {
    pub profiles: PathBuf,
    pub profile: String,
    pub model: String,
    /// `name=value` pairs.
    pub settings: Vec<String>,
    /// A probe plan TOML file; default: speed and quality.
    pub plan: Option<PathBuf>,
    pub load_timeout: Duration,
    /// Bytes per second; `None`: measured now.
    pub bandwidth: Option<f64>,
    pub json: bool,
}

/// Reads a probe plan TOML file.
pub fn load_plan(path: &std::path::Path) -> anyhow::Result<ProbePlan> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read probe plan {}", path.display()))?;
    toml::from_str::<ProbePlan>(&text)
        .with_context(|| format!("probe plan {} is not valid", path.display()))
}

/// Parses `name=value` pairs.
pub fn parse_settings(pairs: &[String]) -> anyhow::Result<Settings> {
    pairs
        .iter()
        .map(|p| match p.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                Ok((k.trim().to_string(), v.trim().to_string()))
            }
            _ => bail!("`{p}` is not a setting: write name=value, e.g. ctx_size=4096"),
        })
        .collect()
}

/// `given` bytes per second, or this machine's memory read bandwidth
/// measured now.
pub async fn bandwidth_or_measured(given: Option<f64>) -> anyhow::Result<f64> {
    if let Some(b) = given {
        return Ok(b);
    }
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    Ok(tokio::task::spawn_blocking(move || {
        engine_bridge::planner::measure_bandwidth(512 << 20, threads, 3)
    })
    .await?)
}

/// The command line for `settings`, on a port found free now.
fn plan_start(profile: &Profile, model: &str, settings: &Settings) -> anyhow::Result<Start> {
    match Start::plan(profile, model, settings) {
        Ok(start) => Ok(start),
        Err(Planned::Plan(e)) => Err(Stopped::error(Why::Invalid, e.to_string())),
        Err(e) => bail!(e),
    }
}

/// Runs the probe and prints the result; an engine failure is an error.
pub async fn run(args: ProbeArgs) -> anyhow::Result<()> {
    let settings = parse_settings(&args.settings)
        .map_err(|e| Stopped::error(Why::Invalid, format!("{e:#}")))?;
    let profiles = Profile::load_dir(&args.profiles)?;
    let Some(profile) = profiles.iter().find(|p| p.name == args.profile) else {
        let names: Vec<_> = profiles.iter().map(|p| p.name.as_str()).collect();
        bail!("no engine profile `{}` (have: {})", args.profile, names.join(", "));
    };
    let mut plan = match &args.plan {
        Some(path) => load_plan(path)?,
        None => ProbePlan::standard(),
    };
    // A workload file named by the plan sits beside it.
    if let (Some(load), Some(path)) = (&mut plan.load, &args.plan) {
        load.workloads_dir = path.parent().map(std::path::Path::to_path_buf);
    }
    // Planned first: settings that are not valid are told before anything
    // is measured.
    let mut start = plan_start(profile, &args.model, &settings)?;
    let bandwidth = bandwidth_or_measured(args.bandwidth).await?;
    let mut tries = 1;
    let (command, started) = loop {
        let adapted = start.adapt().await?;
        let command = adapted.display();
        if !args.json {
            eprintln!("launching: {command}");
        }
        match adapted.run(args.load_timeout, None).await {
            Err(f) if pipeline::try_another_port(&f, tries) => {
                eprintln!("{f}; starting again on another port");
                tries += 1;
                start = plan_start(profile, &args.model, &settings)?;
            }
            started => break (command, started),
        }
    };
    let model_path = profile.model(&args.model).expect("plan checked the model").path.clone();
    let model = ModelInfo::read(&model_path).ok();
    let outcome = match started {
        Ok(engine) => engine.measure_and_stop(&plan, Duration::from_secs(5)).await,
        Err(f) => Err(f),
    };
    let mut outcome = match outcome {
        Ok(o) => o,
        Err(f) => {
            let tail = f.log_tail.iter().rev().take(15).rev().cloned().collect::<Vec<_>>();
            let message = format!("{f}\n--- engine log (last lines) ---\n{}", tail.join("\n"));
            if f.kind == FailureKind::Rejected {
                return Err(Stopped::error(Why::Refused, message));
            }
            bail!(message);
        }
    };
    // Nothing is kept by a probe: the reference's logits go with the scratch.
    let scratch = tempfile::tempdir()?;
    let dirs = AfterDirs { scratch: scratch.path(), kld: scratch.path(), registry: None };
    let configuration = (profile, args.model.as_str(), &settings);
    let ceiling =
        pipeline::after_engine(&mut outcome, &plan, configuration, dirs, Some(bandwidth)).await;
    if args.json {
        let report = json!({
            "command": command,
            "settings": settings,
            "outcome": outcome,
            "bandwidth_bytes_per_s": bandwidth,
            "ceiling_tps": ceiling,
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report(&outcome, model.as_ref(), &settings, bandwidth, ceiling));
    }
    Ok(())
}

fn spread(s: &Stats, unit: &str) -> String {
    format!("{:.1} {unit} (p10 {:.1}, p90 {:.1}, cv {:.1} %)", s.median, s.p10, s.p90, s.cv * 100.0)
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / 1048576.0)
}

/// The readable report.
fn report(
    o: &Outcome,
    model: Option<&ModelInfo>,
    settings: &Settings,
    bandwidth: f64,
    ceiling: Option<f64>,
) -> String {
    let mut out = String::new();
    let mut line = |label: &str, text: String| out.push_str(&format!("{label:<12}{text}\n"));
    let ctx = o.props.as_ref().and_then(|p| p.n_ctx).map_or("?".into(), |n| n.to_string());
    line("load", format!("{:.2} s; context {ctx} tokens per slot", o.load_time.as_secs_f64()));
    let mut memory = format!("peak RSS {}", mib(o.memory.peak_rss_bytes));
    if let Some(d) = o.memory.mem_available_drop_bytes {
        memory += &format!("; MemAvailable fell {}", mib(d));
    }
    if let Some(g) = o.memory.peak_gpu_bytes {
        memory += &format!("; GPU {}", mib(g));
    }
    if let Some(m) = model {
        let cache = |n: &str| settings.get(n).map_or("f16", String::as_str);
        let ctx: u64 = settings.get("ctx_size").and_then(|c| c.parse().ok()).unwrap_or(0);
        let plan = m.memory_plan(ctx, cache("cache_type_k"), cache("cache_type_v"), 0);
        memory += &format!(
            "; planned: weights {}, K/V {}",
            mib(plan.weights),
            plan.kv.map_or("?".into(), mib)
        );
    }
    line("memory", memory);
    if let Some(s) = &o.measurement.speed {
        line("TTFT", spread(&s.ttft_ms, "ms"));
        line("prefill", spread(&s.prefill_tps, "tok/s"));
        line("decode", spread(&s.decode_tps, "tok/s"));
        if let (Some(c), Some(r)) = (&s.client_decode_tps, s.client_engine_ratio) {
            line("client", format!("{} ({:.3}× the engine's)", spread(c, "tok/s"), r));
        }
        if let Some(c) = ceiling {
            line(
                "ceiling",
                format!(
                    "{c:.1} tok/s at {:.1} GB/s: {:.0} % reached",
                    bandwidth / 1e9,
                    100.0 * s.summary.decode_tps / c
                ),
            );
        }
    }
    if let Some(l) = &o.measurement.load {
        let slo = |b: Option<f64>| b.map_or("—".into(), |b| format!("{b:.0} ms"));
        line(
            "serving",
            format!(
                "workload {}, objective p99 TTFT {} and p99 gap {}: goodput {:.2} req/s{}",
                l.workload,
                slo(l.slo.ttft_p99_ms),
                slo(l.slo.itl_p99_ms),
                l.goodput_rps,
                l.best_rate.map_or(" (no rate held it)".into(), |r| format!(" at {r:.2}/s")),
            ),
        );
        for s in &l.steps {
            let p99 = |p: Option<engine_bridge::probes::load::Percentiles>| {
                p.map_or("—".into(), |p| format!("{:.0} ms", p.p99))
            };
            line(
                "",
                format!(
                    "{:.2}/s: {} of {} answered, {:.2} req/s, {:.0} tok/s, p99 TTFT {}, p99 gap {}: {}",
                    s.rate,
                    s.completed,
                    s.sent,
                    s.throughput_rps,
                    s.output_tps,
                    p99(s.ttft_ms),
                    p99(s.itl_ms),
                    if s.meets_slo { "holds" } else { "misses" },
                ),
            );
            if let Some(b) = &s.binding {
                line("", format!("  {b}"));
            }
        }
    }
    if let Some(k) = &o.measurement.kld {
        line(
            "KLD",
            format!(
                "mean {:.6}, 99th percentile {:.6}, same top token {:.1} % ({} chunks of {} tokens)",
                k.mean, k.p99, k.same_top_pct, k.chunks, k.ctx
            ),
        );
    }
    if let Some(p) = &o.measurement.perplexity {
        let pm = p.plus_minus.map_or(String::new(), |x| format!(" ± {x:.4}"));
        line("perplexity", format!("{:.4}{pm} ({} chunks of {} tokens)", p.ppl, p.chunks, p.ctx));
    }
    for e in &o.measurement.probe_errors {
        line("failed", e.clone());
    }
    if let Some(q) = &o.measurement.quality {
        let passed = q.cases.iter().filter(|c| c.passed).count();
        let how = match q.style {
            engine_bridge::ask::PromptStyle::Chat => "through its chat template",
            engine_bridge::ask::PromptStyle::Raw => "raw",
        };
        line("quality", format!("{passed}/{} passed ({}, {how})", q.cases.len(), q.suite));
    }
    for p in o.measurement.depth.iter().flatten() {
        let text = match (&p.decode_tps, &p.skipped) {
            (Some(d), _) => spread(d, "tok/s"),
            (None, why) => format!("skipped: {}", why.as_deref().unwrap_or("")),
        };
        line("depth", format!("{:>6} tokens: {text}", p.depth));
    }
    for p in o.measurement.concurrency.iter().flatten() {
        line(
            "concurrent",
            format!(
                "{} clients: {:.1} tok/s in all, {:.1} tok/s each",
                p.clients, p.aggregate_tps, p.decode_tps.median
            ),
        );
    }
    for p in o.measurement.context.iter().flatten() {
        let verdict = match (&p.skipped, p.passed) {
            (Some(why), _) => format!("skipped: {why}"),
            (None, true) => "recalled".into(),
            (None, false) => format!("missed (answered {:?})", p.answer.trim()),
        };
        line("context", format!("{:>6} tokens, depth {:.0} %: {verdict}", p.size, p.depth * 100.0));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_name_value_pairs() {
        let s = parse_settings(&["ctx_size=4096".into(), " threads = 8 ".into()]).unwrap();
        assert_eq!(s.get("ctx_size").map(String::as_str), Some("4096"));
        assert_eq!(s.get("threads").map(String::as_str), Some("8"));
        let err = parse_settings(&["4096".into()]).unwrap_err();
        assert!(err.to_string().contains("write name=value"), "{err}");
    }
}
