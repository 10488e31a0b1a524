//! Pairs of word values no trial has tried together: where the models'
//! drawn gains have all but vanished and the front has stopped moving,
//! the search tries such a pair rather than re-measure what it knows. A
//! pair effect that neither word shows alone (spreading threads over two
//! NUMA nodes pays only with the weights read into both nodes' memory)
//! has no column a few trials can fit, and the models, shrinking pairs of
//! settings that do little alone, are sure it is not there.

use std::collections::BTreeSet;

use engine_bridge::Settings;
use rand::Rng;

use super::Proposal;
use super::acquisition::{Acquisition, Worth};
use super::pool::climb;
use crate::space::{Domain, Space};
use crate::study::{Observation, Study};

/// The best-scored of `pool` among those holding the most pairs of word
/// values no trial of `history` tried, moved along its other settings
/// by the acquisition; `None` where every candidate's pairs were tried.
/// `scored`: the pool's worth by index, best first.
pub(super) fn proposal(
    study: &Study,
    history: &[Observation],
    acquisition: &Acquisition,
    (pool, scored): (&[Settings], &[(usize, Worth)]),
    fresh: &impl Fn(&Settings) -> bool,
    rng: &mut impl Rng,
) -> Option<Proposal> {
    let words = word_settings(&study.space);
    let tried = Tried::new(&words, history.iter().map(|o| &o.config));
    let most = scored.iter().map(|(i, _)| tried.untried(&pool[*i])).max()?;
    if most == 0 {
        return None;
    }
    let (i, worth) = scored.iter().find(|(i, _)| tried.untried(&pool[*i]) == most)?;
    let first = &pool[*i];
    let keeps = |c: &Settings| fresh(c) && tried.same_words(c, first);
    let (config, _) = climb(study, acquisition, (first.clone(), *worth), &keeps, rng);
    let note = "model: the front stalled; a pair of word values no trial tried".into();
    Some(Proposal { config, note })
}

/// The settings whose values are words: a list that is not three numbers
/// or more (as [`super::axis::Axis`] codes them), a switch.
pub(super) fn word_settings(space: &Space) -> Vec<String> {
    space
        .params
        .iter()
        .filter(|p| match &p.domain {
            Domain::Values(v) => v.len() < 3 || v.iter().any(|x| x.trim().parse::<f64>().is_err()),
            _ => false,
        })
        .map(|p| p.name.clone())
        .collect()
}

/// The pairs of word values the `tried` configurations hold.
pub(super) struct Tried<'a> {
    words: &'a [String],
    pairs: BTreeSet<(usize, usize, &'a str, &'a str)>,
}

impl<'a> Tried<'a> {
    pub fn new(words: &'a [String], tried: impl IntoIterator<Item = &'a Settings>) -> Self {
        let mut pairs = BTreeSet::new();
        for c in tried {
            for (i, a) in words.iter().enumerate() {
                for (k, b) in words.iter().enumerate().skip(i + 1) {
                    if let (Some(x), Some(y)) = (c.get(a), c.get(b)) {
                        pairs.insert((i, k, x.as_str(), y.as_str()));
                    }
                }
            }
        }
        Tried { words, pairs }
    }

    /// How many of `config`'s pairs of word values no trial tried.
    pub fn untried(&self, config: &Settings) -> usize {
        let mut n = 0;
        for (i, a) in self.words.iter().enumerate() {
            for (k, b) in self.words.iter().enumerate().skip(i + 1) {
                if let (Some(x), Some(y)) = (config.get(a), config.get(b))
                    && !self.pairs.contains(&(i, k, x.as_str(), y.as_str()))
                {
                    n += 1;
                }
            }
        }
        n
    }

    /// Whether `a` and `b` hold the same words.
    pub fn same_words(&self, a: &Settings, b: &Settings) -> bool {
        self.words.iter().all(|w| a.get(w) == b.get(w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::space::Param;

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn counts_the_pairs_of_words_no_trial_tried() {
        let values = |v: &[&str]| Domain::Values(v.iter().map(|s| s.to_string()).collect());
        let space = Space {
            params: vec![
                Param { name: "numa".into(), domain: values(&["off", "distribute", "isolate"]) },
                Param { name: "no_mmap".into(), domain: values(&["false", "true"]) },
                // Numbers listed: placed along a line, not words.
                Param { name: "ubatch".into(), domain: values(&["128", "256", "512"]) },
                Param {
                    name: "threads".into(),
                    domain: Domain::Int { min: 1, max: 32, step: 1, log: false },
                },
                Param { name: "mlock".into(), domain: values(&["false", "true"]) },
            ],
            ..Space::default()
        };
        let words = word_settings(&space);
        assert_eq!(words, ["numa", "no_mmap", "mlock"]);
        let a = settings(&[("numa", "off"), ("no_mmap", "false"), ("mlock", "false")]);
        let b = settings(&[("numa", "distribute"), ("no_mmap", "false"), ("mlock", "true")]);
        let tried = Tried::new(&words, [&a, &b]);
        assert_eq!(tried.untried(&a), 0);
        // `distribute` was tried mapped and locked, never with `no_mmap`
        // or unlocked; `no_mmap` never at all.
        let c = settings(&[("numa", "distribute"), ("no_mmap", "true"), ("mlock", "false")]);
        assert_eq!(tried.untried(&c), 3);
        // Mapped and locked on `off`: only (off, locked) is new.
        let e = settings(&[("numa", "off"), ("no_mmap", "false"), ("mlock", "true")]);
        assert_eq!(tried.untried(&e), 1);
        // Numbers do not count: another ubatch or thread count is no new pair.
        let mut d = a.clone();
        d.insert("ubatch".into(), "256".into());
        d.insert("threads".into(), "9".into());
        assert_eq!(tried.untried(&d), 0);
        assert!(tried.same_words(&a, &d));
        assert!(!tried.same_words(&a, &c));
    }

    /// A world where nothing the models can fit from the words alone
    /// matters: decode rises with the threads, and two placements pay
    /// only with `no_mmap`. Once the drawn gains have vanished and the
    /// front stopped moving, the search tries the pairs of words it has
    /// not, and so finds them.
    #[tokio::test]
    async fn a_search_with_nothing_left_to_gain_tries_untried_pairs() {
        use std::collections::BTreeMap;

        use engine_bridge::Catalog;

        use super::super::Bayes;
        use crate::strategy::Strategy;
        use crate::study::{Metric, StudyDef};

        let study = StudyDef::from_toml(
            r#"
name = "pairs"
profile = "p"
model = "m"
[space]
threads = { min = 1, max = 16, step = 1 }
numa = ["off", "distribute", "isolate", "numactl"]
no_mmap = [false, true]
mlock = [false, true]
[baseline]
threads = 4
numa = "off"
no_mmap = false
mlock = false
[[objectives]]
metric = "decode_tps"
[[objectives]]
metric = "load_ms"
"#,
        )
        .unwrap()
        .check(&Catalog::llama_server(), &["m".into()])
        .unwrap();
        let metrics = |c: &Settings| -> BTreeMap<Metric, f64> {
            let threads: f64 = c["threads"].parse().unwrap();
            let spread = c["numa"] == "distribute" && c["no_mmap"] == "true";
            let decode = threads.min(12.0) * if spread { 1.4 } else { 1.0 };
            let load = 1000.0 + 25.0 * threads + if c["no_mmap"] == "true" { 3000.0 } else { 0.0 };
            [(Metric::DecodeTps, decode), (Metric::LoadMs, load)].into()
        };
        let words = word_settings(&study.space);
        let base = metrics(&study.baseline);
        let mut history = vec![study.observe(study.baseline.clone(), Some(&base), Some(&base))];
        let mut novel = 0;
        let bayes = Bayes::new(3);
        while history.len() < 40 {
            let p = bayes.propose(&study, &history).await.expect("a proposal");
            if p.note.contains("a pair of word values no trial tried") {
                let tried = Tried::new(&words, history.iter().map(|o| &o.config));
                assert!(tried.untried(&p.config) > 0, "{p:?}");
                novel += 1;
            }
            let m = metrics(&p.config);
            history.push(study.observe(p.config, Some(&m), Some(&base)));
        }
        assert!(novel > 0, "no proposal tried an untried pair");
        let spread = |o: &&crate::study::Observation| {
            o.config["numa"] == "distribute" && o.config["no_mmap"] == "true"
        };
        assert!(history.iter().any(|o| spread(&o)), "never tried distribute with no_mmap");
    }
}
