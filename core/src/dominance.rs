//! The dominance gate: while a trial's speed probe runs, whether an
//! earlier trial of its study already beats it so clearly that its
//! remaining repeats and slow probes (quality, context, depth,
//! concurrency, perplexity) cannot change what the study finds.

use std::collections::BTreeMap;

use engine_bridge::Settings;
use engine_bridge::probes::SpeedResult;
use tunebook_study::findings::TrialFacts;
use tunebook_study::{Measure, Metric, Study};

/// A gate that cuts short the speed repeats and skips the slow probes of a
/// trial that cannot reach the Pareto front (see [`dominators`]): some
/// earlier trial beats it by more than 20 % in both decode and prefill
/// speed and is at least as good on every other objective.
pub fn gate(
    study: &Study,
    facts: &[TrialFacts],
    config: &Settings,
) -> Option<impl Fn(&SpeedResult) -> Option<String> + Send + Sync + use<>> {
    if !study.def.budget.skip_dominated {
        return None;
    }
    let done = dominators(study, facts, config)?;
    Some(move |speed: &SpeedResult| {
        beaten(&done, speed.summary.decode_tps, speed.summary.prefill_tps)
    })
}

/// The trials that may cut short a trial of `config`, with their decode
/// and prefill speeds: those that ran within every bound and are at least
/// as good on every objective that is a setting. `None` when an objective
/// is one only a later probe measures (memory, quality, context): a slower
/// trial could still reach the front on it, so no trial may be cut short.
fn dominators(
    study: &Study,
    facts: &[TrialFacts],
    config: &Settings,
) -> Option<Vec<(i64, f64, f64)>> {
    let known_early = |m: &Measure| {
        matches!(m, Measure::Metric(Metric::DecodeTps | Metric::PrefillTps) | Measure::Setting(_))
    };
    if !study.objectives.iter().all(|o| known_early(&o.measure)) {
        return None;
    }
    let none = BTreeMap::new();
    let as_good = |t: &TrialFacts| {
        study.objectives.iter().filter(|o| matches!(o.measure, Measure::Setting(_))).all(
            |o| match (o.measure.value(&t.metrics, &t.settings), o.measure.value(&none, config)) {
                (Some(a), Some(b)) => o.goal.oriented(a) >= o.goal.oriented(b),
                _ => false,
            },
        )
    };
    Some(
        facts
            .iter()
            .filter(|t| t.done && t.missed.is_none() && as_good(t))
            .filter_map(|t| {
                Some((
                    t.id,
                    *t.metrics.get(&Metric::DecodeTps)?,
                    *t.metrics.get(&Metric::PrefillTps)?,
                ))
            })
            .collect(),
    )
}

/// Why a trial measured at `decode` and `prefill` so far is clearly beaten
/// by one of `done`, if it is.
fn beaten(done: &[(i64, f64, f64)], decode: f64, prefill: f64) -> Option<String> {
    let (id, d, p) = done.iter().find(|(_, d, p)| *d > decode * 1.2 && *p > prefill * 1.2)?;
    Some(format!(
        "trial {id} is faster in decode ({d:.1} vs {decode:.1} tok/s) and prefill ({p:.1} vs {prefill:.1} tok/s)"
    ))
}

#[cfg(test)]
mod tests {
    use tunebook_study::StudyDef;

    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Settings {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn only_a_trial_that_cannot_reach_the_front_is_cut_short() {
        let study = |objectives: &str| {
            let toml = format!(
                "name = \"g\"\nprofile = \"p\"\nmodel = \"m\"\n\
                 [space]\nctx_size = [1024, 4096]\nthreads = [1, 2]\n{objectives}"
            );
            StudyDef::from_toml(&toml)
                .unwrap()
                .check(&engine_bridge::Catalog::llama_server(), &["m".into()])
                .unwrap()
        };
        let fast = |id: i64, ctx: &str| TrialFacts {
            id,
            settings: config(&[("ctx_size", ctx), ("threads", "2")]),
            done: true,
            metrics: [(Metric::DecodeTps, 50.0), (Metric::PrefillTps, 500.0)].into(),
            ..Default::default()
        };
        let slow = config(&[("ctx_size", "1024"), ("threads", "1")]);
        let gate = |s: &Study, facts: &[TrialFacts], c: &Settings| {
            dominators(s, facts, c).and_then(|d| beaten(&d, 30.0, 300.0))
        };
        // Speed alone: a trial 40 % slower in both is beaten.
        let speed = study("[[objectives]]\nmetric = \"decode_tps\"\n");
        let why = gate(&speed, &[fast(1, "1024")], &slow).expect("beaten");
        assert!(why.starts_with("trial 1 is faster in decode (50.0 vs 30.0 tok/s)"), "{why}");
        assert_eq!(
            gate(&speed, &[fast(1, "1024")], &slow),
            beaten(&[(1, 50.0, 500.0)], 30.0, 300.0)
        );
        // Within 20 %, not.
        assert_eq!(beaten(&[(1, 50.0, 500.0)], 45.0, 300.0), None);
        // A faster trial that broke a bound beats nothing.
        let broke = TrialFacts { missed: Some("quality".into()), ..fast(1, "1024") };
        assert_eq!(gate(&speed, &[broke], &slow), None);
        // Memory or quality as an objective: a slower trial may still reach
        // the front on it, and only later probes measure it.
        for later in ["peak_rss_bytes", "quality_score", "context_tokens"] {
            let s = study(&format!(
                "[[objectives]]\nmetric = \"decode_tps\"\n[[objectives]]\nmetric = \"{later}\"\n"
            ));
            assert_eq!(gate(&s, &[fast(1, "1024")], &slow), None, "{later}");
        }
        // A setting as an objective: only a trial at least as good on it
        // beats another.
        let context = study(
            "[[objectives]]\nmetric = \"decode_tps\"\n[[objectives]]\nmetric = \"setting.ctx_size\"\n",
        );
        let larger = config(&[("ctx_size", "4096"), ("threads", "1")]);
        assert_eq!(gate(&context, &[fast(1, "1024")], &larger), None);
        assert!(gate(&context, &[fast(1, "4096")], &larger).is_some());
        assert!(gate(&context, &[fast(1, "1024")], &slow).is_some());
    }
}
