//! A trial's stored state read back and told to every listener (the pages'
//! live feed, and the server's own waiters: a study waiting on its trials,
//! a worker waiting for one to be queued): the one way a change to a trial
//! becomes news, so that what is announced is always what is stored.

use tunebook_views::types::TrialView;

use crate::db::{Db, trials};
use crate::events::{Hub, Payload};
use crate::trial_changes::Change;

/// Announces trial `id` as stored now, and returns it; `None` when there
/// is no such trial.
pub async fn trial(db: &Db, events: &Hub, id: i64) -> Result<Option<TrialView>, sqlx::Error> {
    let Some(row) = trials::get(db, id).await? else { return Ok(None) };
    events.changes.publish(Change { trial: id, study: row.study_id, state: row.state() });
    let view = TrialView::from(row);
    events.publish(Payload::Trial(view.clone()));
    Ok(Some(view))
}
