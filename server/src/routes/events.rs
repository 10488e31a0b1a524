//! `/api/events`: server-sent events whenever a trial is created or changes
//! phase (plain messages, one JSON trial each) and whenever something
//! happens to a study (`event: study`, a JSON `StudyUpdate`).
//!
//! Every event has an id. A browser's `EventSource` sends the last one back
//! when it reconnects (`Last-Event-ID`), and the stream starts with what it
//! missed; when that is no longer known (the server restarted, or too much
//! happened) the stream starts with `event: reset`, and the page reloads its
//! data. A watcher too slow to keep up gets a reset too, never a silent gap.
//! A page's first connection names where the feed stood before its data
//! was read (`?after=ID`, from the page's head), so that what happened
//! while it loaded reaches it; `Last-Event-ID`, where the browser sends
//! one, is newer and wins. Streams end when the server stops.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt, stream};
use tokio::sync::broadcast::error::RecvError;

use crate::AppState;
use crate::Error;
use crate::events::{Hub, Start, Update};

/// `?after=`: an event id, `EPOCH-SEQ`.
#[derive(serde::Deserialize)]
pub struct After {
    after: Option<String>,
}

/// The longest event id: two 64-bit numbers and a dash.
const MAX_ID: usize = 41;

pub async fn stream(
    State(state): State<AppState>,
    Query(After { after }): Query<After>,
    headers: HeaderMap,
) -> crate::api_error::Result<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    if let Some(after) = &after
        && !is_event_id(after)
    {
        return Err(Error::BadRequest(format!(
            "after: `{}` is not an event id (two numbers joined by a dash)",
            after.chars().take(MAX_ID).collect::<String>()
        ))
        .into());
    }
    let hub = state.service.events.clone();
    let header = headers.get("last-event-id").and_then(|v| v.to_str().ok());
    let (start, rx) = hub.watch(header.or(after.as_deref()));
    let first: Vec<Event> = match start {
        Start::Backlog(list) => list.iter().map(|u| event(&hub, u)).collect(),
        Start::Reset => vec![reset(&hub)],
    };
    let live = stream::unfold((rx, hub), |(mut rx, hub)| async move {
        let next = match rx.recv().await {
            Ok(update) => event(&hub, &update),
            // Fell behind: say so, and carry on from here.
            Err(RecvError::Lagged(_)) => reset(&hub),
            Err(RecvError::Closed) => return None,
        };
        Some((next, (rx, hub)))
    });
    let updates =
        stream::iter(first).chain(live).map(Ok).take_until(state.shutdown.cancelled_owned());
    Ok(Sse::new(updates).keep_alive(KeepAlive::default()))
}

fn is_event_id(id: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    id.len() <= MAX_ID && id.split_once('-').is_some_and(|(a, b)| digits(a) && digits(b))
}

fn event(hub: &Hub, update: &Arc<Update>) -> Event {
    let event = Event::default().id(hub.id_of(update)).data(&update.json);
    match update.event_name() {
        Some(name) => event.event(name),
        None => event,
    }
}

/// A reset carries the feed's position: the page reloads its data after
/// it, so what it must hear next is what comes after that.
fn reset(hub: &Hub) -> Event {
    Event::default().id(hub.position()).event("reset").data("reload")
}
