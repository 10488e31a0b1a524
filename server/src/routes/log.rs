//! `/api/trials/{id}/log`: the engine's output for a trial as server-sent
//! events — its last lines first, then each new batch of lines as the
//! engine writes them, until the trial has ended (`event: end`). A trial
//! that has ended gets its last lines and the end at once.
//!
//! The engine's output goes to `data/logs/trial-N.log` as it comes; this
//! follows that file from the server (a browser never polls).

use std::convert::Infallible;
use std::io::SeekFrom;
use std::path::PathBuf;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt, stream};
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use crate::AppState;
use crate::db::{Db, trials};
use crate::error::{Error, Result};

/// Lines sent first.
const TAIL_LINES: usize = 100;
/// Bytes read back from the end for those lines.
const TAIL_BYTES: u64 = 64 * 1024;
/// How often the file is looked at for more.
const EVERY: Duration = Duration::from_millis(250);

pub async fn follow(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> Result<Sse<impl Stream<Item = std::result::Result<Event, Infallible>>>> {
    let db = state.service.db.clone();
    trials::get(&db, id).await?.ok_or(Error::NotFound)?;
    let path = state.service.logs_dir.join(format!("trial-{id}.log"));
    let follower = Follower { db, id, path, offset: None, partial: String::new(), ended: false };
    let events = stream::unfold(follower, |mut f| async move {
        let event = f.next().await?;
        Some((Ok(event), f))
    })
    .take_until(state.shutdown.cancelled_owned());
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}

struct Follower {
    db: Db,
    id: i64,
    path: PathBuf,
    /// How far the file has been read (`None`: not yet opened).
    offset: Option<u64>,
    /// A line the engine has not finished writing.
    partial: String,
    ended: bool,
}

impl Follower {
    /// The next batch of lines, the end, or nothing more.
    async fn next(&mut self) -> Option<Event> {
        if self.ended {
            return None;
        }
        loop {
            // Whether the trial had ended before this read: then what the
            // read finds is all there will be.
            let over = trials::get(&self.db, self.id)
                .await
                .ok()
                .flatten()
                .is_none_or(|t| t.state().is_final());
            let lines = self.read().await;
            if !lines.is_empty() {
                return Some(Event::default().data(lines.join("\n")));
            }
            if over {
                self.ended = true;
                return Some(Event::default().event("end").data("the trial has ended"));
            }
            tokio::time::sleep(EVERY).await;
        }
    }

    /// Complete lines written since the last read (the last few on the
    /// first read).
    async fn read(&mut self) -> Vec<String> {
        let Ok(mut file) = tokio::fs::File::open(&self.path).await else { return vec![] };
        let Ok(len) = file.metadata().await.map(|m| m.len()) else { return vec![] };
        let first = self.offset.is_none();
        let from = self.offset.unwrap_or_else(|| len.saturating_sub(TAIL_BYTES)).min(len);
        if file.seek(SeekFrom::Start(from)).await.is_err() {
            return vec![];
        }
        let mut bytes = Vec::new();
        if file.take(len - from).read_to_end(&mut bytes).await.is_err() {
            return vec![];
        }
        self.offset = Some(from + bytes.len() as u64);
        self.partial.push_str(&String::from_utf8_lossy(&bytes));
        let Some(end) = self.partial.rfind('\n') else { return vec![] };
        let complete: String = self.partial.drain(..=end).collect();
        // A bare carriage return (a progress line) cannot travel in an event.
        let mut lines: Vec<String> = complete.lines().map(|l| l.replace('\r', "")).collect();
        if first {
            // Read from the middle of the file: the first line may be cut.
            if from > 0 && !lines.is_empty() {
                lines.remove(0);
            }
            let skip = lines.len().saturating_sub(TAIL_LINES);
            lines.drain(..skip);
        }
        lines
    }
}
