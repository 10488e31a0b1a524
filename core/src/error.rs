//! The server's one error type: each variant knows its HTTP status; server
//! errors are logged and their detail hidden from the client.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// Anything a request or start-up can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request was wrong; the message says how.
    #[error("{0}")]
    BadRequest(String),
    /// A study that does not parse or does not check: every problem.
    #[error(transparent)]
    Invalid(#[from] tunebook_study::StudyError),
    #[error("not found")]
    NotFound,
    /// The change was made against an outdated version.
    #[error("{0}")]
    Conflict(String),
    /// Who is asking could not be told, or may not.
    #[error("{0}")]
    Unauthorized(String),
    /// It existed and was withdrawn.
    #[error("{0}")]
    Gone(String),
    /// Something the server needs is missing (a file the build makes).
    #[error("{0}")]
    Unavailable(String),
    #[error("database error")]
    Database(#[from] sqlx::Error),
    #[error("database migration failed")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error(transparent)]
    Profile(#[from] engine_bridge::profile::ProfileError),
    #[error("i/o error")]
    Io(#[from] std::io::Error),
}

/// Results default to this crate's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What a request is told when another program holds the database.
const DATABASE_HELD: &str = "the database is held by another program (or another \
    Tunebook): nothing was stored; try again once it lets go";

/// What a request is told when the database file is damaged.
const DAMAGED: &str = "the server's database file is damaged: nothing was read or stored; \
    restore it from a backup (the server's log says where it is)";

/// What a request is told when a write found the disk full.
const DISK_FULL: &str =
    "the server's disk is full: nothing was stored; free some space and try again";

impl Error {
    /// Whether a write failed for want of disk space (SQLite's `SQLITE_FULL`,
    /// PostgreSQL's `disk_full`, `ENOSPC` from a file).
    pub fn is_disk_full(&self) -> bool {
        match self {
            Error::Database(sqlx::Error::Database(e)) => {
                matches!(e.code().as_deref(), Some("13" | "53100"))
                    || e.message().contains("disk is full")
                    || e.message().contains("No space left")
            }
            Error::Io(e) => e.raw_os_error() == Some(28),
            _ => false,
        }
    }

    /// Whether the database stayed locked by someone else past the wait
    /// (SQLite's `SQLITE_BUSY`; PostgreSQL's `lock_not_available`).
    pub fn is_database_held(&self) -> bool {
        match self {
            Error::Database(sqlx::Error::Database(e)) => {
                matches!(e.code().as_deref(), Some("5" | "55P03"))
                    || e.message().contains("database is locked")
            }
            _ => false,
        }
    }

    /// What a user is told of a fault outside the request, if it is one.
    fn outside(&self) -> Option<&'static str> {
        if self.is_disk_full() {
            Some(DISK_FULL)
        } else if self.is_database_held() {
            Some(DATABASE_HELD)
        } else if matches!(self, Error::Database(e) if crate::db::is_damaged(e)) {
            Some(DAMAGED)
        } else {
            None
        }
    }

    pub fn status_code(&self) -> StatusCode {
        if self.is_disk_full() {
            return StatusCode::INSUFFICIENT_STORAGE;
        }
        if self.outside().is_some() {
            return StatusCode::SERVICE_UNAVAILABLE;
        }
        match self {
            Error::BadRequest(_) | Error::Invalid(_) => StatusCode::BAD_REQUEST,
            Error::NotFound => StatusCode::NOT_FOUND,
            Error::Conflict(_) => StatusCode::CONFLICT,
            Error::Gone(_) => StatusCode::GONE,
            Error::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Error::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// What the pages show of it: what was wrong, in the user's terms, one
    /// problem a line; a server's own failure is logged and summed up.
    pub fn for_user(self) -> String {
        match self {
            Error::BadRequest(m)
            | Error::Conflict(m)
            | Error::Gone(m)
            | Error::Unavailable(m)
            | Error::Unauthorized(m) => m,
            Error::Invalid(e) => e.0.join("\n"),
            Error::NotFound => "not found".into(),
            other if other.outside().is_some() => {
                let said = other.outside().unwrap_or_default();
                tracing::error!(error = ?other, "{said}");
                said.into()
            }
            other => {
                tracing::error!(error = ?other, "request failed");
                "the server could not read or write its database or files".into()
            }
        }
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status = self.status_code();
        let message = if let Error::Unavailable(m) = &self {
            m.clone()
        } else if let Some(said) = self.outside() {
            tracing::error!(error = ?self, "{said}");
            said.to_string()
        } else if status.is_server_error() {
            tracing::error!(error = ?self, "request failed");
            "internal server error".to_string()
        } else {
            self.to_string()
        };
        (status, Json(json!({ "error": message }))).into_response()
    }
}
