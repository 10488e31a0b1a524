//! Planted worlds: studies whose engine is a formula with noise, run
//! in-process with a strategy's real proposals, so that the findings
//! drawn from them can be checked claim by claim against the truth
//! ([`score`]). Tests and `scripts/bench-findings.sh` use them; nothing
//! here touches an engine.

mod bounded;
mod cpu_only;
mod formula;
mod held_out;
mod hybrid;
mod igpu;
mod model_file;
mod numa;
mod recall;
mod region;
mod score;
mod search;
mod search_worlds;
mod serving;
mod sglang;
mod speculative;
mod spill;
mod split;
mod unseen;
mod vllm;
mod worlds;

use std::collections::BTreeMap;
use tunebook_domain::Role;

use engine_bridge::{Catalog, Settings};
use rand::{Rng, SeedableRng};

pub use score::{Score, score};
pub use search::{Cost, Judge, Reached, search};
pub use search_worlds::search_worlds;
pub use worlds::all as worlds;

use crate::findings::TrialFacts;
use crate::study::{Metric, Study, StudyDef};

/// What a configuration truly does.
#[derive(Debug, Clone, PartialEq)]
pub enum Truth {
    /// Its true (noise-free) metrics.
    Runs(BTreeMap<Metric, f64>),
    /// It fails so, every time.
    Fails(&'static str),
}

/// The measurement noise: relative standard deviations for speeds and
/// memory, an absolute one for rates; and what real machines add.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Noise {
    pub speed: f64,
    pub memory: f64,
    pub quality: f64,
    /// Of a KL divergence, in nats.
    pub divergence: f64,
    /// The chance that one request of a trial is slowed 1.5 to 4 times (a
    /// heavy tail: another process woke up).
    pub tail: f64,
    /// How much every speed moves a trial, relative (the machine's load
    /// changing under the study: −0.004 is 0.4 % slower each trial).
    pub drift: f64,
    /// The quality score is counted over this many questions, each
    /// passed or failed the same way every time a configuration runs
    /// (greedy decoding): chance picks which, not the repeats.
    pub items: Option<u32>,
    /// The share of those questions whose difficulty is the question's
    /// own, the same for every configuration (0: each configuration draws
    /// each question afresh). A real model answers most questions alike
    /// under settings that leave its weights alone, and fails the hardest
    /// ones first where a setting costs it.
    pub alike: f64,
}

/// Requests a trial's speeds are the median of, as the speed probe's
/// default repeats.
pub const REQUESTS: usize = 3;

/// One trial's measurement: its metrics, each speed's requests, and the
/// items a share was counted over.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    pub metrics: BTreeMap<Metric, f64>,
    pub repeats: BTreeMap<Metric, Vec<f64>>,
    pub items: BTreeMap<Metric, u32>,
    pub verdicts: BTreeMap<Metric, Vec<bool>>,
}

/// Something a reader should learn from a world.
#[derive(Debug, Clone, PartialEq)]
pub enum Fact {
    /// The setting moves the metric (at the baseline).
    Effect { setting: String, metric: Metric },
    /// The setting's best value for the metric lies inside its range.
    Peak { setting: String, metric: Metric, best: Vec<String> },
    /// The two settings act together on the metric.
    Interaction { a: String, b: String, metric: Metric },
    /// The value saves speed or memory and costs no quality: a free win.
    Lossless { setting: String, value: String },
    /// The value costs quality.
    Lossy { setting: String, value: String, metric: Metric },
    /// The cause's failures follow a rule over the settings.
    FailureRule { cause: String },
    /// The setting does nothing to the metric.
    NoEffect { setting: String, metric: Metric },
}

/// A planted world.
pub struct World {
    pub name: &'static str,
    /// The study's TOML, without strategy or budget.
    pub study: String,
    pub truth: fn(&Settings) -> Truth,
    pub noise: Noise,
    pub facts: Vec<Fact>,
    /// Metrics the world's measurement cannot support any claim on (a
    /// quality score over a few questions): an effect, "no effect" or a
    /// free win judged on one is wrong whatever the truth.
    pub silent: Vec<Metric>,
    /// What a planner would predict of a configuration's peak memory: the
    /// K/V cache's arithmetic and the weights, not what the world adds
    /// beyond them (buffers, a flash-attention factor), and in one world
    /// a structure the truth does not have.
    pub plan: Option<fn(&Settings) -> f64>,
    /// The engine's settings the study is checked against.
    pub catalog: fn() -> Catalog,
    /// What the planner predicts of a configuration's GPU memory from the
    /// world's model file, as the server's does from a GGUF file's
    /// metadata (for the search as well as the findings).
    pub gpu_plan: Option<fn(&Settings) -> Option<f64>>,
    /// How full the planner predicts the GPUs, for the search, where that
    /// is not `gpu_plan`'s bytes: on several GPUs of known sizes, the
    /// fullest one's share.
    pub gpu_fill: Option<fn(&Settings) -> Option<f64>>,
}

impl World {
    /// A world for judging searches only: no facts for the findings, no
    /// silent metrics, no planner.
    pub(crate) fn for_search(
        name: &'static str,
        study: &str,
        truth: fn(&Settings) -> Truth,
        noise: Noise,
    ) -> Self {
        World {
            name,
            study: study.into(),
            truth,
            noise,
            facts: vec![],
            silent: vec![],
            plan: None,
            catalog: Catalog::llama_server,
            gpu_plan: None,
            gpu_fill: None,
        }
    }

    /// The world on another engine than llama-server.
    pub(crate) fn on(self, catalog: fn() -> Catalog) -> Self {
        World { catalog, ..self }
    }

    /// The world with a planner of GPU memory.
    pub(crate) fn with_gpu_plan(self, plan: fn(&Settings) -> Option<f64>) -> Self {
        World { gpu_plan: Some(plan), ..self }
    }

    /// The world with how full its GPUs are planned, for the search.
    pub(crate) fn with_gpu_fill(self, fill: fn(&Settings) -> Option<f64>) -> Self {
        World { gpu_fill: Some(fill), ..self }
    }

    /// Over the world's whole grid: how many configurations fail, and the
    /// size of the true Pareto front of those that run.
    #[cfg(test)]
    pub(crate) fn failures_and_front(&self) -> (usize, usize) {
        let study = self.study("random", 0, 10);
        let judge = Judge::new(self, &study, Cost::default());
        let (mut fails, mut values) = (0, Vec::new());
        for c in study.space.grid() {
            match judge.values(&study, &c) {
                Some(v) => values.push(v),
                None => fails += 1,
            }
        }
        let goals: Vec<_> = study.objectives.iter().map(|t| t.goal).collect();
        (fails, crate::pareto::front(&values, &goals).len())
    }

    /// Asserts what every search world needs: a failing region smaller
    /// than the part that runs, and a true front of more than three
    /// configurations.
    #[cfg(test)]
    pub(crate) fn assert_fails_in_part_with_a_front(&self) {
        let (fails, front) = self.failures_and_front();
        let size = self.study("random", 0, 10).space.grid_size() as usize;
        assert!(fails > 0 && fails < size - fails, "{}: {fails} of {size} fail", self.name);
        assert!(front > 3, "{}: a front of {front}", self.name);
    }

    /// The true values of the baseline with some settings changed (`None`
    /// where that fails), for a world's test to check its claims against.
    #[cfg(test)]
    pub(crate) fn beside_baseline(&self) -> impl Fn(&[(&str, &str)]) -> Option<Vec<f64>> {
        let study = self.study("random", 0, 10);
        let judge = Judge::new(self, &study, Cost::default());
        move |changes| {
            let mut c = study.baseline.clone();
            c.extend(changes.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            judge.values(&study, &c)
        }
    }

    /// The world's study searched by `strategy` for `budget` trials.
    pub fn study(&self, strategy: &str, seed: u64, budget: usize) -> Study {
        let text = format!(
            "strategy = {{ kind = \"{strategy}\", seed = {seed} }}\nbudget = {{ max_trials = {budget} }}\n{}",
            self.study
        );
        StudyDef::from_toml(&text)
            .and_then(|d| d.check(&(self.catalog)(), &["m".to_string()]))
            .unwrap_or_else(|e| panic!("world {}: {e}", self.name))
    }

    /// The world's planner as the findings take one (see
    /// [`crate::findings::findings_planned`]).
    pub fn planner(&self) -> Option<crate::findings::PlanFn> {
        let (host, gpu) = (self.plan, self.gpu_plan);
        if host.is_none() && gpu.is_none() {
            return None;
        }
        Some(std::sync::Arc::new(move |s: &Settings, m: Metric| match m {
            Metric::PeakRssBytes => host.map(|plan| plan(s)),
            Metric::PeakGpuBytes => gpu.and_then(|plan| plan(s)),
            _ => None,
        }))
    }

    /// How full the world's planner predicts the GPUs, as the search takes
    /// it (see [`crate::strategy::GpuFillFn`]): the GPU bytes, where the
    /// world says nothing more.
    pub fn gpu_fill(&self) -> Option<crate::strategy::GpuFillFn> {
        let fill = self.gpu_fill.or(self.gpu_plan)?;
        Some(std::sync::Arc::new(move |s: &Settings| fill(s)))
    }

    /// The kind of failure a measurement's error names, as the runner
    /// records it (`out_of_memory`, `rejected`, `probe_failed`).
    pub fn failure<T>(measured: &Result<T, String>) -> Option<engine_bridge::FailureKind> {
        measured.as_ref().err().and_then(|why| engine_bridge::FailureKind::parse(why))
    }

    /// One measurement of `settings`: the truth with noise.
    pub fn measure(
        &self,
        settings: &Settings,
        rng: &mut impl Rng,
    ) -> Result<BTreeMap<Metric, f64>, String> {
        match (self.truth)(settings) {
            Truth::Fails(cause) => Err(cause.to_string()),
            Truth::Runs(metrics) => Ok(metrics
                .into_iter()
                .map(|(m, v)| {
                    let z = crate::strategy::normal(rng);
                    let noisy = match m {
                        m if m.is_rate() => (v + z * self.noise.quality).clamp(0.0, 1.0),
                        Metric::KldMean | Metric::KldP99 => {
                            (v + z * self.noise.divergence).max(0.0)
                        }
                        m if m.name().ends_with("_bytes") => v * (z * self.noise.memory).exp(),
                        _ => v * (z * self.noise.speed).exp(),
                    };
                    (m, noisy)
                })
                .collect()),
        }
    }

    /// One measurement of `settings` as the `index`-th trial of a search:
    /// the truth with noise, and each speed moved by the drift so far and
    /// now and then slowed (the heavy tail), each on its own, as if one
    /// request had measured it: harsher than [`Self::measure_at`]'s median
    /// of [`REQUESTS`], which one slow request does not move. Worlds with
    /// neither draw what [`Self::measure`] draws.
    pub fn measure_in_search(
        &self,
        settings: &Settings,
        index: usize,
        rng: &mut impl Rng,
    ) -> Result<BTreeMap<Metric, f64>, String> {
        let mut metrics = self.measure(settings, rng)?;
        if self.noise.tail == 0.0 && self.noise.drift == 0.0 {
            return Ok(metrics);
        }
        let drift = (self.noise.drift * index as f64).exp();
        for (m, v) in &mut metrics {
            if !matches!(m, Metric::DecodeTps | Metric::PrefillTps | Metric::TtftMs) {
                continue;
            }
            let slow = if rng.random::<f64>() < self.noise.tail {
                rng.random_range(1.5..4.0)
            } else {
                1.0
            };
            *v = if *m == Metric::TtftMs { *v / drift * slow } else { *v * drift / slow };
        }
        Ok(metrics)
    }

    /// The `index`-th trial of a study measuring `settings` as a real
    /// machine does: each speed the median of [`REQUESTS`] requests, some
    /// of them slowed (the tail), all of them moved by the drift so far;
    /// the quality score over the world's few questions, where it has them.
    pub fn measure_at(
        &self,
        settings: &Settings,
        index: usize,
        rng: &mut impl Rng,
    ) -> Result<Sample, String> {
        let mut sample = Sample { metrics: self.measure(settings, rng)?, ..Default::default() };
        let Truth::Runs(truth) = (self.truth)(settings) else { unreachable!("it ran") };
        let drift = (self.noise.drift * index as f64).exp();
        for (m, v) in truth {
            let speed = matches!(m, Metric::DecodeTps | Metric::PrefillTps | Metric::TtftMs);
            if speed {
                // A slow machine makes times longer and rates lower.
                let moved = if m == Metric::TtftMs { v / drift } else { v * drift };
                let requests: Vec<f64> = (0..REQUESTS)
                    .map(|_| {
                        let z = crate::strategy::normal(rng);
                        let slow = if rng.random::<f64>() < self.noise.tail {
                            rng.random_range(1.5..4.0)
                        } else {
                            1.0
                        };
                        let r = moved * (z * self.noise.speed).exp();
                        if m == Metric::TtftMs { r * slow } else { r / slow }
                    })
                    .collect();
                let mut sorted = requests.clone();
                sorted.sort_by(f64::total_cmp);
                sample.metrics.insert(m, sorted[REQUESTS / 2]);
                sample.repeats.insert(m, requests);
            }
            if let (Metric::QualityScore, Some(n)) = (m, self.noise.items) {
                let verdicts = verdicts(settings, v, n, self.noise.alike);
                let passed = verdicts.iter().filter(|p| **p).count();
                sample.metrics.insert(m, passed as f64 / n as f64);
                sample.items.insert(m, n);
                sample.verdicts.insert(m, verdicts);
            }
        }
        Ok(sample)
    }

    /// Runs `study` as the runner does: the baseline first, then the
    /// strategy's proposals until the budget (less the findings' share)
    /// or the strategy runs out, the baseline again as often as the study
    /// asks; then the findings' share on what they left open (see
    /// [`crate::settle`]), and what it left back to the search. No
    /// confirmation: the pick's re-runs are no finding's.
    pub async fn run(&self, study: &Study, seed: u64) -> Vec<TrialFacts> {
        self.run_planned(study, seed, self.planner().as_ref()).await
    }

    /// [`World::run`] with the findings' share judged with `planner` (or
    /// none): what a server without a prediction of memory does.
    pub async fn run_planned(
        &self,
        study: &Study,
        seed: u64,
        planner: Option<&crate::findings::PlanFn>,
    ) -> Vec<TrialFacts> {
        self.run_settling(study, seed, planner, true).await
    }

    /// As [`World::run_planned`]; `at_pick`: whether the findings' share
    /// settles effects at the pick too.
    pub async fn run_settling(
        &self,
        study: &Study,
        seed: u64,
        planner: Option<&crate::findings::PlanFn>,
        at_pick: bool,
    ) -> Vec<TrialFacts> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x5EED);
        let fill = planner.and(self.gpu_fill());
        let strategy = crate::strategy::for_study(study, None, fill);
        let budget = study.def.budget.max_trials as usize;
        let mut s = Searching {
            history: Vec::new(),
            trials: Vec::new(),
            baseline_metrics: None,
            since: 0,
            next: Some((study.baseline.clone(), Role::Baseline)),
        };
        let share = crate::settle::reserve(study);
        self.search(study, strategy.as_ref(), &mut rng, &mut s, budget - share).await;
        let mut asked = Vec::new();
        while let Some(plan) = {
            let left = budget.saturating_sub(s.trials.len());
            crate::settle::next_with(study, &s.trials, left, &asked, planner, at_pick)
        } {
            let (metric, at_pick) = match plan.target {
                crate::settle::Target::Effect(m) => (Some(m), false),
                crate::settle::Target::AtPick(m) => (Some(m), true),
                crate::settle::Target::Rule { .. } => (None, false),
            };
            if let Some(metric) = metric {
                asked.push(crate::settle::Asked { setting: plan.setting.clone(), metric, at_pick });
            }
            for (settings, _) in plan.runs {
                s.run(self, study, settings, Role::Settle, &mut rng);
            }
        }
        self.search(study, strategy.as_ref(), &mut rng, &mut s, budget).await;
        crate::findings::mark_missed(&study.def, &mut s.trials);
        s.trials
    }

    /// The search of [`World::run`] until `until` trials have run in all.
    async fn search(
        &self,
        study: &Study,
        strategy: &dyn crate::strategy::Strategy,
        rng: &mut impl Rng,
        s: &mut Searching,
        until: usize,
    ) {
        let every = study.def.budget.rerun_baseline_every.filter(|e| *e > 0);
        while s.trials.len() < until {
            let (config, role) = match s.next.take() {
                Some(next) => next,
                None if every.is_some_and(|e| s.since >= e as usize) => {
                    (study.baseline.clone(), Role::Rerun)
                }
                None => match strategy.propose(study, &s.history).await {
                    Some(p) => (p.config, Role::Search),
                    None => return,
                },
            };
            let mut settings = study.baseline.clone();
            settings.extend(config);
            s.run(self, study, settings, role, rng);
        }
    }
}

/// A planted study under way: its trials, and what its strategy has seen.
struct Searching {
    history: Vec<crate::study::Observation>,
    trials: Vec<TrialFacts>,
    baseline_metrics: Option<BTreeMap<Metric, f64>>,
    /// Searched trials since the baseline last ran.
    since: usize,
    /// What runs next, before the strategy is asked.
    next: Option<(Settings, Role)>,
}

impl Searching {
    /// Measures `settings` in `world` as a trial of `role`.
    fn run(
        &mut self,
        world: &World,
        study: &Study,
        settings: Settings,
        role: Role,
        rng: &mut impl Rng,
    ) {
        let measured = world.measure_at(&settings, self.trials.len(), rng);
        let sample = measured.as_ref().ok();
        if self.trials.is_empty() {
            self.baseline_metrics = sample.map(|s| s.metrics.clone());
        }
        if role != Role::Rerun {
            let metrics = sample.map(|s| &s.metrics);
            let mut seen = study.observe(settings.clone(), metrics, self.baseline_metrics.as_ref());
            seen.failure = World::failure(&measured);
            self.history.push(seen);
        }
        match role {
            Role::Search => self.since += 1,
            Role::Baseline | Role::Rerun => self.since = 0,
            _ => {}
        }
        self.trials.push(facts(self.trials.len() as i64 + 1, settings, measured, role));
    }
}

/// A planted trial as the findings see it.
fn facts(id: i64, settings: Settings, measured: Result<Sample, String>, role: Role) -> TrialFacts {
    let failure = measured.as_ref().err().map(|c| (c.clone(), format!("planted {c}")));
    let sample = measured.unwrap_or_default();
    TrialFacts {
        id,
        settings,
        done: failure.is_none(),
        failure,
        metrics: sample.metrics,
        repeats: sample.repeats,
        items: sample.items,
        verdicts: sample.verdicts,
        role: Some(role),
        ..Default::default()
    }
}

/// Which of `n` questions a configuration passes whose true share is
/// `p`: each question passes where its draw falls under `p`, a draw fixed
/// by the question alone for a share `alike` of them and by the question
/// and the configuration for the rest. So a configuration asked again
/// answers alike, two configurations differ by which questions chance
/// flips, and one with a lower share fails the hardest questions first.
fn verdicts(settings: &Settings, p: f64, n: u32, alike: f64) -> Vec<bool> {
    use std::hash::{Hash, Hasher};
    let draw = |x: &dyn Fn(&mut std::collections::hash_map::DefaultHasher)| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        x(&mut h);
        (h.finish() >> 11) as f64 / (1u64 << 53) as f64
    };
    (0..n)
        .map(|q| {
            let shared = draw(&|h| ("alike", settings, q).hash(h)) < alike;
            let d = if shared {
                draw(&|h| ("question", q).hash(h))
            } else {
                draw(&|h| (settings, q).hash(h))
            };
            d <= p
        })
        .collect()
}
