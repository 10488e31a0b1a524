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
