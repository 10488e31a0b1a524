//! What the live feed brought a study's page since it loaded, and how a
//! trial's row reads with it.

use std::collections::BTreeMap;

use leptos::prelude::*;

use crate::types::{StudyProgress, StudyUpdate, TrialView};

/// What the live feed brought since the page loaded.
#[derive(Clone, Copy)]
pub(super) struct Live {
    /// Each trial's latest state, by id.
    pub trials: RwSignal<BTreeMap<i64, TrialView>>,
    pub events: RwSignal<Vec<StudyUpdate>>,
    pub state: RwSignal<Option<String>>,
    /// Counts trials that appeared or reached a final state: what the
    /// server is asked again for.
    pub changes: RwSignal<u64>,
}

/// A row as the live feed last saw it, where that is further along.
pub(super) fn overlaid(t: &TrialView, live: &BTreeMap<i64, TrialView>) -> TrialView {
    match live.get(&t.id) {
        Some(l) if !t.state.is_final() || l.state.is_final() => l.clone(),
        _ => t.clone(),
    }
}

/// The trials in flight, oldest first: those the server or the live feed
/// knows of (the feed's word is the later) that have not ended.
pub(super) fn in_flight(
    progress: &StudyProgress,
    live: &BTreeMap<i64, TrialView>,
) -> Vec<TrialView> {
    let mut all: BTreeMap<i64, &TrialView> = progress.in_flight.iter().map(|t| (t.id, t)).collect();
    all.extend(live.iter().map(|(id, t)| (*id, t)));
    all.into_values().filter(|t| !t.state.is_final()).cloned().collect()
}

/// The study's events as read with it, then those the feed brought that it
/// did not hold: the feed replays what happened from just before the study
/// was read, so an event may come both ways (the same kind, words and
/// time; its state is the study's when it was read or sent).
pub(super) fn merged_events(stored: &[StudyUpdate], live: &[StudyUpdate]) -> Vec<StudyUpdate> {
    let held = |e: &StudyUpdate| {
        stored.iter().any(|s| (&s.kind, &s.message, s.at_ms) == (&e.kind, &e.message, e.at_ms))
    };
    stored.iter().chain(live.iter().filter(|e| !held(e))).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &str, state: &str, at_ms: i64) -> StudyUpdate {
        StudyUpdate {
            study_id: 1,
            state: state.into(),
            kind: kind.into(),
            message: format!("{kind} at {at_ms}"),
            at_ms,
        }
    }

    #[test]
    fn an_event_read_with_the_study_and_replayed_by_the_feed_is_listed_once() {
        let stored = [event("created", "done", 1), event("drift", "done", 5)];
        let live =
            [event("drift", "running", 5), event("drift", "running", 6), event("done", "done", 9)];
        let kinds: Vec<i64> = merged_events(&stored, &live).iter().map(|e| e.at_ms).collect();
        assert_eq!(kinds, [1, 5, 6, 9]);
    }
}
