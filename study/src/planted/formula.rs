//! What the planted worlds' formulas read of a configuration: a setting's
//! text or number, the bytes a cache type takes, the divergence it costs,
//! a gibibyte, and the requests a server keeps within the load probe's
//! service objective.

use engine_bridge::Settings;

pub fn get<'a>(s: &'a Settings, k: &str) -> &'a str {
    s.get(k).map_or("", String::as_str)
}

pub fn number(s: &Settings, k: &str) -> f64 {
    get(s, k).parse().unwrap_or(0.0)
}

/// Bytes a K or V cache element takes, relative to f16.
pub fn cache_bytes(t: &str) -> f64 {
    match t {
        "q8_0" => 0.53,
        "q4_0" => 0.28,
        _ => 1.0,
    }
}

/// The KL divergence a K or V cache type adds: `q8` for `q8_0`, `q4` for
/// `q4_0`, none for f16.
pub fn divergence(t: &str, q8: f64, q4: f64) -> f64 {
    match t {
        "q8_0" => q8,
        "q4_0" => q4,
        _ => 0.0,
    }
}

pub const GIB: f64 = (1u64 << 30) as f64;

/// The service objective of the serving worlds: a token at least every
/// 60 ms.
const SLOWEST: f64 = 1000.0 / 60.0;

/// Of `held` sequences, how many run (fewer while each one's tokens come
/// slower than the objective, at `speed` tokens a second with that many
/// running), and the requests of `output` tokens a second they finish
/// within it (none if even one alone is too slow).
pub fn within_objective(held: f64, speed: impl Fn(f64) -> f64, output: f64) -> (f64, f64) {
    let mut running = held;
    while running > 1.0 && speed(running) < SLOWEST {
        running -= 1.0;
    }
    let goodput = if speed(running) < SLOWEST { 0.0 } else { running * speed(running) / output };
    (running, goodput)
}
