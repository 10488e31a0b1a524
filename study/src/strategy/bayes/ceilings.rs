//! Where running out of memory is certain: a trial that ran out of
//! memory says that every configuration that stands at or past it in
//! each setting, the way that fills more memory, runs out too. Those
//! configurations are not proposed.
//!
//! The failure model ([`super::failures`]) is a smooth surface over the
//! settings and the planned fill; a load that runs out of memory is a
//! step, at a place that what the planner does not see moves (a draft
//! model's weights and cache beside the main model's, the compute
//! buffer). On the strategy benchmark's `speculative` world the searches
//! spent up to 60 of 105 trials running out of memory, proposing a
//! context of 131,072 with every layer on the GPU eight times after the
//! first such trial had failed, each drawn to fail in most draws but
//! worth the gamble on the ones where it ran.
//!
//! Which way fills more is the planner's to say ([`Planned::moves`]):
//! more layers, a longer context, a cache type earlier in its list. A
//! number it does not see (a micro-batch, how many tokens a draft
//! proposes) is taken to fill more as it grows; a word it does not see
//! (a draft model) must be the same; the thread counts fill nothing. The
//! planned fill alone is not enough: what the planner does not see may
//! grow with what it does (a draft's cache with the context), and where
//! the plan places a share of the cache that the engine holds whole, a
//! smaller cache type with more layers can be planned fuller and fit.
//!
//! A trial that ran where a failed one says it would not breaks the rule
//! for that one (the machine's free memory changed, or the memory moves
//! with a number the other way): it is no longer a witness.

use engine_bridge::{FailureKind, Settings};

use super::planned::{Moves, Planned};
use crate::space::{Domain, Space};
use crate::study::Observation;

/// The trials that ran out of memory and what they rule out.
pub(super) struct Ceilings<'a> {
    planned: &'a Planned,
    /// Each setting's name and how a configuration must stand against a
    /// witness's value.
    rules: Vec<(&'a str, Rule<'a>)>,
    /// The failed trials' settings and planned fills.
    witnesses: Vec<(&'a Settings, f64)>,
}

/// How a configuration's value of a setting must stand beside a
/// witness's for the witness to rule it out.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Rule<'a> {
    /// Any value: it fills no memory (the thread counts).
    Any,
    Same,
    /// At or past the witness's value the way that fills more (`up`):
    /// numbers by their size, words (`listed`) by their place in the list.
    Past {
        up: bool,
        listed: Option<&'a [String]>,
    },
}

impl Rule<'_> {
    /// Whether `value` stands as this rule asks beside `witness`'s.
    fn holds(&self, witness: Option<&str>, value: Option<&str>) -> bool {
        match self {
            Rule::Any => true,
            Rule::Same => witness == value,
            Rule::Past { up, listed } => {
                let place = |v: Option<&str>| match listed {
                    Some(words) => {
                        words.iter().position(|w| Some(w.as_str()) == v).map(|i| i as f64)
                    }
                    None => v?.parse::<f64>().ok(),
                };
                match (place(witness), place(value)) {
                    (Some(w), Some(c)) => {
                        if *up {
                            c >= w
                        } else {
                            c <= w
                        }
                    }
                    _ => false,
                }
            }
        }
    }
}

impl<'a> Ceilings<'a> {
    /// The witnesses of `history`, where the encoder has the planner's
    /// fill (`planned`; `None` without a plan, or where no trial ran out
    /// of memory or every one that did is contradicted).
    pub fn of(
        history: &'a [Observation],
        planned: Option<&'a Planned>,
        space: &'a Space,
    ) -> Option<Self> {
        let planned = planned?;
        let failed: Vec<&Observation> =
            history.iter().filter(|o| o.failure == Some(FailureKind::OutOfMemory)).collect();
        if failed.is_empty() {
            return None;
        }
        let rules = planned
            .moves(space)
            .into_iter()
            .zip(&space.params)
            .map(|(moves, p)| {
                let listed = match &p.domain {
                    Domain::Values(words) if !p.domain.numeric() => Some(words.as_slice()),
                    _ => None,
                };
                let rule = match moves {
                    _ if engine_bridge::planner::THREAD_COUNTS.contains(&p.name.as_str()) => {
                        Rule::Any
                    }
                    // A word the plan does not see, or one whose way
                    // depends on the rest, must be the same.
                    Moves::Not if listed.is_some() => Rule::Same,
                    Moves::Both => Rule::Same,
                    // A number the plan does not see is taken to fill
                    // more as it grows (a batch, a draft's length).
                    Moves::Not | Moves::Up => Rule::Past { up: true, listed },
                    Moves::Down => Rule::Past { up: false, listed },
                };
                (p.name.as_str(), rule)
            })
            .collect();
        let mut ceilings = Ceilings { planned, rules, witnesses: Vec::new() };
        let ran: Vec<(&Settings, f64)> = history
            .iter()
            .filter(|o| o.values.is_some())
            .map(|o| (&o.config, planned.fill(&o.config)))
            .collect();
        for o in failed {
            let fill = planned.fill(&o.config);
            // No layer offloaded: the plan says nothing.
            if fill <= 0.0 {
                continue;
            }
            let witness = (&o.config, fill);
            if !ran.iter().any(|(c, f)| ceilings.rules_out(witness, c, *f)) {
                ceilings.witnesses.push(witness);
            }
        }
        (!ceilings.witnesses.is_empty()).then_some(ceilings)
    }

    /// Whether a witness rules `config` out.
    pub fn reached(&self, config: &Settings) -> bool {
        let fill = self.planned.fill(config);
        self.witnesses.iter().any(|w| self.rules_out(*w, config, fill))
    }

    /// Whether `witness` rules out `config`, planned at `fill`.
    fn rules_out(&self, (failed, at): (&Settings, f64), config: &Settings, fill: f64) -> bool {
        fill >= at
            && self.rules.iter().all(|(name, rule)| {
                let (w, c) = (self.planned.value(failed, name), self.planned.value(config, name));
                rule.holds(w, c)
            })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use engine_bridge::{FailureKind, Settings};

    use super::super::planned::{GpuFillFn, Planned};
    use super::Ceilings;
    use crate::space::{Domain, Param, Space};
    use crate::study::Observation;

    /// Layers (8 to 48), a context and a cache type, which the plan
    /// sees, and a draft model and threads, which it does not.
    fn world() -> (Space, Settings, GpuFillFn) {
        let words = |w: &[&str]| Domain::Values(w.iter().map(|s| s.to_string()).collect());
        let space = Space {
            params: vec![
                Param {
                    name: "n_gpu_layers".into(),
                    domain: Domain::Int { min: 8, max: 48, step: 8, log: false },
                },
                Param { name: "ctx_size".into(), domain: words(&["4096", "32768"]) },
                Param { name: "cache_type_k".into(), domain: words(&["f16", "q4_0"]) },
                Param { name: "draft".into(), domain: words(&["none", "small"]) },
                Param { name: "threads".into(), domain: words(&["4", "8"]) },
            ],
            ..Space::default()
        };
        let baseline = at(8, "4096", "none", "8");
        let plan: GpuFillFn = Arc::new(|s: &Settings| {
            let layers: f64 = s.get("n_gpu_layers")?.parse().ok()?;
            let ctx: f64 = s.get("ctx_size")?.parse().ok()?;
            let cache = if s.get("cache_type_k")? == "f16" { 1.0 } else { 0.25 };
            Some(layers * (1.0 + cache * ctx / 32768.0))
        });
        (space, baseline, plan)
    }

    /// With an f16 cache.
    fn at(layers: u32, ctx: &str, draft: &str, threads: &str) -> Settings {
        let mut c = quantized(layers, ctx, draft, threads);
        c.insert("cache_type_k".into(), "f16".into());
        c
    }

    /// With a q4_0 cache.
    fn quantized(layers: u32, ctx: &str, draft: &str, threads: &str) -> Settings {
        [("n_gpu_layers", layers.to_string().as_str()), ("ctx_size", ctx), ("draft", draft)]
            .into_iter()
            .chain([("threads", threads), ("cache_type_k", "q4_0")])
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn trial(config: Settings, ran: bool) -> Observation {
        Observation {
            config,
            values: ran.then(|| vec![1.0]),
            feasible: ran,
            failure: (!ran).then_some(FailureKind::OutOfMemory),
            slack: None,
        }
    }

    #[test]
    fn what_ran_out_of_memory_rules_out_the_fuller_alike() {
        let (space, baseline, plan) = world();
        let (planned, _) = Planned::of(&plan, &space, &baseline).unwrap();
        // With the draft: 32 layers at a short context (planned 36) ran
        // out of memory, 16 (18) ran.
        let history =
            [trial(at(32, "4096", "small", "4"), false), trial(at(16, "4096", "small", "8"), true)];
        let c = Ceilings::of(&history, Some(&planned), &space).unwrap();
        // 40 layers, or 32 at the long context (planned 64), at any
        // thread count.
        assert!(c.reached(&at(40, "4096", "small", "8")), "more layers");
        assert!(c.reached(&at(32, "32768", "small", "8")), "a longer context");
        assert!(!c.reached(&at(24, "4096", "small", "4")), "planned below the failed fill");
        // 24 layers at the long context are planned at 48, past 36, but
        // with fewer layers: what the plan does not see may go by them.
        assert!(!c.reached(&at(24, "32768", "small", "4")));
        // 48 layers with a q4_0 cache at the long context are planned at
        // 60, but the smaller cache may fit where the plan misplaces it.
        assert!(!c.reached(&quantized(48, "32768", "small", "8")), "a smaller cache type");
        // A q4_0 cache that ran out of memory rules out the f16 one.
        let small = [trial(quantized(40, "4096", "small", "4"), false)];
        let c_small = Ceilings::of(&small, Some(&planned), &space).unwrap();
        assert!(c_small.reached(&at(40, "4096", "small", "8")), "a larger cache type");
        // Without the draft nothing is known: the plan does not see it.
        assert!(!c.reached(&at(48, "32768", "none", "4")));
        // A trial that ran where the failure rules out contradicts it:
        // nothing is ruled out then.
        let mut broken = history.to_vec();
        broken.push(trial(at(40, "32768", "small", "8"), true));
        assert!(Ceilings::of(&broken, Some(&planned), &space).is_none());
        // Nothing ran out of memory, or no plan: no ceilings.
        assert!(Ceilings::of(&history[1..], Some(&planned), &space).is_none());
        assert!(Ceilings::of(&history, None, &space).is_none());
    }
}
