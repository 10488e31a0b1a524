//! The live feed: every change to a trial or a study, numbered and kept for
//! a while, so that a watcher who reconnects catches up from where it left
//! off instead of missing what happened in between.
//!
//! Updates are serialized once, whatever the number of watchers. Each gets
//! an id `EPOCH-SEQ`: the epoch changes with every start of the server, so an
//! id from an earlier run is recognised and answered with a reset (the
//! watcher reloads what it shows from the database).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;
use tunebook_views::types::{StudyUpdate, TrialView};

/// Updates kept for watchers that reconnect.
const KEPT: usize = 4096;

/// What changed.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)] // built once, shared behind an Arc
pub enum Payload {
    Trial(TrialView),
    Study(StudyUpdate),
}

/// One update, numbered, with its JSON ready to send.
#[derive(Debug)]
pub struct Update {
    pub seq: u64,
    pub payload: Payload,
    pub json: String,
}

impl Update {
    /// The server-sent event name: trials are plain messages.
    pub fn event_name(&self) -> Option<&'static str> {
        match self.payload {
            Payload::Trial(_) => None,
            Payload::Study(_) => Some("study"),
        }
    }
}

/// Where a watcher starts.
pub enum Start {
    /// Everything after the watcher's last update, still kept.
    Backlog(Vec<Arc<Update>>),
    /// The watcher's last update is from an earlier run or no longer kept:
    /// it must reload.
    Reset,
}

pub struct Hub {
    /// Trials' state changes for the server's own waiters, apart from the
    /// feed (see [`crate::trial_changes`]).
    pub changes: crate::trial_changes::Changes,
    epoch: u64,
    kept: Mutex<Kept>,
    tx: broadcast::Sender<Arc<Update>>,
}

#[derive(Default)]
struct Kept {
    next: u64,
    updates: VecDeque<Arc<Update>>,
}

impl Default for Hub {
    fn default() -> Self {
        Self::new()
    }
}

impl Hub {
    pub fn new() -> Self {
        let epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let (tx, _) = broadcast::channel(KEPT);
        let kept = Mutex::new(Kept { next: 1, ..Kept::default() });
        Self { changes: Default::default(), epoch, kept, tx }
    }

    /// The event id of an update.
    pub fn id_of(&self, update: &Update) -> String {
        format!("{}-{}", self.epoch, update.seq)
    }

    /// The id of the latest update (`EPOCH-0` before the first): where a
    /// page whose data is read after this starts watching, so that what
    /// happens while it loads reaches it (see [`Hub::watch`]).
    pub fn position(&self) -> String {
        let kept = self.kept.lock().expect("lock");
        format!("{}-{}", self.epoch, kept.next - 1)
    }

    pub fn publish(&self, payload: Payload) {
        let json = match &payload {
            Payload::Trial(t) => serde_json::to_string(t),
            Payload::Study(s) => serde_json::to_string(s),
        }
        .expect("updates serialize");
        let mut kept = self.kept.lock().expect("lock");
        let update = Arc::new(Update { seq: kept.next, payload, json });
        kept.next += 1;
        if kept.updates.len() == KEPT {
            kept.updates.pop_front();
        }
        kept.updates.push_back(update.clone());
        // Sent under the lock, so the channel's order is the numbering's.
        let _ = self.tx.send(update);
    }

    /// Starts a watcher after the update it last saw (`Last-Event-ID`).
    /// What the backlog holds is not sent again on the receiver.
    pub fn watch(&self, last_id: Option<&str>) -> (Start, broadcast::Receiver<Arc<Update>>) {
        let kept = self.kept.lock().expect("lock");
        let rx = self.tx.subscribe();
        let start = match last_id {
            None => Start::Backlog(Vec::new()),
            Some(id) => match self.parse_id(id) {
                Some(seq)
                    if kept.updates.front().is_none_or(|u| u.seq <= seq.saturating_add(1)) =>
                {
                    Start::Backlog(kept.updates.iter().filter(|u| u.seq > seq).cloned().collect())
                }
                _ => Start::Reset,
            },
        };
        (start, rx)
    }

    /// A receiver only: for a watcher in this process, such as the command
    /// line's progress. The server's own control flow waits on
    /// [`Hub::changes`] instead.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Update>> {
        self.tx.subscribe()
    }

    fn parse_id(&self, id: &str) -> Option<u64> {
        let (epoch, seq) = id.split_once('-')?;
        (epoch.parse::<u64>().ok()? == self.epoch).then_some(())?;
        seq.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tunebook_views::types::TrialState;

    fn trial(id: i64) -> Payload {
        Payload::Trial(TrialView {
            id,
            ..TrialView::new("p", "m", Default::default(), TrialState::Queued)
        })
    }

    fn ids(start: &Start) -> Vec<u64> {
        match start {
            Start::Backlog(list) => list.iter().map(|u| u.seq).collect(),
            Start::Reset => vec![u64::MAX],
        }
    }

    #[test]
    fn a_watcher_catches_up_after_its_last_id() {
        let hub = Hub::new();
        let (_, mut first) = hub.watch(None);
        for i in 0..5 {
            hub.publish(trial(i));
        }
        let mut last = String::new();
        for _ in 0..2 {
            last = hub.id_of(&first.try_recv().unwrap());
        }
        let (start, mut rx) = hub.watch(Some(&last));
        assert_eq!(ids(&start), vec![3, 4, 5]);
        hub.publish(trial(9));
        assert_eq!(rx.try_recv().unwrap().seq, 6, "the receiver has only what is new");
    }

    #[test]
    fn a_watcher_from_a_position_gets_what_came_after_it() {
        let hub = Hub::new();
        let before = hub.position();
        assert!(matches!(&hub.watch(Some(&before)).0, Start::Backlog(l) if l.is_empty()));
        hub.publish(trial(1));
        let read = hub.position();
        hub.publish(trial(2));
        hub.publish(trial(3));
        assert_eq!(ids(&hub.watch(Some(&before)).0), vec![1, 2, 3]);
        assert_eq!(ids(&hub.watch(Some(&read)).0), vec![2, 3]);
        assert_eq!(ids(&hub.watch(Some(&hub.position())).0), Vec::<u64>::new());
        let last = format!("{}-{}", hub.epoch, u64::MAX);
        assert_eq!(ids(&hub.watch(Some(&last)).0), Vec::<u64>::new(), "the largest id");
    }

    #[test]
    fn an_unknown_or_forgotten_id_is_a_reset() {
        let hub = Hub::new();
        for i in 0..(KEPT as i64 + 10) {
            hub.publish(trial(i));
        }
        assert!(matches!(hub.watch(Some("1-1")).0, Start::Reset), "another epoch");
        let old = format!("{}-2", hub.epoch);
        assert!(matches!(hub.watch(Some(&old)).0, Start::Reset), "no longer kept");
        let recent = format!("{}-{}", hub.epoch, KEPT + 5);
        assert_eq!(ids(&hub.watch(Some(&recent)).0).len(), 5);
        assert!(matches!(hub.watch(Some("garbage")).0, Start::Reset));
    }
}
