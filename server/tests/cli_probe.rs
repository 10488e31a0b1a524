//! `tunebook probe` on the real engine: JSON for machines, a report for
//! people, and a clear error for a bad setting.

mod common;

use std::process::Command;

use common::{repo_root, require_demo_engine};

fn probe(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tunebook"))
        .arg("probe")
        .arg(format!("--profiles={}", repo_root().join("profiles").display()))
        .args(["--profile", "demo", "--model", "tiny-llama", "--bandwidth-gbps", "20"])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn json_report_of_one_configuration() {
    require_demo_engine();
    let out = probe(&["--json", "--", "ctx_size=1024", "threads=2", "cache_type_k=q4_0"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["command"].as_str().unwrap().contains("-ctk q4_0"));
    let speed = &report["outcome"]["measurement"]["speed"];
    assert_eq!(speed["summary"]["tokens_generated"], 32);
    assert!(speed["decode_tps"]["median"].as_f64().unwrap() > 0.0);
    assert_eq!(report["outcome"]["props"]["n_ctx"], 1024);
    assert!(report["outcome"]["memory"]["peak_rss_bytes"].as_u64().unwrap() > 0);
    assert!(report["ceiling_tps"].as_f64().unwrap() > 0.0);
    assert_eq!(report["bandwidth_bytes_per_s"], 20e9);
}

#[test]
fn readable_report_and_errors() {
    require_demo_engine();
    let out = probe(&["--", "ctx_size=1024"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    for label in ["load", "memory", "TTFT", "prefill", "decode", "ceiling", "quality"] {
        assert!(text.lines().any(|l| l.starts_with(label)), "{label} missing from:\n{text}");
    }

    let out = probe(&["--", "threads=lots"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("setting `threads`: `lots` is not a whole number"), "{err}");

    let out = probe(&["--", "cache_type_k=q3_bogus"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("setting rejected") && err.contains("Unsupported cache type"), "{err}");
}
