//! What each setting became, read back from what llama-server says of
//! itself at start-up (its log at verbosity 4): a setting the engine
//! capped, refused or ignored is told apart from one it ran with, so that
//! "no effect" is never claimed for a setting that never took effect.

use serde::{Deserialize, Serialize};

use crate::catalog::Settings;

/// One setting as asked and as the engine ran it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Applied {
    pub setting: String,
    pub asked: String,
    /// What the engine reported; `None` when it said nothing of it.
    pub ran: Option<String>,
    /// Whether what ran is what was asked; `None` when not reported.
    pub matches: Option<bool>,
}

/// llama.cpp rounds a context up to a multiple of this.
const CTX_PAD: u64 = 256;

/// The settings of `asked` that the log speaks of, each compared.
pub fn read_back(asked: &Settings, log: &[String]) -> Vec<Applied> {
    let mut out = Vec::new();
    for (setting, value) in asked {
        let Some((ran, matches)) = compare(setting, value, log) else { continue };
        out.push(Applied { setting: setting.clone(), asked: value.clone(), ran, matches });
    }
    out
}

/// The settings that did not run as asked.
pub fn mismatched(applied: &[Applied]) -> Vec<&Applied> {
    applied.iter().filter(|a| a.matches == Some(false)).collect()
}

/// `None`: a setting this does not check. Else what ran, and whether it
/// is what was asked.
fn compare(setting: &str, asked: &str, log: &[String]) -> Option<(Option<String>, Option<bool>)> {
    let same = |ran: Option<String>| {
        let matches = ran.as_ref().map(|r| r == asked);
        Some((ran, matches))
    };
    // A count asked as the engine's default word (`parallel = "auto"`,
    // which passes no flag): what ran is reported, not judged.
    let count = |ran: Option<String>| match asked.parse::<u64>() {
        Ok(_) => same(ran),
        Err(_) => Some((ran, None)),
    };
    match setting {
        "threads" => count(after(log, "system_info: n_threads = ")),
        "threads_batch" => count(after(log, "(n_threads_batch = ")),
        "batch_size" => count(after(log, "llama_context: n_batch ")),
        "ubatch_size" => count(after(log, "llama_context: n_ubatch ")),
        "parallel" => count(after(log, "llama_context: n_seq_max ")),
        "ctx_size" => {
            let asked: u64 = asked.parse().ok().filter(|c| *c > 0)?;
            let ran = after(log, "llama_context: n_ctx ");
            let matches = ran.as_ref().map(|r| r.parse() == Ok(asked.div_ceil(CTX_PAD) * CTX_PAD));
            Some((ran, matches))
        }
        "flash_attn" => {
            let ran = after(log, "llama_context: flash_attn ");
            let matches = ran.as_ref().map(|r| match asked {
                "on" => r == "enabled",
                "off" => r == "disabled",
                _ => true,
            });
            Some((ran, matches))
        }
        "cache_type_k" | "cache_type_v" => {
            let side = if setting == "cache_type_k" { "K (" } else { "V (" };
            let line = log.iter().rev().find(|l| l.contains("llama_kv_cache: size ="))?;
            let ran = line.split(side).nth(1)?.split(')').next().map(str::to_string);
            same(ran)
        }
        "n_gpu_layers" => {
            // `offloaded 7/13 layers to GPU`: all that exist when more are asked.
            let line = log.iter().rev().find(|l| l.contains("layers to GPU"))?;
            let counts = line.split("offloaded ").nth(1)?.split_whitespace().next()?;
            let (done, of) = counts.split_once('/')?;
            let (done, of): (u64, u64) = (done.parse().ok()?, of.parse().ok()?);
            let asked: u64 = asked.parse().ok()?;
            Some((Some(done.to_string()), Some(done == asked.min(of))))
        }
        "mlock" if matches!(asked, "true" | "on" | "1") => {
            let failed = log.iter().any(|l| l.contains("failed to mlock"));
            let locked = log.iter().any(|l| l.contains("mlock") && l.contains("load_mode"));
            let ran = if failed {
                "failed"
            } else if locked {
                "locked"
            } else {
                return None;
            };
            Some((Some(ran.into()), Some(!failed)))
        }
        _ => None,
    }
}

/// The first word after `key` on the last line holding it, `=` and
/// spaces skipped (`n_batch               = 256` gives `256`).
fn after(log: &[String], key: &str) -> Option<String> {
    let line = log.iter().rev().find(|l| l.contains(key))?;
    let rest = line.split(key).nth(1)?;
    let rest = rest.trim_start().trim_start_matches('=').trim_start();
    let word: String = rest.chars().take_while(|c| !c.is_whitespace() && *c != ')').collect();
    (!word.is_empty()).then_some(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// llama-server's start-up at verbosity 4, as it printed it here.
    const LOG: &str = "\
0.00.002.559 I cmn  common_param: system_info: n_threads = 2 (n_threads_batch = 1) / 2 | CPU : SSE3 = 1 |
0.00.005.049 I load_tensors: loading model tensors, this can take a while... (load_mode = mmap+mlock)
0.00.007.140 I llama_context: n_seq_max             = 2
0.00.007.140 I llama_context: n_ctx                 = 1024
0.00.007.141 I llama_context: n_batch               = 256
0.00.007.141 I llama_context: n_ubatch              = 128
0.00.007.142 I llama_context: flash_attn            = enabled
0.00.007.852 I llama_kv_cache: size =    1.06 MiB (   512 cells,   4 layers,  2/2 seqs), K (q8_0):    0.53 MiB, V (q4_0):    0.53 MiB
load_tensors: offloaded 7/13 layers to GPU";

    fn log() -> Vec<String> {
        LOG.lines().map(String::from).collect()
    }

    fn asked(pairs: &[(&str, &str)]) -> Settings {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn what_ran_is_read_for_each_setting_the_log_speaks_of() {
        let applied = read_back(
            &asked(&[
                ("threads", "2"),
                ("threads_batch", "1"),
                ("batch_size", "256"),
                ("ubatch_size", "128"),
                ("parallel", "2"),
                ("ctx_size", "1000"),
                ("flash_attn", "on"),
                ("cache_type_k", "q8_0"),
                ("cache_type_v", "q4_0"),
                ("mlock", "true"),
                ("top_k", "40"),
            ]),
            &log(),
        );
        assert_eq!(applied.len(), 10, "top_k is not read from the log: {applied:?}");
        assert!(mismatched(&applied).is_empty(), "{applied:?}");
    }

    #[test]
    fn a_setting_the_engine_did_not_take_is_a_mismatch() {
        let applied = read_back(
            &asked(&[
                ("threads", "8"),
                ("flash_attn", "off"),
                ("cache_type_v", "q8_0"),
                ("n_gpu_layers", "10"),
                ("ctx_size", "4096"),
            ]),
            &log(),
        );
        let wrong: Vec<(&str, Option<&str>)> =
            mismatched(&applied).iter().map(|a| (a.setting.as_str(), a.ran.as_deref())).collect();
        assert_eq!(
            wrong,
            [
                ("cache_type_v", Some("q4_0")),
                ("ctx_size", Some("1024")),
                ("flash_attn", Some("enabled")),
                ("n_gpu_layers", Some("7")),
                ("threads", Some("2")),
            ]
        );
        // All 13 layers asked for (or more): all offloaded is what was asked.
        let all = read_back(&asked(&[("n_gpu_layers", "99")]), &log());
        assert_eq!(all[0].matches, Some(false), "7 of 13 is not all");
        let failed: Vec<String> = vec!["warning: failed to mlock 10000-byte buffer".into()];
        let mlock = read_back(&asked(&[("mlock", "true")]), &failed);
        assert_eq!((mlock[0].ran.as_deref(), mlock[0].matches), (Some("failed"), Some(false)));
        // The engine's default word asks for no count: reported, not judged.
        let auto = read_back(&asked(&[("parallel", "auto")]), &log());
        assert_eq!((auto[0].ran.as_deref(), auto[0].matches), (Some("2"), None));
    }
}
