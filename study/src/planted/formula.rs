//! What the planted worlds' formulas read of a configuration: a setting's
//! text or number, the bytes a cache type takes, the divergence it costs,
//! and a gibibyte.

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
