//! Serving capacity: conversations of a workload arrive at random
//! (Poisson, an open loop: arrivals do not wait for answers, as a team's
//! do not) at each rate for a while, each conversation sending its turns
//! one after another as its answers come (an agent's next turn waits for
//! the last answer), and each rate is judged against a latency objective
//! (p99 time to first token, p99 gap between tokens).
//! Then the highest rate that holds it is searched for between the last
//! rate that held and the first that did not. What a configuration can
//! serve is its goodput: requests a second answered within the objective,
//! at the best rate.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;

use tokio_util::sync::CancellationToken;

use super::load_watch::{self, EngineLoad};
use crate::chat::ChatSample;
use crate::engine::RunningEngine;
use crate::failure::{Failure, FailureKind};
use crate::workloads::{self, Workload};

/// A latency objective. The bounds written are the ones judged: a bound
/// left out of a written objective is not judged (so `{ ttft_p99_ms = 5000 }`
/// judges the first token only); a probe with no objective written is
/// judged on both defaults, 2000 ms to the first token and 200 ms between
/// tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Slo {
    #[serde(default)]
    pub ttft_p99_ms: Option<f64>,
    #[serde(default)]
    pub itl_p99_ms: Option<f64>,
}

impl Default for Slo {
    fn default() -> Self {
        Self { ttft_p99_ms: Some(2000.0), itl_p99_ms: Some(200.0) }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct LoadProbe {
    /// A built-in workload or a file in the server's workloads folder.
    pub workload: String,
    /// Arrival rates tried, in conversations a second (requests a second
    /// for workloads of single requests).
    pub rates: Vec<f64>,
    /// How long requests arrive at each rate.
    #[serde(with = "super::secs")]
    #[schemars(with = "f64")]
    pub duration: Duration,
    pub slo: Slo,
    /// Rates tried between the last that held and the first that did not.
    pub search_steps: u32,
    /// Requests waiting on the engine at once, at most; an arrival past it
    /// counts as an error (the client's limit, said as such).
    pub max_in_flight: usize,
    #[serde(with = "super::secs")]
    #[schemars(with = "f64")]
    pub request_timeout: Duration,
    /// The arrivals' draw: the same seed, the same arrival times.
    pub seed: u64,
    /// Prompt and answer lengths of the `synthetic` workload.
    pub lengths: workloads::synthetic::Lengths,
    /// Set by the server from its own configuration, never by a study.
    #[serde(skip)]
    pub workloads_dir: Option<PathBuf>,
}

impl Default for LoadProbe {
    fn default() -> Self {
        Self {
            workload: "chat".into(),
            rates: vec![0.5, 1.0, 2.0, 4.0],
            duration: Duration::from_secs(30),
            slo: Slo::default(),
            search_steps: 2,
            max_in_flight: 512,
            request_timeout: Duration::from_secs(300),
            seed: 1,
            lengths: Default::default(),
            workloads_dir: None,
        }
    }
}

/// The 50th, 90th and 99th percentiles.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
}

impl Percentiles {
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Self> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        // The nearest rank: a p99 is a value some request saw.
        let at = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Some(Self { p50: at(0.5), p90: at(0.9), p99: at(0.99) })
    }
}

/// One rate's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LoadStep {
    /// Arrivals a second asked for.
    pub rate: f64,
    /// Requests sent (each turn of a conversation counts) or refused at
    /// the client's limit.
    pub sent: u32,
    pub completed: u32,
    pub errors: u32,
    /// First arrival to last answer.
    pub seconds: f64,
    /// Answers a second, and generated tokens a second.
    pub throughput_rps: f64,
    pub output_tps: f64,
    pub ttft_ms: Option<Percentiles>,
    /// Gaps between tokens, over every request's.
    pub itl_ms: Option<Percentiles>,
    pub latency_ms: Option<Percentiles>,
    /// Median time to first token of requests the engine found nothing of
    /// in its cache, and of those it found a prefix of (later turns).
    pub cold_ttft_ms: Option<f64>,
    pub warm_ttft_ms: Option<f64>,
    /// Answers within the objective, per second.
    pub goodput_rps: f64,
    pub meets_slo: bool,
    /// The first error, in the engine's or the client's words.
    pub error: Option<String>,
    /// What the engine said of itself meanwhile.
    #[serde(default)]
    pub engine: Option<EngineLoad>,
    /// What limits the step, where something does (see
    /// [`load_watch::binding`]).
    #[serde(default)]
    pub binding: Option<String>,
}

/// Every rate run, in the order run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LoadResult {
    pub workload: String,
    pub slo: Slo,
    pub steps: Vec<LoadStep>,
    /// The highest rate that held the objective.
    pub best_rate: Option<f64>,
    /// Goodput at that rate (0 when none held).
    pub goodput_rps: f64,
}

impl LoadProbe {
    pub async fn run(&self, engine: &RunningEngine) -> Result<LoadResult, Failure> {
        let workload =
            workloads::load(&self.workload, self.workloads_dir.as_deref(), &self.lengths)
                .map_err(|e| Failure::new(FailureKind::ProbeFailed, e))?;
        let workload = Arc::new(Conversations::of(workload));
        let mut steps: Vec<LoadStep> = Vec::new();
        let mut rates = self.rates.clone();
        rates.sort_by(f64::total_cmp);
        rates.dedup();
        // The next conversation of the workload, kept across rates.
        let mut next = 0usize;
        for (i, rate) in rates.iter().enumerate() {
            let step = self.step(engine, &workload, *rate, i as u64, &mut next).await;
            let held = step.meets_slo;
            steps.push(step);
            if !held {
                break;
            }
        }
        // Between the last rate that held and the first that did not.
        for k in 0..self.search_steps {
            let held = steps.iter().filter(|s| s.meets_slo).map(|s| s.rate).reduce(f64::max);
            let failed = steps.iter().filter(|s| !s.meets_slo).map(|s| s.rate).reduce(f64::min);
            let (Some(lo), Some(hi)) = (held, failed) else { break };
            if hi / lo < 1.1 {
                break;
            }
            let rate = (lo * hi).sqrt();
            let seed = rates.len() as u64 + u64::from(k);
            steps.push(self.step(engine, &workload, rate, seed, &mut next).await);
        }
        let best = steps.iter().filter(|s| s.meets_slo).max_by(|a, b| a.rate.total_cmp(&b.rate));
        Ok(LoadResult {
            workload: workload.workload.name.clone(),
            slo: self.slo.clone(),
            best_rate: best.map(|s| s.rate),
            goodput_rps: best.map_or(0.0, |s| s.goodput_rps),
            steps,
        })
    }

    /// Arrivals at `rate` for the probe's duration; `next` is the
    /// workload's next conversation to start (kept across steps).
    async fn step(
        &self,
        engine: &RunningEngine,
        workload: &Arc<Conversations>,
        rate: f64,
        salt: u64,
        next: &mut usize,
    ) -> LoadStep {
        let mut rng = StdRng::seed_from_u64(self.seed.wrapping_mul(1_000_003).wrapping_add(salt));
        let arrivals = arrivals(&mut rng, rate, self.duration);
        let handle = engine.chat_handle();
        let stop = CancellationToken::new();
        let watcher = tokio::spawn(load_watch::watch(
            handle.client.clone(),
            handle.base_url.clone(),
            stop.clone(),
        ));
        let started = Instant::now();
        let mut running: JoinSet<Vec<Result<ChatSample, Failure>>> = JoinSet::new();
        let (mut samples, mut errors, mut first_error) = (Vec::new(), 0u32, None::<String>);
        let mut refused = 0u32;
        for at in &arrivals {
            tokio::time::sleep_until((started + *at).into()).await;
            while let Some(done) = running.try_join_next() {
                collect(done, &mut samples, &mut errors, &mut first_error);
            }
            if running.len() >= self.max_in_flight {
                refused += 1;
                continue;
            }
            let turns = workload.nth(*next);
            *next += 1;
            let (engine, timeout, all) =
                (engine.chat_handle(), self.request_timeout, workload.clone());
            running.spawn(async move {
                let mut done = Vec::new();
                for i in turns {
                    let answer = engine.chat(&all.workload.requests[i], timeout).await;
                    let failed = answer.is_err();
                    done.push(answer);
                    if failed {
                        break;
                    }
                }
                done
            });
        }
        while let Some(done) = running.join_next().await {
            collect(done, &mut samples, &mut errors, &mut first_error);
        }
        if refused > 0 {
            errors += refused;
            first_error.get_or_insert(format!(
                "{refused} arrivals found {} requests already waiting (the client's limit)",
                self.max_in_flight
            ));
        }
        let seconds = started.elapsed().as_secs_f64().max(self.duration.as_secs_f64());
        stop.cancel();
        let sent = samples.len() as u32 + errors;
        let mut step = self.judge(rate, sent, samples, errors, first_error, seconds);
        step.engine = watcher.await.ok();
        let outcome = load_watch::Outcome {
            rate,
            held: step.meets_slo,
            first_token_missed: (step.ttft_ms.zip(self.slo.ttft_p99_ms))
                .is_some_and(|(p, b)| p.p99 > b),
            client_limited: refused > 0,
        };
        step.binding = load_watch::binding(step.engine.as_ref(), &outcome);
        step
    }

    fn judge(
        &self,
        rate: f64,
        sent: u32,
        samples: Vec<ChatSample>,
        errors: u32,
        error: Option<String>,
        seconds: f64,
    ) -> LoadStep {
        let ttft = Percentiles::of(samples.iter().map(|s| s.ttft_ms));
        let itl = Percentiles::of(samples.iter().flat_map(|s| s.gaps_ms.iter().copied()));
        let within = |s: &ChatSample| {
            let worst_gap = s.gaps_ms.iter().copied().fold(0.0, f64::max);
            self.slo.ttft_p99_ms.is_none_or(|b| s.ttft_ms <= b)
                && self.slo.itl_p99_ms.is_none_or(|b| worst_gap <= b)
        };
        let good = samples.iter().filter(|s| within(s)).count();
        // An error is a request the objective did not hold for: one in a
        // hundred may miss it.
        let holds = |p: Option<Percentiles>, bound: Option<f64>| {
            bound.is_none_or(|b| p.is_some_and(|p| p.p99 <= b))
        };
        let meets_slo = !samples.is_empty()
            && f64::from(errors) <= 0.01 * f64::from(sent)
            && holds(ttft, self.slo.ttft_p99_ms)
            && holds(itl, self.slo.itl_p99_ms);
        let median = |warm: bool| {
            let v = samples.iter().filter(|s| s.cached_tokens.map(|c| c > 0) == Some(warm));
            Percentiles::of(v.map(|s| s.ttft_ms)).map(|p| p.p50)
        };
        let generated: u32 = samples.iter().filter_map(|s| s.completion_tokens).sum();
        LoadStep {
            rate,
            sent,
            completed: samples.len() as u32,
            errors,
            seconds,
            throughput_rps: samples.len() as f64 / seconds,
            output_tps: f64::from(generated) / seconds,
            ttft_ms: ttft,
            itl_ms: itl,
            latency_ms: Percentiles::of(samples.iter().map(|s| s.total_ms)),
            cold_ttft_ms: median(false),
            warm_ttft_ms: median(true),
            goodput_rps: good as f64 / seconds,
            meets_slo,
            error,
            engine: None,
            binding: None,
        }
    }
}

/// A workload's requests grouped into conversations: a request of turn 0
/// starts one, the later turns after it continue it.
struct Conversations {
    workload: Workload,
    starts: Vec<usize>,
}

impl Conversations {
    fn of(workload: Workload) -> Self {
        let starts = (workload.requests.iter().enumerate())
            .filter(|(i, r)| *i == 0 || r.turn == 0)
            .map(|(i, _)| i)
            .collect();
        Self { workload, starts }
    }

    /// The requests of the `n`th conversation sent (cycling).
    fn nth(&self, n: usize) -> std::ops::Range<usize> {
        let k = n % self.starts.len();
        let end = self.starts.get(k + 1).copied().unwrap_or(self.workload.requests.len());
        self.starts[k]..end
    }
}

fn collect(
    done: Result<Vec<Result<ChatSample, Failure>>, tokio::task::JoinError>,
    samples: &mut Vec<ChatSample>,
    errors: &mut u32,
    first: &mut Option<String>,
) {
    match done {
        Ok(answers) => {
            for answer in answers {
                match answer {
                    Ok(s) => samples.push(s),
                    Err(f) => {
                        *errors += 1;
                        first.get_or_insert(f.message);
                    }
                }
            }
        }
        Err(e) => {
            *errors += 1;
            first.get_or_insert(e.to_string());
        }
    }
}

/// Arrival times of a Poisson process of `rate` a second over `duration`:
/// exponential gaps of mean 1/rate after a first arrival at once (so that
/// a step at a low rate sends something).
pub fn arrivals(rng: &mut impl Rng, rate: f64, duration: Duration) -> Vec<Duration> {
    let mut out = vec![Duration::ZERO];
    let mut t = 0.0;
    loop {
        let u: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
        t += -u.ln() / rate;
        if t >= duration.as_secs_f64() {
            return out;
        }
        out.push(Duration::from_secs_f64(t));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrivals_come_at_the_rate_asked_with_poisson_gaps() {
        let mut rng = StdRng::seed_from_u64(3);
        let a = arrivals(&mut rng, 50.0, Duration::from_secs(200));
        let n = a.len() as f64;
        assert!((n / 200.0 - 50.0).abs() < 1.5, "{n} arrivals");
        // Exponential gaps: their spread equals their mean.
        let gaps: Vec<f64> = a.windows(2).map(|w| (w[1] - w[0]).as_secs_f64()).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
        assert!((sd / mean - 1.0).abs() < 0.05, "cv {}", sd / mean);
    }

    #[test]
    fn percentiles_are_values_requests_saw() {
        let p = Percentiles::of((1..=200).map(f64::from)).unwrap();
        assert_eq!((p.p50, p.p90, p.p99), (100.0, 180.0, 198.0));
        assert!(Percentiles::of([]).is_none());
    }

    #[test]
    fn the_bounds_written_are_the_ones_judged() {
        let probe = |toml: &str| -> LoadProbe { toml::from_str(toml).unwrap() };
        assert_eq!(probe("").slo, Slo::default(), "none written: both defaults");
        assert_eq!(
            probe("slo = { ttft_p99_ms = 5000 }").slo,
            Slo { ttft_p99_ms: Some(5000.0), itl_p99_ms: None },
            "one written: only it"
        );
        assert!(toml::from_str::<LoadProbe>("slo = { tpot_ms = 5 }").is_err(), "unknown bound");
    }

    #[test]
    fn a_rate_holds_its_objective_only_within_every_bound() {
        let probe = LoadProbe {
            slo: Slo { ttft_p99_ms: Some(100.0), itl_p99_ms: Some(20.0) },
            ..LoadProbe::default()
        };
        let sample = |ttft: f64, gap: f64| ChatSample {
            ttft_ms: ttft,
            gaps_ms: vec![gap; 4],
            total_ms: ttft + 4.0 * gap,
            prompt_tokens: Some(10),
            completion_tokens: Some(5),
            cached_tokens: Some(0),
        };
        let fast: Vec<ChatSample> = (0..100).map(|_| sample(50.0, 10.0)).collect();
        let step = probe.judge(2.0, 100, fast.clone(), 0, None, 50.0);
        assert!(step.meets_slo);
        assert_eq!((step.goodput_rps, step.throughput_rps), (2.0, 2.0));
        // Two slow first tokens in a hundred: the p99 is past the bound.
        let mut slow = fast.clone();
        slow[0] = sample(500.0, 10.0);
        slow[1] = sample(500.0, 10.0);
        let step = probe.judge(2.0, 100, slow, 0, None, 50.0);
        assert!(!step.meets_slo);
        assert_eq!(step.goodput_rps, 98.0 / 50.0, "the rest were good");
        // Errors beyond one in a hundred fail it too.
        let step = probe.judge(2.0, 102, fast, 2, Some("boom".into()), 50.0);
        assert!(!step.meets_slo);
    }
}
