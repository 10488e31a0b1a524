//! The chance that a configuration fails: a linear model of 0 and 1 over
//! the encoder's rows ([`Posterior`]) for each kind of failure the trials
//! met (out of memory, a setting rejected, a probe failed, …), each
//! fitted to the trials that ran and to its own failures only. A draw
//! expects a configuration to fail where any kind's draw does. A trial
//! that broke a bound whose slack was not measured is one more kind of
//! failure; where the slack was measured, [`super::bounds`] models it.
//!
//! Different causes fail in different places. On `serving` a quantized V
//! cache without flash attention is rejected, a slot's context too small
//! for the prompt fails the probe, and too large a cache runs out of
//! memory; one model of them all spreads each failure over every setting
//! its trial touched, and the searches kept proposing 16 slots at a
//! context of 16,384 after it had failed there, with other cache types
//! and thread counts, six times in a row. A trial that failed otherwise
//! says nothing of whether this kind would have struck, so it is left
//! out of this kind's model.
//!
//! Running out of memory is modelled without the thread counts
//! ([`engine_bridge::planner::THREAD_COUNTS`]), which fill no memory: a
//! search runs the thread count its speed models favour beside the
//! memory settings it tries, and a model of every setting charged the
//! failures there to it. On `split`, a configuration that had run at one
//! thread was held to fail at 8 threads in every draw, at 0.7 to 0.9.

use engine_bridge::FailureKind;
use rand::Rng;

use super::acquisition::Model;
use super::features::Encoder;
use super::regression::{DrawWise, LinearDraws, Posterior};
use crate::study::Observation;

/// The least noise variance of a failure model, in units of its
/// standardized response (the regression's largest). With less, a few
/// failures that one setting's end explains are fitted exactly and carried
/// on past 1: on `serving`, once every 16-slot trial had failed at a
/// context too short for its slots, 16 slots at a context that runs were
/// held to fail at 1.1 to 1.2, though the trials of 8 slots showed the
/// failures to go with the context a slot gets, and four searches of 30
/// never tried them.
const LEAST_NOISE: f64 = 0.3;

/// Why a trial did not count: failed (of this kind, where the runner
/// could tell), or ran and broke a bound.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Cause {
    Failed(Option<FailureKind>),
    Bound,
}

fn cause(o: &Observation) -> Option<Cause> {
    match (o.feasible, &o.values, &o.slack) {
        (true, ..) => None,
        // It ran; the bounds' slack models tell where it breaks them.
        (false, Some(_), Some(_)) => None,
        (false, Some(_), None) => Some(Cause::Bound),
        (false, None, _) => Some(Cause::Failed(o.failure)),
    }
}

/// `samples` draws of each cause's model, read as one; `None` while every
/// trial of `history` (whose encoded rows are `rows`) counted.
pub(super) fn draws<'a>(
    history: &[Observation],
    rows: &[Vec<f64>],
    encoder: &'a Encoder,
    samples: usize,
    rng: &mut impl Rng,
) -> Option<Model<'a>> {
    let mut causes: Vec<Cause> = Vec::new();
    for c in history.iter().filter_map(cause) {
        if !causes.contains(&c) {
            causes.push(c);
        }
    }
    let models: Vec<LinearDraws<'a>> = causes
        .iter()
        .filter_map(|c| {
            // Running out of memory is read without the thread counts.
            let columns = match c {
                Cause::Failed(Some(FailureKind::OutOfMemory)) => {
                    encoder.columns_without(&engine_bridge::planner::THREAD_COUNTS)
                }
                _ => (0..encoder.width()).collect(),
            };
            let pick = |row: &Vec<f64>| -> Vec<f64> { columns.iter().map(|c| row[*c]).collect() };
            let (x, bad): (Vec<Vec<f64>>, Vec<f64>) = history
                .iter()
                .zip(rows)
                .filter_map(|(o, row)| match cause(o) {
                    None => Some((pick(row), 0.0)),
                    Some(other) if other == *c => Some((pick(row), 1.0)),
                    Some(_) => None,
                })
                .unzip();
            let classes: Vec<_> = columns.iter().map(|c| encoder.classes[*c]).collect();
            let fitted = Posterior::fit_noisier(&x, &bad, &classes, LEAST_NOISE)?;
            let width = encoder.width();
            let draws = (0..samples).map(|_| fitted.draw(rng).widened(&columns, width)).collect();
            Some(LinearDraws { encoder, draws })
        })
        .collect();
    (!models.is_empty()).then(|| Box::new(DrawWise { models, pick: f64::max }) as Model<'a>)
}

#[cfg(test)]
mod tests {
    use engine_bridge::{FailureKind, Settings};
    use rand::SeedableRng;

    use super::super::features::Encoder;
    use super::draws;
    use crate::strategy::testing;
    use crate::study::{Observation, Study};

    #[test]
    fn each_kind_of_failure_is_learned_where_it_happens() {
        // The synthetic space crashes from 14 threads on and rejects the
        // q4_0 cache at 8 threads or fewer: along `threads`, one kind fails
        // at the top and the other at the bottom. Fitted to forty random
        // trials, five times over, the models of each kind tell which of a
        // thousand other configurations fail with far fewer errors than
        // one model of both (375 against 928 as written).
        let study = testing::study("bayes", "");
        let encoder = Encoder::for_space(&study.space, &study.baseline);
        let cause = |c: &Settings| {
            let c = testing::full(&study, c);
            let threads: i64 = c["threads"].parse().unwrap();
            if threads >= 14 {
                Some(FailureKind::Crashed)
            } else if c["cache_type_k"] == "q4_0" && threads <= 8 {
                Some(FailureKind::Rejected)
            } else {
                None
            }
        };
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let (mut by_kind, mut together) = (0, 0);
        for _ in 0..5 {
            let history: Vec<Observation> = (0..40)
                .map(|_| {
                    let config = study.space.sample(&mut rng);
                    let why = cause(&config);
                    let m =
                        why.is_none().then(|| testing::metrics(&testing::full(&study, &config)));
                    let mut seen = Study::observe(&study, config, m.as_ref(), m.as_ref());
                    seen.failure = why;
                    seen
                })
                .collect();
            let pooled: Vec<Observation> =
                history.iter().cloned().map(|o| Observation { failure: None, ..o }).collect();
            let rows: Vec<Vec<f64>> = history.iter().map(|o| encoder.row(&o.config)).collect();
            let split = draws(&history, &rows, &encoder, 32, &mut rng).unwrap();
            let one = draws(&pooled, &rows, &encoder, 32, &mut rng).unwrap();
            for _ in 0..1000 {
                let c = study.space.sample(&mut rng);
                let fails = cause(&c).is_some();
                let expects = |m: &dyn super::super::acquisition::Drawn| {
                    let d = m.at(&c);
                    d.iter().filter(|v| **v >= 0.5).count() * 2 > d.len()
                };
                by_kind += usize::from(expects(split.as_ref()) != fails);
                together += usize::from(expects(one.as_ref()) != fails);
            }
        }
        assert!(
            (by_kind as f64) < 0.6 * together as f64,
            "{by_kind} of 5,000 told wrong by kind, {together} with one model"
        );
    }

    #[test]
    fn running_out_of_memory_is_not_charged_to_the_thread_count() {
        // As on `split` (`trace_search split bayes 2 200`): the search ran
        // its favourite thread count beside every memory setting it tried,
        // and the two largest batches ran out of memory each time, at 12 or
        // 16 threads; the largest batch ran once, at one thread, with the
        // smaller cache. A model of every setting put the failures on the
        // thread count and held the largest batch with the smaller cache
        // to fail at 12 threads; threads set no buffer that fills memory.
        let study = testing::study("bayes", "");
        let encoder = Encoder::for_space(&study.space, &study.baseline);
        let config = |threads: &str, batch: &str, cache: &str| -> Settings {
            [("threads", threads), ("batch_size", batch), ("cache_type_k", cache)]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .into()
        };
        let mut history = Vec::new();
        let mut add = |c: Settings, oom: bool| {
            let m = (!oom).then(|| testing::metrics(&testing::full(&study, &c)));
            let mut seen = Study::observe(&study, c, m.as_ref(), m.as_ref());
            seen.failure = oom.then_some(FailureKind::OutOfMemory);
            history.push(seen);
        };
        for (threads, batch, cache) in
            [("4", "2048", "f16"), ("2", "64", "q4_0"), ("6", "256", "f16")]
        {
            add(config(threads, batch, cache), false);
        }
        for (threads, batch, cache) in [
            ("12", "2048", "f16"),
            ("16", "2048", "f16"),
            ("12", "1536", "f16"),
            ("16", "1536", "q4_0"),
        ] {
            add(config(threads, batch, cache), true);
        }
        add(config("1", "2048", "q8_0"), false);
        let rows: Vec<Vec<f64>> = history.iter().map(|o| encoder.row(&o.config)).collect();
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let risk = draws(&history, &rows, &encoder, 32, &mut rng).unwrap();
        let at = |threads: &str| risk.at(&config(threads, "2048", "q8_0"));
        assert_eq!(at("12"), at("1"), "the thread count moved the chance of running out of memory");
        let fails = at("12").iter().filter(|v| **v >= 0.5).count();
        assert!(fails < 16, "{fails} of 32 draws expect it to fail: {:?}", at("12"));
        // A rejected setting may still go with the thread count.
        history.iter_mut().for_each(|o| {
            if o.failure.is_some() {
                o.failure = Some(FailureKind::Rejected);
            }
        });
        let risk = draws(&history, &rows, &encoder, 32, &mut rng).unwrap();
        let at = |threads: &str| risk.at(&config(threads, "2048", "q8_0"));
        assert_ne!(at("12"), at("1"));
    }

    #[test]
    fn failures_at_one_end_of_a_setting_are_not_carried_past_certainty() {
        // The first 30 trials of a search on `serving` (`trace_search
        // serving bayes 23 60` with one failure model a kind and the
        // regression's least noise). Every trial of 16 slots failed the
        // probe at a context too short for its slots; 8 slots failed it at
        // 8,192 and ran at 16,384 and above. 16 slots at 32,768 (2,048
        // tokens a slot, as 8 at 16,384) run, and most draws of the
        // failure models expect them to; with the least noise of the grid
        // the probe's model held them to fail at 1.1 to 1.2.
        let world = crate::planted::search_worlds()
            .into_iter()
            .find(|w| w.name == "serving")
            .expect("the world");
        let study = world.study("bayes", 0, 60);
        let encoder = Encoder::for_space(&study.space, &study.baseline);
        let names = [
            "cache_type_k",
            "cache_type_v",
            "ctx_size",
            "flash_attn",
            "parallel",
            "threads",
            "ubatch_size",
        ];
        let config = |line: &str| -> Settings {
            names.iter().map(|n| n.to_string()).zip(line.split(' ').map(String::from)).collect()
        };
        let tried = [
            "f16 f16 8192 off 1 4 512",
            "q8_0 f16 131072 on 4 6 128",
            "f16 q8_0 65536 on 1 1 2048",
            "f16 q4_0 8192 off 16 7 256",
            "q8_0 q4_0 16384 on 2 14 512",
            "q4_0 f16 32768 off 8 13 1024",
            "q4_0 q4_0 131072 off 8 4 512",
            "q4_0 q4_0 65536 off 8 16 512",
            "q4_0 q8_0 131072 on 8 16 512",
            "q4_0 q8_0 16384 on 2 16 512",
            "q8_0 q8_0 65536 off 8 16 512",
            "q4_0 f16 65536 off 8 2 512",
            "f16 f16 16384 on 8 16 512",
            "f16 f16 8192 on 8 1 512",
            "f16 f16 16384 on 16 16 128",
            "f16 f16 16384 on 2 16 512",
            "q8_0 q4_0 16384 on 16 16 512",
            "q4_0 q8_0 16384 on 8 16 128",
            "q4_0 q8_0 16384 on 4 1 512",
            "f16 f16 8192 on 1 4 2048",
            "q4_0 q8_0 16384 on 8 16 2048",
            "f16 f16 16384 on 4 16 2048",
            "f16 q8_0 16384 on 8 16 256",
            "q4_0 q4_0 8192 on 1 4 512",
            "q4_0 q4_0 8192 on 2 3 512",
            "q4_0 q4_0 16384 on 8 1 1024",
            "q4_0 q4_0 8192 on 8 4 1024",
            "q8_0 q4_0 16384 on 2 1 2048",
            "q8_0 q4_0 8192 on 1 3 1024",
            "q4_0 q8_0 32768 on 8 1 1024",
        ];
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let history: Vec<Observation> = tried
            .iter()
            .map(|line| {
                let c = config(line);
                let measured = world.measure(&c, &mut rng);
                let mut seen = Study::observe(&study, c, measured.as_ref().ok(), None);
                seen.failure = crate::planted::World::failure(&measured);
                seen
            })
            .collect();
        let probe = history.iter().filter(|o| o.failure == Some(FailureKind::ProbeFailed));
        assert!(probe.count() >= 4, "{history:?}");
        let rows: Vec<Vec<f64>> = history.iter().map(|o| encoder.row(&o.config)).collect();
        let risk = draws(&history, &rows, &encoder, 32, &mut rng).unwrap();
        let target = risk.at(&config("f16 q8_0 32768 on 16 4 512"));
        let fails = target.iter().filter(|v| **v >= 0.5).count();
        assert!(fails < 16, "{fails} of 32 draws expect it to fail: {target:?}");
    }
}
