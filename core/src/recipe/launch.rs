//! A stored command read back as what to launch: the program, its
//! arguments (on the recipes' port) and its environment, and how long a
//! start may take.

/// Port the recipes serve on (the trial ran on a free port of its own).
pub const PORT: &str = "8080";

/// What to launch.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

impl Launch {
    /// A trial's stored command (`{"program", "args", "env"}`), its port
    /// made [`PORT`]; `None` for an external endpoint (nothing to run).
    pub fn from_stored(command: &str) -> Option<Self> {
        let command: serde_json::Value = serde_json::from_str(command).ok()?;
        let program = command["program"].as_str()?.to_string();
        let mut args: Vec<String> = command["args"]
            .as_array()?
            .iter()
            .filter_map(|a| a.as_str().map(str::to_string))
            .collect();
        set_port(&mut args, PORT);
        let env = command["env"]
            .as_object()
            .map(|e| {
                e.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect()
            })
            .unwrap_or_default();
        Some(Launch { program, args, env })
    }

    /// Whether it locks the model in memory (which needs the lock limit
    /// lifted).
    pub fn mlock(&self) -> bool {
        self.args.iter().any(|a| a == "--mlock" || a.ends_with("mlock"))
    }

    /// The value after `flag`, where it is given.
    pub fn value_of(&self, flag: &str) -> Option<&str> {
        let at = self.args.iter().position(|a| a == flag)?;
        self.args.get(at + 1).map(String::as_str)
    }
}

/// `args` serving on `port`: the value after `--port` replaced, or the
/// flag added where there is none.
pub fn set_port(args: &mut Vec<String>, port: &str) {
    match args.iter().position(|a| a == "--port").and_then(|at| args.get_mut(at + 1)) {
        Some(value) => *value = port.into(),
        None => args.extend(["--port".into(), port.into()]),
    }
}

/// How long a start may take, in seconds: three times the measured load
/// (`load_ms`), never under a minute; ten minutes when none was measured.
pub fn start_timeout_s(load_ms: Option<f64>) -> u64 {
    load_ms.map_or(600, |ms| ((ms / 1000.0) * 3.0).ceil().max(60.0) as u64)
}
