//! Room on the data folder's disk. A write that reaches a full disk can
//! fail halfway inside the database's own files; so requests that write are
//! refused, in plain words, while the disk is nearly full, and taken again
//! by themselves once there is room. Reads go on either way.

use std::path::Path;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::AppState;

/// The room kept free: a tenth of the disk, at most 64 MiB.
fn reserve(total: u64) -> u64 {
    (total / 10).min(64 << 20)
}

/// Bytes free for this process and the disk's size, where they can be read.
fn room(dir: &Path) -> Option<(u64, u64)> {
    let s = nix::sys::statvfs::statvfs(dir).ok()?;
    let block = s.fragment_size() as u64;
    Some((s.blocks_available() as u64 * block, s.blocks() as u64 * block))
}

/// Why a write would not be safe now, if it would not.
pub fn too_full(dir: &Path) -> Option<String> {
    let (free, total) = room(dir)?;
    (free < reserve(total)).then(|| {
        format!(
            "the server's disk is full ({} MiB free of {} MiB, under the {} MiB kept free): \
             nothing was stored; free some space and try again",
            free >> 20,
            total >> 20,
            reserve(total) >> 20
        )
    })
}

/// Refuses requests that write while the disk is nearly full (507).
pub async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let writes = !matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if writes && let Some(why) = too_full(&state.service.data_dir) {
        tracing::error!(path = %request.uri().path(), "{why}");
        let body = axum::Json(serde_json::json!({ "error": why }));
        return (StatusCode::INSUFFICIENT_STORAGE, body).into_response();
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenth_kept_free_at_most_64_mib() {
        assert_eq!(reserve(24 << 20), (24 << 20) / 10);
        assert_eq!(reserve(1 << 40), 64 << 20);
        let (free, total) = room(Path::new(".")).unwrap();
        assert!(free <= total && total > 0);
    }
}
