//! A configuration as a systemd unit that counts as started once the
//! engine answers its health check, within a timeout that covers the load
//! time the trial measured; every value quoted as systemd reads it.

use super::launch::{Launch, PORT};

/// The unit for `launch`, described as `description`, whose start may take
/// `timeout` seconds.
pub fn unit(launch: &Launch, description: &str, timeout: u64) -> String {
    let mut unit = format!(
        "[Unit]\nDescription={}\nAfter=network-online.target\nWants=network-online.target\n\n[Service]\n",
        systemd_escape(description, false)
    );
    for (k, v) in &launch.env {
        // systemd expands `$` in command lines, never in Environment=.
        unit.push_str(&format!("Environment={}\n", systemd_word(&format!("{k}={v}"), false)));
    }
    if launch.mlock() {
        // A locked model needs the lock limit lifted, or mlock fails.
        unit.push_str("LimitMEMLOCK=infinity\n");
    }
    let exec: Vec<String> = std::iter::once(&launch.program)
        .chain(&launch.args)
        .map(|a| systemd_word(a, true))
        .collect();
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
    unit
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
    use super::super::recipe;

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
}
