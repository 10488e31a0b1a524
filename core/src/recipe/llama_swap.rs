//! A configuration as a llama-swap entry: the `models:` block llama-swap's
//! config.yaml takes, its command on the port llama-swap chooses
//! (`${PORT}`), written by a YAML serializer, the command line quoted as
//! llama-swap splits it (POSIX shell words).

use std::collections::BTreeMap;

use serde::Serialize;

use super::launch::Launch;

/// One model of llama-swap's config.
#[derive(Serialize)]
struct Entry<'a> {
    name: &'a str,
    description: &'a str,
    cmd: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    env: Vec<String>,
    #[serde(rename = "checkEndpoint")]
    check_endpoint: &'static str,
}

#[derive(Serialize)]
struct Config<'a> {
    models: BTreeMap<&'a str, Entry<'a>>,
}

/// The entry that serves `launch` as model `id`; an error where a value
/// holds `${`, which llama-swap would read as one of its macros (it has
/// no way to write it literally), or a line break (it reads the command
/// line by line, dropping lines that start as comments).
pub fn entry(launch: &Launch, id: &str, description: &str, timeout: u64) -> Result<String, String> {
    let words = std::iter::once(&launch.program).chain(&launch.args);
    let env_words = launch.env.iter().flat_map(|(k, v)| [k, v]);
    if let Some(w) = words.chain(env_words).find(|w| w.contains("${") || w.contains(['\n', '\r'])) {
        let why = if w.contains("${") {
            "`${`, which llama-swap reads as a macro"
        } else {
            "a line break"
        };
        return Err(format!("{w:?} holds {why}"));
    }
    let mut args = launch.args.clone();
    super::launch::set_port(&mut args, "${PORT}");
    // `${PORT}` stays a word of its own for llama-swap to fill in.
    let quote = |s: &str| match s {
        "${PORT}" => s.to_string(),
        _ => shlex::try_quote(s).map(|q| q.into_owned()).unwrap_or_else(|_| s.into()),
    };
    let cmd: Vec<String> =
        std::iter::once(&launch.program).chain(&args).map(|a| quote(a)).collect();
    let entry = Entry {
        name: id,
        description,
        cmd: cmd.join(" "),
        env: launch.env.iter().map(|(k, v)| format!("{k}={v}")).collect(),
        check_endpoint: "/health",
    };
    let yaml = serde_norway::to_string(&Config { models: [(id, entry)].into() })
        .map_err(|e| e.to_string())?;
    Ok(format!(
        "# llama-swap waits healthCheckTimeout seconds (a global setting) for a\n\
         # model to load: at least {timeout} for this one.\n{yaml}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(args: &[&str]) -> Launch {
        Launch {
            program: "/opt/llama.cpp/llama-server".into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: vec![("CUDA_VISIBLE_DEVICES".into(), "0".into())],
        }
    }

    #[test]
    fn an_entry_reads_back_as_the_same_command_on_llama_swaps_port() {
        let l = launch(&["-m", "/models/my model.gguf", "--port", "8080", "--alias", "a'b #c: d"]);
        let text = entry(&l, "tiny: llama", "study 1, trial 2", 285).unwrap();
        let config: serde_norway::Value = serde_norway::from_str(&text).unwrap();
        let model = &config["models"]["tiny: llama"];
        let cmd = model["cmd"].as_str().unwrap();
        let words = shlex::split(cmd).unwrap();
        assert_eq!(words[0], "/opt/llama.cpp/llama-server");
        assert_eq!(words[2], "/models/my model.gguf");
        assert_eq!(&words[3..5], ["--port", "${PORT}"]);
        assert_eq!(words[6], "a'b #c: d", "a value stays one word, whatever it holds");
        assert_eq!(model["env"][0].as_str(), Some("CUDA_VISIBLE_DEVICES=0"));
        assert_eq!(model["checkEndpoint"].as_str(), Some("/health"));
        assert!(text.contains("at least 285"));
    }

    #[test]
    fn a_value_llama_swap_would_expand_is_refused() {
        let l = launch(&["--alias", "${env.HOME}"]);
        assert!(entry(&l, "m", "d", 60).unwrap_err().contains("${env.HOME}"));
        let l = launch(&["--alias", "x\n# y"]);
        assert!(entry(&l, "m", "d", 60).unwrap_err().contains("line break"));
    }
}
