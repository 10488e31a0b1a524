//! Trials' state changes as the server's own parts wait on them: a study
//! run on workers waits for one of its trials to end, a worker's claim for
//! a trial to be queued. A channel of its own, apart from the pages' live
//! feed ([`crate::events`]): it carries storage's state, not a page's view,
//! and nothing a watcher does can hold up the server's control flow.
//!
//! A waiter subscribes before it looks in the database, then waits: a
//! change between the look and the wait is not missed. When changes were
//! missed (the channel overflowed), the wait ends and the waiter looks
//! again.

use tokio::sync::broadcast;

use crate::db::trials::State;

/// Changes kept for a waiter that is slow to read them.
const CAPACITY: usize = 1024;

/// Trial `trial` (of `study`, if any) is now in `state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    pub trial: i64,
    pub study: Option<i64>,
    pub state: State,
}

pub struct Changes {
    tx: broadcast::Sender<Change>,
}

impl Default for Changes {
    fn default() -> Self {
        Self { tx: broadcast::channel(CAPACITY).0 }
    }
}

impl Changes {
    pub fn publish(&self, change: Change) {
        let _ = self.tx.send(change);
    }

    /// A waiter for changes from now on.
    pub fn subscribe(&self) -> Waiter {
        Waiter(self.tx.subscribe())
    }
}

/// Changes as one listener sees them.
pub struct Waiter(broadcast::Receiver<Change>);

impl Waiter {
    /// Waits for a change `wanted` accepts, or until some were missed.
    pub async fn until(&mut self, wanted: impl Fn(&Change) -> bool) {
        loop {
            match self.0.recv().await {
                Ok(change) if wanted(&change) => return,
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(_)) => return,
                // The server is going down: nothing more will change.
                Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(trial: i64, state: State) -> Change {
        Change { trial, study: Some(1), state }
    }

    #[tokio::test]
    async fn a_waiter_wakes_for_what_it_wants_and_not_before() {
        let changes = Changes::default();
        let mut waiter = changes.subscribe();
        changes.publish(change(1, State::Loading));
        changes.publish(change(1, State::Done));
        let ended = |c: &Change| c.state.is_final();
        waiter.until(ended).await;
        let mut wait = Box::pin(waiter.until(ended));
        assert!(futures::poll!(&mut wait).is_pending(), "nothing more has ended");
        changes.publish(change(2, State::Failed));
        wait.await;
    }

    #[tokio::test]
    async fn a_waiter_that_missed_changes_looks_again() {
        let changes = Changes::default();
        let mut waiter = changes.subscribe();
        for i in 0..(CAPACITY as i64 + 5) {
            changes.publish(change(i, State::Queued));
        }
        // None is what it wants, but some were lost: it must look again.
        waiter.until(|c| c.state == State::Done).await;
    }
}
