//! Candidates that only repeat a measured trial: they differ from it in
//! settings that every objective's linear model has found to do nothing
//! (a micro-batch in a study of decode speed and load time).
//!
//! The process fitted to what the linear model leaves has a length scale
//! along such a setting too, not an endless one: where the trials of one
//! configuration all read below the linear model's trend (a peak its
//! curves round off), the process holds the trials themselves low and an
//! untried value of the idle setting a little less low, so in most draws
//! the same configuration under another micro-batch gains a sliver of
//! hypervolume over the front. Where the models are sure of the rest of
//! the space that sliver is the largest gain left, and the search spent
//! trial after trial on one configuration: on `numa`, seed 17, ten of
//! its first 48 trials ran 18 threads, `distribute`, mapped, each with
//! another micro-batch or batch thread count.
//!
//! A column of the linear model is silent when relevance shrank its
//! prior to next to nothing (see the regression's `SILENT`); a candidate
//! repeats a trial when, for every objective, their rows agree in every
//! column that is not.

use std::collections::HashSet;

use engine_bridge::Settings;

use super::features::Encoder;

/// The measured trials as the objectives' linear models tell them apart.
pub(super) struct Repeats<'a> {
    /// Each objective's encoder, and the columns of its row that count.
    views: Vec<(&'a Encoder, Vec<usize>)>,
    measured: HashSet<Vec<u64>>,
}

impl<'a> Repeats<'a> {
    /// `views`: each objective's encoder and its model's silent columns
    /// (a row's, and maybe more: the drift's); `measured`: the trials.
    pub fn new(views: &[(&'a Encoder, Vec<bool>)], measured: &[&Settings]) -> Self {
        let views: Vec<_> = views
            .iter()
            .map(|(e, silent)| {
                let width = e.classes.len().min(silent.len());
                (*e, (0..width).filter(|j| !silent[*j]).collect())
            })
            .collect();
        let mut repeats = Self { views, measured: HashSet::new() };
        repeats.measured = measured.iter().map(|c| repeats.key(c)).collect();
        repeats
    }

    /// `config`'s columns that count, every objective's in turn.
    fn key(&self, config: &Settings) -> Vec<u64> {
        let mut key = Vec::new();
        for (encoder, counted) in &self.views {
            let row = encoder.row(config);
            key.extend(counted.iter().map(|j| row[*j].to_bits()));
        }
        key
    }

    /// Whether `config` only repeats a measured trial.
    pub fn of(&self, config: &Settings) -> bool {
        !self.views.is_empty() && self.measured.contains(&self.key(config))
    }
}

#[cfg(test)]
mod tests {
    use engine_bridge::Settings;

    use super::super::super::testing;
    use super::super::features::{Class, Encoder};
    use super::Repeats;

    /// With every column of the batch size silent, a configuration that
    /// changes only the batch size repeats the trial; one that changes
    /// the threads does not; with nothing silent, neither does.
    #[test]
    fn only_silent_columns_may_differ() {
        let study = testing::study("bayes", "");
        let encoder = Encoder::for_space(&study.space, &study.baseline);
        let batch = study.space.params.iter().position(|p| p.name == "batch_size").unwrap();
        let silent: Vec<bool> = encoder
            .classes
            .iter()
            .map(|c| match c {
                Class::Main(s) | Class::Shape(s) => *s == batch,
                Class::Pair(a, b) => *a == batch || *b == batch,
                _ => false,
            })
            .collect();
        let with = |k: &str, v: &str| -> Settings {
            let mut c = study.baseline.clone();
            c.insert(k.into(), v.into());
            c
        };
        let trial = study.baseline.clone();
        let repeats = Repeats::new(&[(&encoder, silent.clone())], &[&trial]);
        assert!(repeats.of(&with("batch_size", "256")));
        assert!(!repeats.of(&with("threads", "9")));
        let none = vec![false; silent.len()];
        let repeats = Repeats::new(&[(&encoder, none)], &[&trial]);
        assert!(!repeats.of(&with("batch_size", "256")));
    }
}
