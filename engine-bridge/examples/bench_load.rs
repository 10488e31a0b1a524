//! The load generator's own ceiling: the load probe run against a stub
//! endpoint that answers every chat request at once (the fake engine's
//! `/v1/chat/completions`, eight tokens), at rising rates. Where the stub
//! is served at the rate asked with time to first token in the low
//! milliseconds, the generator keeps up; above that, what a load probe
//! reports is the client's limit, not the engine's.
//!
//! Usage: bench_load [SECONDS_PER_RATE]   (build with
//! `cargo build --release -p engine-bridge --example bench_load --bin tunebook-fake-engine`)

use std::time::Duration;

use engine_bridge::probes::{LoadProbe, Slo};
use engine_bridge::process::LaunchSpec;
use engine_bridge::{RunningEngine, free_port};

#[tokio::main]
async fn main() {
    let seconds: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(3);
    let exe = std::env::current_exe().expect("this program's path");
    let fake =
        exe.parent().and_then(|p| p.parent()).expect("target folder").join("tunebook-fake-engine");
    assert!(fake.is_file(), "{} is missing: build it first", fake.display());
    let port = free_port().unwrap();
    let args = ["--host", "127.0.0.1", "--port", &port.to_string(), "--fake", "ok"];
    let spec = LaunchSpec::new(fake, args.iter().map(|s| s.to_string()).collect());
    let engine =
        RunningEngine::launch(spec, port, Duration::from_secs(10)).await.expect("stub starts");
    let probe = LoadProbe {
        workload: "chat".into(),
        rates: vec![50.0, 100.0, 200.0, 400.0, 800.0, 1000.0],
        duration: Duration::from_secs(seconds),
        // Judged only on errors: every rate runs.
        slo: Slo { ttft_p99_ms: None, itl_p99_ms: None },
        search_steps: 0,
        max_in_flight: 4096,
        ..LoadProbe::default()
    };
    let r = probe.run(&engine).await.expect("the probe runs");
    println!(
        "# Load generator against an instant stub ({} s a rate, {} CPU threads)\n",
        seconds,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "| asked req/s | sent req/s | served req/s | served / sent | TTFT p50 ms | TTFT p99 ms | errors |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let mut ceiling = None;
    for s in &r.steps {
        let ttft = s.ttft_ms.expect("answers");
        // Arrivals are Poisson: what was sent varies about the rate asked.
        let sent = f64::from(s.sent) / seconds as f64;
        let kept = s.throughput_rps / sent;
        if kept >= 0.95 && ttft.p99 < 50.0 && s.errors == 0 {
            ceiling = Some(s.rate);
        }
        println!(
            "| {:.0} | {sent:.1} | {:.1} | {kept:.2} | {:.2} | {:.2} | {} |",
            s.rate, s.throughput_rps, ttft.p50, ttft.p99, s.errors
        );
    }
    match ceiling {
        Some(c) => println!(
            "\nkeeps up (≥ 95 % served, p99 TTFT under 50 ms) up to {c:.0} requests a second"
        ),
        None => println!("\nkeeps up at none of these rates"),
    }
    engine.stop(Duration::from_secs(2)).await;
}
