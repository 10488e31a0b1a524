//! The project's side of `scripts/bench-strategies.sh`: the planted search
//! worlds, for the project's strategies and for an outside optimizer.
//!
//! - `worlds`: each world's settings (kind, range, values), objectives and
//!   baseline, as JSON, for the outside optimizer to build its space from.
//! - `oracle WORLD SEED`: one line of JSON per trial on stdin (a
//!   configuration); answers one line each: the measured values (with the
//!   world's noise; `null` when the configuration fails), whether they are
//!   within the study's bounds (the first line is the baseline), the share of the
//!   true hypervolume the trials so far reach, and the modelled minutes.
//! - `project SEEDS MAX [TARGET [A,B [W,V]]]`: every project strategy (or
//!   those named) on every world (or those named), one JSON line per run: trials and hours to TARGET (0.95) of the true
//!   hypervolume, or `null` when MAX trials did not reach it. SEEDS is a
//!   count (seeds 1 to it) or a range `FIRST-LAST`, so that several
//!   processes can share one world's seeds.
//!
//! Run through the script, which also runs Optuna's samplers on the same
//! worlds and prints the comparison.

use std::io::{BufRead, Write};

use engine_bridge::Settings;
use rand::SeedableRng;
use serde_json::{Value, json};
use tunebook_study::Study;
use tunebook_study::planted::{Cost, Judge, World, search, search_worlds};
use tunebook_study::space::Domain;

const STRATEGIES: [&str; 5] = ["random", "two_phase", "motpe", "bayes", "grid"];

fn world(name: &str) -> World {
    search_worlds().into_iter().find(|w| w.name == name).unwrap_or_else(|| {
        eprintln!("no world `{name}`");
        std::process::exit(2)
    })
}

fn describe(w: &World) -> Value {
    let study = w.study("random", 0, 10);
    let params: Vec<Value> = study
        .space
        .params
        .iter()
        .map(|p| match &p.domain {
            Domain::Int { min, max, step, log } => {
                json!({"name": p.name, "kind": "int", "low": min, "high": max, "step": step, "log": log})
            }
            Domain::Float { min, max, log, .. } => {
                json!({"name": p.name, "kind": "float", "low": min, "high": max, "log": log})
            }
            Domain::Values(v) => json!({"name": p.name, "kind": "choice", "values": v}),
        })
        .collect();
    let objectives: Vec<Value> = study
        .objectives
        .iter()
        .map(|t| json!({"metric": t.measure.name(), "goal": if t.goal == tunebook_study::Goal::Max { "max" } else { "min" }}))
        .collect();
    json!({"name": w.name, "params": params, "objectives": objectives, "baseline": study.baseline, "configurations": study.space.grid_size() as u64})
}

fn oracle(name: &str, seed: u64) {
    let w = world(name);
    let study: Study = w.study("random", seed, 10);
    let judge = Judge::new(&w, &study, Cost::default());
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x5EED);
    let (mut points, mut minutes, mut previous) = (Vec::new(), 0.0, None::<Settings>);
    let mut baseline = None;
    let mut out = std::io::stdout().lock();
    for (index, line) in std::io::stdin().lock().lines().enumerate() {
        let line = line.expect("stdin");
        let config: Settings = serde_json::from_str(&line).expect("a configuration");
        let mut settings = study.baseline.clone();
        settings.extend(config.clone());
        minutes += judge.minutes(previous.as_ref(), &settings);
        previous = Some(settings.clone());
        let measured = w.measure_in_search(&settings, index, &mut rng).ok();
        if index == 0 {
            baseline = measured.clone();
        }
        let seen = study.observe(settings, measured.as_ref(), baseline.as_ref());
        if let Some(v) = judge.values(&study, &config) {
            points.push(v);
        }
        let reply = json!({
            "values": seen.values,
            "feasible": seen.feasible,
            "share": judge.share(&points),
            "minutes": minutes,
        });
        writeln!(out, "{reply}").and_then(|()| out.flush()).expect("stdout");
    }
}

async fn project(
    seeds: std::ops::RangeInclusive<u64>,
    max: usize,
    target: f64,
    only: Option<&str>,
    worlds: Option<&str>,
) {
    let named =
        |list: Option<&str>, name: &str| list.is_none_or(|l| l.split(',').any(|x| x == name));
    for w in search_worlds().into_iter().filter(|w| named(worlds, w.name)) {
        let study = w.study("random", 0, max);
        let judge = Judge::new(&w, &study, Cost::default());
        for strategy in STRATEGIES.into_iter().filter(|s| named(only, s)) {
            for seed in seeds.clone() {
                let r = search(&w, &judge, strategy, seed, target, max).await;
                let line = json!({"world": w.name, "strategy": strategy, "seed": seed, "trials": r.trials, "hours": r.hours, "share": r.share});
                println!("{line}");
                if strategy == "grid" {
                    break; // the same every seed
                }
            }
        }
    }
}

/// Seeds `1..=N` from a count `N`, or `A..=B` from a range `A-B`.
fn seed_range(text: &str) -> std::ops::RangeInclusive<u64> {
    let number = |s: &str| s.trim().parse::<u64>().expect("seeds: a count or FIRST-LAST");
    let range = match text.split_once('-') {
        Some((first, last)) => number(first)..=number(last),
        None => 1..=number(text),
    };
    assert!(!range.is_empty(), "seeds: `{text}` names none");
    range
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.into());
    match arg(0, "").as_str() {
        "worlds" => {
            let all: Vec<Value> = search_worlds().iter().map(describe).collect();
            println!("{}", Value::Array(all));
        }
        "oracle" => oracle(&arg(1, ""), arg(2, "1").parse().expect("a seed")),
        "project" => {
            project(
                seed_range(&arg(1, "5")),
                arg(2, "200").parse().expect("max trials"),
                arg(3, "0.95").parse().expect("target"),
                args.get(4).map(String::as_str),
                args.get(5).map(String::as_str),
            )
            .await
        }
        _ => {
            eprintln!(
                "usage: bench_strategies worlds | oracle WORLD SEED | project SEEDS MAX [TARGET [STRATEGY,… [WORLD,…]]]"
            );
            std::process::exit(2)
        }
    }
}
