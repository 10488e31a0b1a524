//! A trial's stored state read back and told to every listener (the pages'
//! live feed, a study waiting on its trials): the one way a change to a
//! trial becomes news, so that what is announced is always what is stored.

use tunebook_app::types::TrialView;

use crate::db::{Db, trials};
use crate::events::{Hub, Payload};

/// Announces trial `id` as stored now, and returns it; `None` when there
/// is no such trial.
pub async fn trial(db: &Db, events: &Hub, id: i64) -> Result<Option<TrialView>, sqlx::Error> {
    let view = trials::get(db, id).await?.map(TrialView::from);
    if let Some(v) = &view {
        events.publish(Payload::Trial(v.clone()));
    }
    Ok(view)
}
