//! llama.cpp's own choice of settings for a model and the memory free now
//! (`llama-fit-params`, built beside `llama-server`): the baseline a tuned
//! configuration has to beat, and a second opinion beside the planner's.

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::catalog::{Catalog, Settings};
use crate::profile::Profile;

/// How long the tool may take (it reads the model's header and the free
/// memory of each device, nothing more).
const FIT_TIMEOUT: Duration = Duration::from_secs(120);

/// What `llama-fit-params` chose.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fitted {
    /// Its arguments as it printed them (`-c 4096 -ngl 30 -ot …`).
    pub args: Vec<String>,
    /// Those of them the catalog names and accepts, as settings.
    pub settings: Settings,
}

/// The tool beside the profile's `llama-server`, if it was built.
fn tool(profile: &Profile) -> Option<std::path::PathBuf> {
    let path = profile.binary.with_file_name("llama-fit-params");
    path.is_file().then_some(path)
}

/// What llama.cpp would choose for `model` with `settings` fixed; `None`
/// where the profile's build has no `llama-fit-params`.
pub async fn fitted(
    profile: &Profile,
    model: &Path,
    settings: &Settings,
) -> Result<Option<Fitted>, String> {
    let Some(tool) = tool(profile) else { return Ok(None) };
    // The profile's own catalog: with the words its build takes.
    let catalog = profile.catalog();
    let rendered = catalog.render(settings).map_err(|e| e.to_string())?;
    let mut command = tokio::process::Command::new(&tool);
    command.arg("-m").arg(model).args(&rendered.args).envs(&rendered.env);
    if !profile.library_path.is_empty() {
        let joined = std::env::join_paths(&profile.library_path).map_err(|e| e.to_string())?;
        command.env("LD_LIBRARY_PATH", joined);
    }
    command.stdin(std::process::Stdio::null()).kill_on_drop(true);
    let out = tokio::time::timeout(FIT_TIMEOUT, command.output())
        .await
        .map_err(|_| format!("{} took over {} s", tool.display(), FIT_TIMEOUT.as_secs()))?
        .map_err(|e| format!("{}: {e}", tool.display()))?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        let last = said.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(format!("llama-fit-params failed ({}): {last}", out.status));
    }
    let args = printed_args(&String::from_utf8_lossy(&out.stdout))?;
    Ok(Some(Fitted { settings: as_settings(&catalog, &args), args }))
}

/// The arguments of the command line the tool prints last. It prints it
/// for a shell: an `-ot` list comes in double quotes.
fn printed_args(printed: &str) -> Result<Vec<String>, String> {
    let line = printed.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
    shlex::split(line).ok_or_else(|| format!("llama-fit-params printed no command line: {line}"))
}

/// The arguments the catalog knows by their flags, each kept only where
/// the catalog accepts its value (`-ngl -1`, "as many as fit", is not a
/// count a study can set).
pub fn as_settings(catalog: &Catalog, args: &[String]) -> Settings {
    let mut settings = Settings::new();
    for pair in args.windows(2) {
        let Some(param) = catalog.params.iter().find(|p| p.flag == pair[0]) else { continue };
        let one: Settings = [(param.name.to_string(), pair[1].clone())].into();
        if catalog.render(&one).is_ok() {
            settings.extend(one);
        }
    }
    settings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_printed_command_line_is_read_as_a_shell_would() {
        // As llama-fit-params printed it for a MoE model on an H100, with
        // most of the GPU kept free (`--fit-target`).
        let printed = "load: …\n-c 4096 -ngl 9 -ot \"blk\\.5\\.ffn_(gate|up|gate_up|down).*=CPU,\
                       blk\\.6\\.ffn_(up|down|gate_up|gate)_(ch|)exps=CPU\"\n";
        let args = printed_args(printed).unwrap();
        assert_eq!(args.len(), 6, "{args:?}");
        assert_eq!(
            args[5],
            "blk\\.5\\.ffn_(gate|up|gate_up|down).*=CPU,blk\\.6\\.ffn_(up|down|gate_up|gate)_(ch|)exps=CPU"
        );
        let s = as_settings(&Catalog::llama_server(), &args);
        assert_eq!(s["n_gpu_layers"], "9");
        assert!(s["override_tensor"].starts_with("blk\\.5\\."), "{s:?}");
        assert!(printed_args("-ot \"unclosed\n").is_err());
    }

    #[test]
    fn fitted_arguments_read_as_settings() {
        let args: Vec<String> = "-c 8192 -ngl 30 -ot blk\\.2[0-9]\\.ffn_.*_exps=CPU -ts 3,1"
            .split(' ')
            .map(String::from)
            .collect();
        let s = as_settings(&Catalog::llama_server(), &args);
        assert_eq!(s["ctx_size"], "8192");
        assert_eq!(s["n_gpu_layers"], "30");
        assert_eq!(s["override_tensor"], "blk\\.2[0-9]\\.ffn_.*_exps=CPU");
        assert_eq!(s["tensor_split"], "3,1");
        let auto: Vec<String> = ["-c", "4096", "-ngl", "-1"].map(String::from).to_vec();
        let s = as_settings(&Catalog::llama_server(), &auto);
        assert!(!s.contains_key("n_gpu_layers"), "-1 is not a count a study can set");
    }
}
