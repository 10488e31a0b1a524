//! A stand-in for llama-server, for tests only: it fails on demand in the
//! ways a real engine does only by accident (crash, hang, slow load, out of
//! memory, a rejected flag, a taken port, ignoring SIGTERM).
//!
//! It takes llama-server's `--host`/`--port` and ignores other flags, plus
//! `--fake MODE`, `--fake-ms N` and `--fake-oom-ctx N` (out of memory when
//! `-c` is above N, for studies with a memory boundary), `--fake-log-kb N`
//! (N KiB of output while loading, ending with `end of the noise`),
//! `--fake-tps-per-thread N` (decode at N tokens a second per `-t` thread,
//! prefill 6.4 times that: a speed a study can move), `--fake-taken-once
//! PATH` (the port is taken when no file is at PATH, which it then
//! writes: the first launch fails so, the next ones run). Modes:
//! `ok` (healthy, answers completions), `crash-on-load`, `oom`, `reject`,
//! `port-taken`, `slow-load` (503 for N ms), `never-ready`, `hang-probe`,
//! `crash-in-probe`, `ignore-sigterm`, `spawn-child` (a grandchild in the
//! same process group; its pid is printed as `child pid N`), `thinker` (a
//! thinking model that says nothing of it in its template: it reasons in
//! `<think>` for 100 tokens before it answers `Paris`, so a short budget
//! cuts it off mid-thought).
//!
//! It also answers `/v1/chat/completions` at once with eight streamed
//! tokens: a stub endpoint for the load generator's own ceiling
//! (`examples/bench_load.rs`).
//!
//! Its HTTP is the least that reqwest accepts: one request per connection.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

struct Args {
    host: String,
    port: u16,
    mode: String,
    ms: u64,
    /// `-c`: with `--fake-oom-ctx N`, a context above N runs out of memory.
    ctx: Option<u64>,
    oom_ctx: Option<u64>,
    log_kb: u64,
    /// Prints bytes that are not UTF-8 and a line of a megabyte.
    bad_bytes: bool,
    /// Decode speed: this many tokens a second per thread, where given.
    per_thread: Option<(f64, f64)>,
    /// The port is taken while no file is here (`--fake-taken-once`).
    taken_once: Option<String>,
}

fn parse_args() -> Args {
    let argv: Vec<String> = std::env::args().collect();
    let value =
        |flag: &str| argv.iter().position(|a| a == flag).and_then(|i| argv.get(i + 1)).cloned();
    Args {
        host: value("--host").unwrap_or_else(|| "127.0.0.1".into()),
        port: value("--port").and_then(|p| p.parse().ok()).unwrap_or(8080),
        mode: value("--fake").unwrap_or_else(|| "ok".into()),
        ms: value("--fake-ms").and_then(|p| p.parse().ok()).unwrap_or(1000),
        ctx: value("-c").and_then(|p| p.parse().ok()),
        oom_ctx: value("--fake-oom-ctx").and_then(|p| p.parse().ok()),
        log_kb: value("--fake-log-kb").and_then(|p| p.parse().ok()).unwrap_or(0),
        bad_bytes: argv.iter().any(|a| a == "--fake-bad-bytes"),
        per_thread: value("--fake-tps-per-thread")
            .and_then(|p| p.parse().ok())
            .zip(value("-t").and_then(|t| t.parse().ok())),
        taken_once: value("--fake-taken-once"),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    if std::env::args().any(|a| a == "--help") {
        println!("-m,    --model FNAME    model path (ignored)");
        println!("--host HOST            address to listen on");
        println!("--port PORT            port to listen on");
        println!("-t,    --threads N      CPU threads (ignored)");
        println!("-c,    --ctx-size N     context size (see --fake-oom-ctx)");
        println!("-b,    --batch-size N   logical batch size (ignored)");
        println!("-ub,   --ubatch-size N  physical batch size (ignored)");
        println!("-ctk,  --cache-type-k TYPE  K cache type (ignored)");
        println!("--fake MODE            how to misbehave");
        println!("--fake-oom-ctx N       run out of memory when -c is above N");
        println!("--fake-ms N            delay for slow modes");
        println!("--fake-log-kb N        print N KiB while loading");
        println!("--fake-bad-bytes       print bytes that are not UTF-8, and a 1 MiB line");
        println!("--fake-tps-per-thread N  decode N tok/s per -t thread");
        println!("--fake-taken-once PATH  the port is taken while PATH is missing");
        return;
    }
    let args = parse_args();
    eprintln!("fake engine: mode {} on {}:{}", args.mode, args.host, args.port);
    eprintln!("load_tensors: loading model");
    for i in 0..args.log_kb * 16 {
        // 64 bytes a line.
        eprintln!("load_tensors: noise line {i:>12} ..............................");
    }
    if args.log_kb > 0 {
        eprintln!("end of the noise");
    }
    if args.bad_bytes {
        use std::io::Write;
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(b"load_tensors: name \xff\xfe\xc3 is not text\n");
        let _ = err.write_all(&vec![b'#'; 1 << 20]);
        let _ = err.write_all(b"\nafter the bad bytes\n");
    }
    let too_big = matches!((args.ctx, args.oom_ctx), (Some(c), Some(limit)) if c > limit);
    // Made only by the first launch: the later ones find it there.
    let taken = args
        .taken_once
        .as_ref()
        .is_some_and(|p| std::fs::OpenOptions::new().write(true).create_new(true).open(p).is_ok());
    let mode = match (too_big, taken) {
        (true, _) => "oom",
        (false, true) => "port-taken",
        (false, false) => args.mode.as_str(),
    };
    match mode {
        "crash-on-load" => {
            eprintln!("llama_model_load: something went badly wrong");
            std::process::abort();
        }
        "oom" => {
            eprintln!(
                "ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 137438953472"
            );
            eprintln!("llama_model_load: error loading model: unable to allocate CPU buffer");
            std::process::exit(1);
        }
        "reject" => {
            eprintln!("error while handling argument \"-ctk\": Unsupported cache type: q3_fake");
            eprintln!();
            eprintln!("usage:");
            eprintln!("-ctk,  --cache-type-k TYPE              KV cache data type for K");
            std::process::exit(1);
        }
        "port-taken" => {
            eprintln!(
                "start: couldn't bind HTTP server socket, hostname: {}, port: {}",
                args.host, args.port
            );
            std::process::exit(1);
        }
        "spawn-child" => {
            // Left running on purpose: tests check that stopping the engine's
            // process group takes it too.
            #[allow(clippy::zombie_processes)]
            let child = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--fake", "never-ready", "--port", "0"])
                .spawn()
                .unwrap();
            eprintln!("child pid {}", child.id());
        }
        _ => {}
    }
    let mut term =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).unwrap();
    let listener = TcpListener::bind((args.host.as_str(), args.port)).await.unwrap();
    let started = Instant::now();
    // llama-server's line once the model is loaded, which the bridge waits
    // for (briefly) before it reads what the engine says it runs.
    let listening = format!(
        "main: server is listening on http://{}:{} - starting the main loop",
        args.host,
        listener.local_addr().map_or(args.port, |a| a.port())
    );
    match args.mode.as_str() {
        "never-ready" => {}
        "slow-load" => {
            let ms = args.ms;
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                eprintln!("{listening}");
            });
        }
        _ => eprintln!("{listening}"),
    }
    loop {
        tokio::select! {
            conn = listener.accept() => {
                let Ok((stream, _)) = conn else { continue };
                let mode = args.mode.clone();
                let ready = match mode.as_str() {
                    "never-ready" => false,
                    "slow-load" => started.elapsed() >= Duration::from_millis(args.ms),
                    _ => true,
                };
                let decode = args.per_thread.map_or(1000.0, |(tps, threads)| tps * threads);
                tokio::spawn(serve(stream, mode, ready, decode));
            }
            _ = term.recv() => {
                if args.mode != "ignore-sigterm" {
                    eprintln!("fake engine: SIGTERM, exiting");
                    return;
                }
                eprintln!("fake engine: ignoring SIGTERM");
            }
        }
    }
}

/// `decode`: the tokens a second completions report.
async fn serve(mut stream: TcpStream, mode: String, ready: bool, decode: f64) {
    let Some((path, body)) = read_request(&mut stream).await else {
        return;
    };
    let json = |status: &str, body: &str| {
        format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    if !ready {
        let busy =
            json("503 Service Unavailable", r#"{"error":{"code":503,"message":"Loading model"}}"#);
        let _ = stream.write_all(busy.as_bytes()).await;
        return;
    }
    let reply = match path.as_str() {
        "/health" => json("200 OK", r#"{"status":"ok"}"#),
        "/props" => json(
            "200 OK",
            r#"{"default_generation_settings":{"n_ctx":2048},"total_slots":1,"build_info":"fake"}"#,
        ),
        "/tokenize" => {
            let tokens: Vec<String> = (0..512).map(|i| (i % 250 + 3).to_string()).collect();
            json("200 OK", &format!(r#"{{"tokens":[{}]}}"#, tokens.join(",")))
        }
        "/completion" => match mode.as_str() {
            "hang-probe" => return std::future::pending().await,
            "crash-in-probe" => {
                eprintln!("GGML_ASSERT failed: fake crash during decode");
                std::process::abort();
            }
            "thinker" => return stream_thoughts(stream, &body).await,
            _ => return stream_completion(stream, decode).await,
        },
        "/v1/chat/completions" => return stream_chat(stream).await,
        _ => json("404 Not Found", r#"{"error":"not found"}"#),
    };
    let _ = stream.write_all(reply.as_bytes()).await;
}

/// Reads one request; returns its path and body.
async fn read_request(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        let length = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string())
            })
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(0);
        while buf.len() < end + 4 + length {
            let n = stream.read(&mut chunk).await.ok()?;
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let path = head.split_whitespace().nth(1)?.to_string();
        return Some((path, buf[end + 4..].to_vec()));
    }
}

/// Sends 16 tokens, one event each, then the final event with timings:
/// decode at `decode` tokens a second, prefill at 6.4 times that.
async fn stream_completion(mut stream: TcpStream, decode: f64) {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
    if stream.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    let n = 16;
    for _ in 0..n {
        let _ = stream.write_all(b"data: {\"content\":\"a\",\"stop\":false}\n\n").await;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let prefill = 6.4 * decode;
    let (prompt_ms, predicted_ms) = (64.0 * 1000.0 / prefill, f64::from(n) * 1000.0 / decode);
    let last = format!(
        "data: {{\"content\":\"\",\"stop\":true,\"timings\":{{\"prompt_n\":64,\"prompt_ms\":{prompt_ms},\
         \"prompt_per_second\":{prefill},\"predicted_n\":{n},\"predicted_ms\":{predicted_ms},\"predicted_per_second\":{decode}}}}}\n\n"
    );
    let _ = stream.write_all(last.as_bytes()).await;
}

/// A thinking model's reply: 100 tokens of thought, then its answer;
/// cut off after the request's `n_predict` tokens.
async fn stream_thoughts(mut stream: TcpStream, body: &[u8]) {
    let asked: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let n_predict = asked["n_predict"].as_u64().unwrap_or(16) as usize;
    let mut pieces = vec!["<think>"];
    pieces.extend(std::iter::repeat_n(" hmm", 98));
    pieces.extend(["</think>", " Paris", "."]);
    pieces.truncate(n_predict);
    let mut out = String::from(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n",
    );
    for piece in &pieces {
        out.push_str(&format!("data: {{\"content\":{piece:?},\"stop\":false}}\n\n"));
    }
    let n = pieces.len();
    out.push_str(&format!(
        "data: {{\"content\":\"\",\"stop\":true,\"timings\":{{\"prompt_n\":16,\"prompt_ms\":1.0,\
         \"prompt_per_second\":16000.0,\"predicted_n\":{n},\"predicted_ms\":{n}.0,\"predicted_per_second\":1000.0}}}}\n\n"
    ));
    let _ = stream.write_all(out.as_bytes()).await;
}

/// A chat answer of eight tokens, sent at once: what costs nothing to
/// serve, so that timing it times the client.
async fn stream_chat(mut stream: TcpStream) {
    let mut out = String::from(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n",
    );
    for _ in 0..8 {
        out.push_str("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n");
    }
    out.push_str(
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":16,\"completion_tokens\":8}}\n\ndata: [DONE]\n\n",
    );
    let _ = stream.write_all(out.as_bytes()).await;
}
