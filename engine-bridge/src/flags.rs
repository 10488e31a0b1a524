//! Engines rename their flags between builds (llama-server's `--no-mmap`
//! and `--mlock` became `--load-mode`, `--draft-max` became
//! `--spec-draft-n-max`). Tunebook reads the flags a binary accepts from
//! its own `--help` and writes each setting the way that binary spells it,
//! or says which flag it lacks before anything is launched.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, SystemTime};

use crate::failure::{Failure, FailureKind};
use crate::process::LaunchSpec;

/// The flags a binary lists in its `--help`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlagSet(BTreeSet<String>);

impl FlagSet {
    /// Collects every `-x`/`--xyz` that starts a line or follows a comma,
    /// the way llama.cpp's tools (and most CLIs) list their options.
    pub fn from_help(help: &str) -> Self {
        let mut flags = BTreeSet::new();
        for line in help.lines() {
            // Listed only to say they are gone.
            if line.contains("has been removed") {
                continue;
            }
            for part in line.trim_start().split(", ") {
                let word = part.split_whitespace().next().unwrap_or_default();
                let is_flag = word.starts_with('-')
                    && word
                        .trim_start_matches('-')
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_alphabetic());
                if is_flag {
                    flags.insert(word.trim_end_matches(',').to_string());
                }
                if !is_flag {
                    break;
                }
            }
        }
        Self(flags)
    }

    /// Whether the binary listed this flag.
    pub fn supports(&self, flag: &str) -> bool {
        self.0.contains(flag)
    }

    /// Whether anything was learned (a binary without `--help` gives nothing,
    /// and then nothing is rewritten or refused).
    pub fn is_known(&self) -> bool {
        !self.0.is_empty()
    }
}

type Cache = HashMap<(PathBuf, Option<SystemTime>), FlagSet>;
static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// The flags `binary --help` lists, asked once per binary (and again when
/// the file changes).
pub async fn flags_of(spec: &LaunchSpec) -> FlagSet {
    let modified = std::fs::metadata(&spec.program).and_then(|m| m.modified()).ok();
    let key = (spec.program.clone(), modified);
    if let Some(f) = CACHE.lock().expect("flag cache").get(&key) {
        return f.clone();
    }
    let flags = read_help(&spec.program, &spec.env)
        .await
        .map(|h| FlagSet::from_help(&h))
        .unwrap_or_default();
    CACHE.lock().expect("flag cache").insert(key, flags.clone());
    flags
}

async fn read_help(
    program: &Path,
    env: &std::collections::BTreeMap<String, String>,
) -> Option<String> {
    let mut cmd = crate::children::command(program);
    cmd.arg("--help").envs(env);
    let out = crate::children::output(cmd, Duration::from_secs(10), None).await.ok()?;
    Some(format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// Rewrites llama-server arguments for the flags this binary has.
pub fn adapt_llama_server(args: &[String], flags: &FlagSet) -> Result<Vec<String>, Failure> {
    if !flags.is_known() {
        return Ok(args.to_vec());
    }
    let refuse = |flag: &str| {
        let why =
            format!("this llama-server does not accept `{flag}` (its --help does not list it)");
        Failure::new(FailureKind::Rejected, why)
    };
    let renamed = [("--draft-max", "--spec-draft-n-max"), ("--draft-min", "--spec-draft-n-min")];
    let (mut out, mut mlock, mut no_mmap) = (Vec::new(), false, false);
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        let value = args.get(i + 1).filter(|v| !v.starts_with('-') || v.parse::<f64>().is_ok());
        i += 1;
        if !arg.starts_with('-') || flags.supports(arg) {
            out.push(arg.to_string());
            continue;
        }
        match arg {
            "--mlock" => mlock = true,
            "--no-mmap" => no_mmap = true,
            // Builds without --fit do not refit settings on their own.
            "--fit" => i += usize::from(value.is_some()),
            _ => match renamed.iter().find(|(old, new)| *old == arg && flags.supports(new)) {
                Some((_, new)) => out.push(new.to_string()),
                None => return Err(refuse(arg)),
            },
        }
    }
    if mlock || no_mmap {
        let mode_flag = ["--load-mode", "-lm"].into_iter().find(|f| flags.supports(f));
        let Some(mode_flag) = mode_flag else {
            return Err(refuse(if mlock { "--mlock" } else { "--no-mmap" }));
        };
        let mode = match (mlock, no_mmap) {
            (true, false) => "mmap+mlock",
            (false, true) => "none",
            _ => "mlock",
        };
        out.extend([mode_flag.to_string(), mode.to_string()]);
    }
    Ok(out)
}

/// A launch spec rewritten for the flags its binary accepts (llama-server
/// only: other kinds are launched through interpreters whose own `--help`
/// says nothing of the server's flags).
pub async fn adapt(mut spec: LaunchSpec) -> Result<LaunchSpec, Failure> {
    if spec.api != crate::profile::Api::LlamaServer {
        return Ok(spec);
    }
    let flags = flags_of(&spec).await;
    spec.args = adapt_llama_server(&spec.args, &flags)?;
    // Verbosity 4 logs what the engine runs (threads, batch sizes, cache
    // types, flash attention, layers offloaded): see `crate::applied`.
    let chosen = ["-lv", "--verbosity", "--log-verbosity"];
    if flags.supports("-lv") && !spec.args.iter().any(|a| chosen.contains(&a.as_str())) {
        spec.args.extend(["-lv".to_string(), "4".to_string()]);
    }
    // Its Prometheus page says how many requests wait for a slot: what a
    // load probe names as binding (see `crate::probes::load_watch`).
    if flags.supports("--metrics") && !spec.args.iter().any(|a| a == "--metrics") {
        spec.args.push("--metrics".to_string());
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEW: &str = "-t,    --threads N      threads\n-c,    --ctx-size N   ctx\n\
        -lm,   --load-mode MODE  mode\n          - auto: mmap\n-fit,  --fit [on|off]  fit\n\
        --spec-draft-n-max N    draft\n-ctk,  --cache-type-k TYPE  k\n\
        --draft, --draft-n, --draft-max N       the argument has been removed. use --spec-draft-n-max\n";
    const OLD: &str = "-t,    --threads N\n-c,    --ctx-size N\n--mlock   keep\n--no-mmap  do not map\n\
        --draft-max, --draft, --draft-n N   draft\n-ctk,  --cache-type-k TYPE\n";

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn reads_flags_from_help() {
        let f = FlagSet::from_help(NEW);
        for flag in ["-t", "--threads", "-lm", "--load-mode", "--fit", "--spec-draft-n-max", "-ctk"]
        {
            assert!(f.supports(flag), "{flag}");
        }
        assert!(!f.supports("-") && !f.supports("--mlock"));
        assert!(!f.supports("--draft-max"), "a flag listed as removed is not supported");
        assert!(FlagSet::from_help(OLD).supports("--draft"));
    }

    #[test]
    fn new_builds_get_load_mode_and_spec_draft() {
        let f = FlagSet::from_help(NEW);
        let a = adapt_llama_server(&args("--fit off -t 4 --mlock --draft-max 8"), &f).unwrap();
        assert_eq!(a, args("--fit off -t 4 --spec-draft-n-max 8 --load-mode mmap+mlock"));
        let a = adapt_llama_server(&args("--no-mmap --mlock"), &f).unwrap();
        assert_eq!(a, args("--load-mode mlock"));
        let a = adapt_llama_server(&args("-c 4096 --no-mmap"), &f).unwrap();
        assert_eq!(a, args("-c 4096 --load-mode none"));
    }

    #[test]
    fn old_builds_keep_their_flags_and_lose_fit() {
        let f = FlagSet::from_help(OLD);
        let a = adapt_llama_server(&args("--fit off -t 4 --mlock --no-mmap --draft-max 8"), &f)
            .unwrap();
        assert_eq!(a, args("-t 4 --mlock --no-mmap --draft-max 8"));
        let err = adapt_llama_server(&args("-t 4 --numa distribute"), &f).unwrap_err();
        assert_eq!(err.kind, FailureKind::Rejected);
        assert!(err.message.contains("does not accept `--numa`"), "{}", err.message);
    }

    #[test]
    fn an_unknown_binary_is_left_alone() {
        let a = adapt_llama_server(&args("--whatever 1"), &FlagSet::default()).unwrap();
        assert_eq!(a, args("--whatever 1"));
    }
}
