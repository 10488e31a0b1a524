//! Confirming a pick before it is named. A search's best trial is the
//! luckiest of many measurements; so once the search is over, the best
//! configuration is run again interleaved with the baseline (A-B-A-B…,
//! `budget.confirm_pairs` pairs, reserved out of the budget), and named
//! only if the paired ratio on the first objective shows it better than
//! the baseline beyond noise. One that does not hold up is replaced by the
//! next best, while the budget lasts. The runner asks [`next`] for each
//! trial of this phase; the findings read the outcome with
//! [`confirmations`].

use engine_bridge::Settings;

use crate::findings::TrialFacts;
pub use crate::findings::confirmed::{Confirmation, confirmations};
use crate::study::{Goal, Metric, Study};
use tunebook_domain::Role;

/// At most this many candidates are confirmed, best first.
const MAX_CANDIDATES: usize = 3;

/// The trials reserved for confirmation out of the study's budget: the
/// best pick's pairs, and the balanced pick's with several objectives,
/// where the budget is at least three times that.
pub fn reserve(study: &Study) -> usize {
    let pairs = study.def.budget.confirm_pairs as usize;
    let picks = if study.objectives.len() > 1 { 2 } else { 1 };
    let reserve = 2 * pairs * picks;
    if pairs == 0 || (study.def.budget.max_trials as usize) < 3 * reserve { 0 } else { reserve }
}

/// The next trial of the confirmation phase, once the search is over
/// (`spent`: trials counted against the budget): a run of a pick or of the
/// baseline, with its role and why. First the search's best (the next best
/// when one does not hold up), then with several objectives the balanced
/// pick. `None` when that is done, the budget cannot take another full
/// confirmation, or the search ran too few trials for its best to be luck.
pub fn next(
    study: &Study,
    trials: &[TrialFacts],
    spent: usize,
) -> Option<(Settings, Role, String)> {
    let pairs = study.def.budget.confirm_pairs as usize;
    if reserve(study) == 0 {
        return None;
    }
    // A best among a handful is hardly luck: a search that measured fewer
    // than four trials a pair names its best as measured.
    let searched = trials.iter().filter(|t| t.done && t.role == Some(Role::Search)).count();
    if searched < 4 * pairs {
        return None;
    }
    // Settings need no re-measuring: the pick is confirmed on the metrics.
    let objectives = study.metric_objectives();
    if objectives.is_empty() {
        return None;
    }
    let metrics: Vec<Metric> = objectives.iter().map(|o| o.0).collect();
    let goals: Vec<Goal> = objectives.iter().map(|o| o.1).collect();
    let left = (study.def.budget.max_trials as usize).saturating_sub(spent);
    let done = confirmations(trials, &metrics);
    // A confirmation under way goes on.
    if let Some(c) = done.last().filter(|c| !c.failed && c.pairs.len() < pairs) {
        if left == 0 {
            return None;
        }
        let n = c.pairs.len() + 1;
        let role = if c.balanced { Role::ConfirmBalanced } else { Role::Confirm };
        return Some(if c.pending {
            (
                study.baseline.clone(),
                Role::ConfirmBase,
                format!("confirmation: the baseline, pair {n} of {pairs}"),
            )
        } else {
            (c.settings.clone(), role, format!("confirmation: the pick, pair {n} of {pairs}"))
        });
    }
    if left < 2 * pairs {
        return None;
    }
    let held = |c: &&Confirmation| c.pairs.len() >= pairs && c.verdict(&goals).is_some_and(|v| v.1);
    let bests: Vec<&Confirmation> = done.iter().filter(|c| !c.balanced).collect();
    if !bests.iter().any(held) && bests.len() < MAX_CANDIDATES {
        let tried: Vec<&Settings> = bests.iter().map(|c| &c.settings).collect();
        if let Some(pick) = candidates(study, trials).into_iter().find(|s| !tried.contains(&s)) {
            let which = if bests.is_empty() {
                "the search's best"
            } else {
                "the next best, the last not holding up"
            };
            return Some((
                pick,
                Role::Confirm,
                format!("confirmation of {which}: pair 1 of {pairs}"),
            ));
        }
    }
    // With several objectives, the balanced pick too, unless it is a best
    // pick that held up. Its place on the front counts every objective,
    // settings' own values too.
    let measures = study.measures();
    if measures.len() < 2 || done.iter().any(|c| c.balanced) {
        return None;
    }
    let searched: Vec<&TrialFacts> = trials
        .iter()
        .filter(|t| t.done && matches!(t.role, Some(Role::Search | Role::Baseline)))
        .filter(|t| t.missed.is_none())
        .collect();
    let pick = crate::findings::balanced_pick(&searched, &measures)?;
    if pick == study.baseline || bests.iter().any(|c| held(c) && c.settings == pick) {
        return None;
    }
    Some((
        pick,
        Role::ConfirmBalanced,
        format!("confirmation of the balanced pick: pair 1 of {pairs}"),
    ))
}

/// The search's feasible configurations other than the baseline, best
/// first on the first objective (each by its best run).
fn candidates(study: &Study, trials: &[TrialFacts]) -> Vec<Settings> {
    let Some(first) = study.objectives.first() else { return vec![] };
    let baseline = trials.iter().find(|t| t.role == Some(Role::Baseline)).map(|t| &t.metrics);
    let mut ranked: Vec<(f64, &Settings)> = trials
        .iter()
        .filter(|t| t.done && t.role == Some(Role::Search) && t.settings != study.baseline)
        .filter(|t| study.observe(t.settings.clone(), Some(&t.metrics), baseline).feasible)
        .filter_map(|t| {
            Some((first.goal.oriented(first.measure.value(&t.metrics, &t.settings)?), &t.settings))
        })
        .collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut out: Vec<Settings> = Vec::new();
    for (_, s) in ranked {
        if !out.contains(s) {
            out.push(s.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::testing;

    /// The synthetic study's objectives: decode up, memory down.
    const GOALS: [Goal; 2] = [Goal::Max, Goal::Min];

    fn trial(id: i64, settings: &Settings, role: Role, decode: Option<f64>) -> TrialFacts {
        TrialFacts {
            id,
            settings: settings.clone(),
            done: decode.is_some(),
            metrics: decode
                .map(|d| [(Metric::DecodeTps, d), (Metric::PeakRssBytes, 1.0)].into())
                .unwrap_or_default(),
            role: Some(role),
            ..Default::default()
        }
    }

    /// Plays the confirmation phase through, each run measured by `decode`.
    fn play(
        study: &Study,
        trials: &mut Vec<TrialFacts>,
        decode: impl Fn(&Settings) -> f64,
    ) -> Vec<Role> {
        let mut roles = Vec::new();
        while let Some((settings, role, _)) = next(study, trials, trials.len()) {
            let id = trials.len() as i64 + 1;
            trials.push(trial(id, &settings, role, Some(decode(&settings))));
            roles.push(role);
        }
        roles
    }

    #[test]
    fn a_pick_that_holds_up_is_confirmed_in_interleaved_pairs() {
        let study = testing::study("random", "");
        let base = study.baseline.clone();
        let mut good = base.clone();
        good.insert("threads".into(), "12".into());
        let mut lucky = base.clone();
        lucky.insert("threads".into(), "8".into());
        // The search: `lucky` measured best once, but runs as the baseline;
        // ten others slower still.
        let mut trials = vec![
            trial(1, &base, Role::Baseline, Some(20.0)),
            trial(2, &lucky, Role::Search, Some(40.0)),
            trial(3, &good, Role::Search, Some(30.0)),
        ];
        for k in 1..=10 {
            let mut other = base.clone();
            other.insert("batch_size".into(), (64 * k).to_string());
            trials.push(trial(trials.len() as i64 + 1, &other, Role::Search, Some(10.0)));
        }
        let search_end = trials.len() as i64;
        let truth = |s: &Settings| if *s == good { 30.0 } else { 20.0 };
        let roles = play(&study, &mut trials, truth);
        // `lucky` A-B three times, not holding up; then `good`, which does.
        assert_eq!(roles, [Role::Confirm, Role::ConfirmBase].repeat(6));
        let done = confirmations(&trials, &[Metric::DecodeTps, Metric::PeakRssBytes]);
        assert_eq!(done.len(), 2);
        assert_eq!(done[0].settings, lucky);
        assert!(!done[0].verdict(&GOALS).unwrap().1, "no better than the baseline");
        assert_eq!(done[1].settings, good);
        let (ratios, held) = done[1].verdict(&GOALS).unwrap();
        let ratio = ratios[0];
        assert!(held && (ratio.est - 1.5).abs() < 0.01, "{ratio:?}");
        // The pairs interleave: each pick's run followed by the baseline's.
        assert!(done[1].pairs.iter().all(|p| p.base - p.pick == 1));
        assert_eq!(done[0].pairs[0].pick, search_end + 1, "right after the search");

        // A search of two trials names its best as measured.
        let short: Vec<TrialFacts> = trials[..3].to_vec();
        assert_eq!(next(&study, &short, 3), None);
    }

    #[test]
    fn with_two_objectives_the_balanced_pick_is_confirmed_too() {
        let study = testing::study("random", "");
        let with = |threads: &str| {
            let mut s = study.baseline.clone();
            s.insert("threads".into(), threads.into());
            s
        };
        let (base, fast, mid, lucky) = (study.baseline.clone(), with("16"), with("8"), with("12"));
        // (decode, memory): `fast` is fastest and biggest, `mid` a little
        // slower and smaller, `lucky` measured once as small as `mid` but
        // as big as `fast` on its re-runs.
        let truth = |s: &Settings| match s {
            s if *s == fast => (40.0, 30.0),
            s if *s == mid => (35.0, 12.0),
            s if *s == lucky => (36.0, 30.0),
            _ => (20.0, 10.0),
        };
        let run = |id: i64, s: &Settings, role: Role, m: (f64, f64)| {
            let mut t = trial(id, s, role, Some(m.0));
            t.metrics.insert(Metric::PeakRssBytes, m.1);
            t
        };
        let mut trials = vec![run(1, &base, Role::Baseline, truth(&base))];
        for (s, m) in [(&fast, truth(&fast)), (&mid, truth(&mid)), (&lucky, (36.0, 11.0))] {
            trials.push(run(trials.len() as i64 + 1, s, Role::Search, m));
        }
        for k in 1..=10 {
            let mut other = base.clone();
            other.insert("batch_size".into(), (64 * k).to_string());
            trials.push(run(trials.len() as i64 + 1, &other, Role::Search, (10.0, 50.0)));
        }
        let mut roles = Vec::new();
        while let Some((settings, role, _)) = next(&study, &trials, trials.len()) {
            roles.push((role, settings.clone()));
            trials.push(run(trials.len() as i64 + 1, &settings, role, truth(&settings)));
        }
        let picks: Vec<(Role, &Settings)> = roles.iter().step_by(2).map(|(r, s)| (*r, s)).collect();
        // The best holds up at once; then the balanced pick, `lucky` by its
        // one lucky run, which does not hold up and is not replaced.
        assert_eq!(
            picks,
            [(Role::Confirm, &fast); 3]
                .into_iter()
                .chain([(Role::ConfirmBalanced, &lucky); 3])
                .collect::<Vec<_>>()
        );
        let done = confirmations(&trials, &[Metric::DecodeTps, Metric::PeakRssBytes]);
        assert_eq!(
            done.iter().map(|c| c.verdict(&GOALS).unwrap().1).collect::<Vec<_>>(),
            [true, false]
        );
        assert!(
            roles.iter().skip(1).step_by(2).all(|(r, s)| *r == Role::ConfirmBase && *s == base)
        );
    }

    #[test]
    fn a_small_budget_confirms_nothing_and_a_failed_run_does_not_hold() {
        let small = testing::study("random", "").def.clone();
        let mut small = small;
        small.budget.max_trials = 10;
        let study = small.check(&engine_bridge::Catalog::llama_server(), &["m".into()]).unwrap();
        assert_eq!(reserve(&study), 0);
        assert_eq!(next(&study, &[], 5), None);

        let study = testing::study("random", "");
        let mut pick = study.baseline.clone();
        pick.insert("threads".into(), "12".into());
        let mut trials = vec![trial(1, &study.baseline, Role::Baseline, Some(20.0))];
        trials.extend((0..12).map(|k| trial(k + 2, &pick, Role::Search, Some(30.0))));
        assert_eq!(next(&study, &trials, 13).map(|n| n.1), Some(Role::Confirm));
        trials.push(trial(14, &pick, Role::Confirm, None));
        let done = confirmations(&trials, &[Metric::DecodeTps, Metric::PeakRssBytes]);
        assert!(done[0].failed);
        assert_eq!(next(&study, &trials, 14), None, "no other candidate");
    }
}
