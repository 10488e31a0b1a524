//! Requests of drawn lengths (`workload = "synthetic"`): prompt and answer
//! lengths from normal distributions cut at one, as GuideLLM's synthetic
//! data does, for a question about lengths rather than about text.
//! Prompts are words (about four thirds of a token each in common
//! tokenizers), so their token counts are near, not exact.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::{Message, Request, Role, Workload};

/// A length's distribution, in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Length {
    pub mean: u32,
    #[serde(default)]
    pub sd: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Lengths {
    pub prompt: Length,
    pub output: Length,
}

impl Default for Lengths {
    fn default() -> Self {
        Self { prompt: Length { mean: 512, sd: 128 }, output: Length { mean: 128, sd: 32 } }
    }
}

/// The most tokens a drawn length may have.
pub const MAX_LENGTH: u32 = 1 << 17;
/// Requests drawn (then sent in a cycle).
const COUNT: usize = 256;

impl Lengths {
    pub fn error(&self) -> Option<String> {
        let bad = |l: &Length| l.mean == 0 || l.mean > MAX_LENGTH || l.sd > MAX_LENGTH;
        (bad(&self.prompt) || bad(&self.output))
            .then(|| format!("lengths: means from 1 to {MAX_LENGTH} tokens, spreads at most that"))
    }
}

fn draw(rng: &mut StdRng, l: Length) -> u32 {
    // A standard normal draw (Box–Muller).
    let (u, v): (f64, f64) = (rng.random_range(f64::MIN_POSITIVE..1.0), rng.random());
    let z = (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos();
    (f64::from(l.mean) + z * f64::from(l.sd)).round().clamp(1.0, f64::from(MAX_LENGTH)) as u32
}

/// The synthetic workload of these lengths.
pub fn workload(lengths: &Lengths) -> Workload {
    let mut rng = StdRng::seed_from_u64(20_261_125);
    let requests = (0..COUNT)
        .map(|_| {
            let words = (draw(&mut rng, lengths.prompt) * 3).div_ceil(4) as usize;
            let text: Vec<&str> = (0..words)
                .map(|_| super::builtin::WORDS[rng.random_range(0..super::builtin::WORDS.len())])
                .collect();
            Request {
                messages: vec![Message { role: Role::User, content: text.join(" ") }],
                max_tokens: draw(&mut rng, lengths.output),
                turn: 0,
            }
        })
        .collect();
    Workload { name: "synthetic".into(), requests }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_are_drawn_about_their_means() {
        let lengths =
            Lengths { prompt: Length { mean: 400, sd: 100 }, output: Length { mean: 64, sd: 0 } };
        let w = workload(&lengths);
        assert_eq!(w.requests.len(), COUNT);
        assert!(w.requests.iter().all(|r| r.max_tokens == 64), "no spread: the mean");
        let words: Vec<usize> =
            w.requests.iter().map(|r| r.messages[0].content.split(' ').count()).collect();
        let mean = words.iter().sum::<usize>() as f64 / words.len() as f64;
        assert!((mean - 300.0).abs() < 15.0, "{mean} words for 400 tokens");
        assert!(words.iter().any(|w| *w < 250) && words.iter().any(|w| *w > 350), "spread");
        assert!(Lengths { prompt: Length { mean: 0, sd: 0 }, ..lengths }.error().is_some());
    }
}
