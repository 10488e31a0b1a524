//! `/api/events`: server-sent events, one JSON trial per message, whenever
//! a trial is created or changes phase. Streams end when the server stops.

use std::convert::Infallible;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use tokio_stream::wrappers::BroadcastStream;

use crate::AppState;

pub async fn stream(
    State(state): State<AppState>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let updates = BroadcastStream::new(state.service.events.subscribe())
        // A listener that fell behind skips what it missed; the page reloads
        // the list when it reconnects.
        .filter_map(|msg| async move { msg.ok() })
        .map(|trial| Ok(Event::default().json_data(trial).expect("a trial serializes")))
        .take_until(state.shutdown.cancelled_owned());
    Sse::new(updates).keep_alive(KeepAlive::default())
}
