//! A configuration as a docker compose service: llama.cpp's own server
//! image (its CUDA build where layers go to a GPU) with the same
//! arguments, each model file mounted read-only, listening inside the
//! container on every address and published on this machine's loopback
//! only, healthy once the server answers `/health`. Written by a YAML
//! serializer; every `$` doubled, as compose reads `$` as a variable.

use serde::Serialize;

use super::launch::{Launch, PORT};

/// llama.cpp's published server images.
const IMAGE: &str = "ghcr.io/ggml-org/llama.cpp:server";
const IMAGE_CUDA: &str = "ghcr.io/ggml-org/llama.cpp:server-cuda";

/// Where the files a command names are mounted in the container.
const MOUNTS: &str = "/models";

#[derive(Serialize)]
struct File {
    services: std::collections::BTreeMap<String, Service>,
}

#[derive(Serialize)]
struct Service {
    image: &'static str,
    command: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    environment: Vec<String>,
    volumes: Vec<Volume>,
    ports: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ulimits: Option<Ulimits>,
    healthcheck: Health,
    restart: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    deploy: Option<serde_json::Value>,
}

/// A bind mount in compose's long form (a path may hold a `:`).
#[derive(Serialize)]
struct Volume {
    #[serde(rename = "type")]
    kind: &'static str,
    source: String,
    target: String,
    read_only: bool,
}

#[derive(Serialize)]
struct Ulimits {
    memlock: i64,
}

#[derive(Serialize)]
struct Health {
    test: Vec<String>,
    interval: &'static str,
    start_period: String,
    retries: u32,
}

/// A compose service name from a model's: lowercase letters, digits, `-`
/// and `_` (what compose accepts), anything else as `-`.
pub fn service_name(model: &str) -> String {
    let name: String = model
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-' | '_') => c,
            _ => '-',
        })
        .collect();
    let name = name.trim_matches('-');
    if name.is_empty() { "llama-server".into() } else { name.to_string() }
}

/// Whether the command places layers on a GPU.
fn on_gpu(launch: &Launch) -> bool {
    let layers = launch.value_of("-ngl").or_else(|| launch.value_of("--n-gpu-layers"));
    layers.is_some_and(|n| n.trim() != "0")
}

/// The service `name` that runs `launch`, whose start may take `timeout`
/// seconds; an error where the program is not llama.cpp's server (no
/// image is known for it).
pub fn service(launch: &Launch, name: &str, timeout: u64) -> Result<String, String> {
    let program = std::path::Path::new(&launch.program);
    if program.file_name().and_then(|f| f.to_str()) != Some("llama-server") {
        return Err(format!("no container image is known for {:?}", launch.program));
    }
    let mut volumes: Vec<Volume> = Vec::new();
    let mut args = Vec::new();
    for (i, a) in launch.args.iter().enumerate() {
        let after_host = i > 0 && launch.args[i - 1] == "--host";
        let path = std::path::Path::new(a);
        let word = match (path.parent(), path.file_name()) {
            _ if after_host => "0.0.0.0".to_string(),
            // A file the command names: its folder, mounted.
            (Some(dir), Some(file)) if a.starts_with('/') => {
                let source = dir.to_string_lossy().into_owned();
                let at = match volumes.iter().position(|v| v.source == source) {
                    Some(at) => at,
                    None => {
                        let target = format!("{MOUNTS}/{}", volumes.len());
                        volumes.push(Volume { kind: "bind", source, target, read_only: true });
                        volumes.len() - 1
                    }
                };
                format!("{}/{}", volumes[at].target, file.to_string_lossy())
            }
            _ => a.clone(),
        };
        args.push(word);
    }
    let host_given = launch.args.iter().any(|a| a == "--host");
    if !host_given {
        args.extend(["--host".into(), "0.0.0.0".into()]);
    }
    let dollars = |s: &str| s.replace('$', "$$");
    let gpu = on_gpu(launch);
    let service = Service {
        image: if gpu { IMAGE_CUDA } else { IMAGE },
        command: args.iter().map(|a| dollars(a)).collect(),
        environment: launch.env.iter().map(|(k, v)| dollars(&format!("{k}={v}"))).collect(),
        volumes: volumes.into_iter().map(|v| Volume { source: dollars(&v.source), ..v }).collect(),
        ports: vec![format!("127.0.0.1:{PORT}:{PORT}")],
        ulimits: launch.mlock().then_some(Ulimits { memlock: -1 }),
        healthcheck: Health {
            test: ["CMD", "curl", "-f", &format!("http://localhost:{PORT}/health")]
                .map(String::from)
                .to_vec(),
            interval: "10s",
            start_period: format!("{timeout}s"),
            retries: 3,
        },
        restart: "unless-stopped",
        deploy: gpu.then(|| {
            serde_json::json!({ "resources": { "reservations": { "devices": [
                { "driver": "nvidia", "count": "all", "capabilities": ["gpu"] }
            ] } } })
        }),
    };
    let file = File { services: [(name.to_string(), service)].into() };
    serde_norway::to_string(&file).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(program: &str, args: &[&str]) -> Launch {
        Launch {
            program: program.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: vec![("GGML_X".into(), "a$b".into())],
        }
    }

    #[test]
    fn a_service_runs_the_same_arguments_on_the_files_it_mounts() {
        let l = launch(
            "/opt/llama.cpp/llama-server",
            &[
                "-m",
                "/data/my:models/m.gguf",
                "--host",
                "127.0.0.1",
                "--port",
                "8080",
                "-ngl",
                "99",
                "--mlock",
                "-md",
                "/data/my:models/d.gguf",
            ],
        );
        let text = service(&l, "llama", 285).unwrap();
        let file: serde_norway::Value = serde_norway::from_str(&text).unwrap();
        let s = &file["services"]["llama"];
        assert_eq!(s["image"].as_str(), Some(IMAGE_CUDA), "layers on a GPU");
        let command: Vec<&str> =
            s["command"].as_sequence().unwrap().iter().map(|w| w.as_str().unwrap()).collect();
        assert_eq!(
            command,
            [
                "-m",
                "/models/0/m.gguf",
                "--host",
                "0.0.0.0",
                "--port",
                "8080",
                "-ngl",
                "99",
                "--mlock",
                "-md",
                "/models/0/d.gguf"
            ]
        );
        assert_eq!(s["volumes"][0]["source"].as_str(), Some("/data/my:models"));
        assert_eq!(s["volumes"][0]["read_only"].as_bool(), Some(true));
        assert_eq!(s["ports"][0].as_str(), Some("127.0.0.1:8080:8080"), "loopback only");
        assert_eq!(s["environment"][0].as_str(), Some("GGML_X=a$$b"), "compose reads `$$` as `$`");
        assert_eq!(s["ulimits"]["memlock"].as_i64(), Some(-1));
        assert_eq!(s["healthcheck"]["start_period"].as_str(), Some("285s"));
        assert_eq!(
            s["deploy"]["resources"]["reservations"]["devices"][0]["driver"].as_str(),
            Some("nvidia")
        );
    }

    #[test]
    fn a_cpu_service_listens_inside_on_every_address_and_an_unknown_program_is_refused() {
        let l = launch("/opt/llama-server", &["-m", "/srv/m.gguf", "-ngl", "0"]);
        let file: serde_norway::Value =
            serde_norway::from_str(&service(&l, "x", 60).unwrap()).unwrap();
        let s = &file["services"]["x"];
        assert_eq!(s["image"].as_str(), Some(IMAGE));
        assert!(s["deploy"].is_null());
        let command = s["command"].as_sequence().unwrap();
        assert_eq!(command[command.len() - 2].as_str(), Some("--host"));
        assert_eq!(command[command.len() - 1].as_str(), Some("0.0.0.0"));
        assert!(service(&launch("/usr/bin/vllm", &[]), "x", 60).is_err());
    }

    #[test]
    fn a_service_name_is_what_compose_accepts() {
        assert_eq!(service_name("Qwen3 30B-A3B (Q4_K_M)"), "qwen3-30b-a3b--q4_k_m");
        assert_eq!(service_name("***"), "llama-server");
    }
}
