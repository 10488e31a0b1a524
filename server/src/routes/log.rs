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
use crate::Error;
use crate::api_error::Result;
use crate::db::{Db, trials};
use crate::routes::params::Id;

/// Lines sent first.
const TAIL_LINES: usize = 100;
/// Bytes read back from the end for those lines.
const TAIL_BYTES: u64 = 64 * 1024;
/// How often the file is looked at for more.
const EVERY: Duration = Duration::from_millis(250);
/// Bytes read from the file at a time, per follower.
const CHUNK: u64 = 64 * 1024;
/// The longest line kept whole: output without newlines is sent in pieces
/// of this size, so a follower holds at most this much unsent.
const MAX_LINE: usize = 16 * 1024;

pub async fn follow(
    State(state): State<AppState>,
    Path(Id { id }): Path<Id>,
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
            let (lines, more) = self.read().await;
            if !lines.is_empty() {
                return Some(Event::default().data(lines.join("\n")));
            }
            if more {
                continue;
            }
            if over {
                self.ended = true;
                return Some(Event::default().event("end").data("the trial has ended"));
            }
            tokio::time::sleep(EVERY).await;
        }
    }

    /// Complete lines written since the last read (the last few on the
    /// first read), at most [`CHUNK`] bytes of them, and whether the file
    /// holds more.
    async fn read(&mut self) -> (Vec<String>, bool) {
        let Ok(mut file) = tokio::fs::File::open(&self.path).await else { return (vec![], false) };
        let Ok(len) = file.metadata().await.map(|m| m.len()) else { return (vec![], false) };
        let first = self.offset.is_none();
        let from = self.offset.unwrap_or_else(|| len.saturating_sub(TAIL_BYTES)).min(len);
        if file.seek(SeekFrom::Start(from)).await.is_err() {
            return (vec![], false);
        }
        let mut bytes = Vec::new();
        let take = (len - from).min(CHUNK);
        if file.take(take).read_to_end(&mut bytes).await.is_err() {
            return (vec![], false);
        }
        self.offset = Some(from + bytes.len() as u64);
        let more = from + take < len;
        let mut lines = split(&mut self.partial, &bytes);
        if first {
            // Read from the middle of the file: the first line may be cut.
            if from > 0 && !lines.is_empty() {
                lines.remove(0);
            }
            let skip = lines.len().saturating_sub(TAIL_LINES);
            lines.drain(..skip);
        }
        (lines, more)
    }
}

/// The complete lines of `partial` with `bytes` added, `partial` left
/// holding the unfinished rest; a line longer than [`MAX_LINE`] comes out
/// in pieces of that size.
fn split(partial: &mut String, bytes: &[u8]) -> Vec<String> {
    partial.push_str(&String::from_utf8_lossy(bytes));
    let mut lines = Vec::new();
    if let Some(end) = partial.rfind('\n') {
        let complete: String = partial.drain(..=end).collect();
        // A bare carriage return (a progress line) cannot travel in an event.
        lines.extend(complete.lines().map(|l| l.replace('\r', "")));
    }
    while partial.len() > MAX_LINE {
        let at = partial.floor_char_boundary(MAX_LINE);
        let piece: String = partial.drain(..at).collect();
        lines.push(piece.replace('\r', ""));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_without_newlines_is_sent_in_pieces_never_held_whole() {
        let mut partial = String::new();
        let mut sent = Vec::new();
        for _ in 0..64 {
            sent.extend(split(&mut partial, &[b'x'; 16 * 1024 + 7]));
            assert!(partial.len() <= MAX_LINE, "{} bytes held", partial.len());
        }
        assert!(sent.iter().all(|l| l.len() <= MAX_LINE));
        assert_eq!(
            sent.iter().map(String::len).sum::<usize>() + partial.len(),
            64 * (16 * 1024 + 7)
        );
        let lines = split(&mut partial, b"\nnext line\r\nhalf");
        assert_eq!(lines.last().map(String::as_str), Some("next line"));
        assert_eq!(partial, "half");
    }
}
