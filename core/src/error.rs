//! The application's one error type. Each error says what kind of failure
//! it is ([`Kind`]: the server answers each kind with its HTTP status) and
//! what its user is told; the detail of a fault of the server's own is
//! logged and hidden from the client.

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

    /// What kind of failure it is.
    pub fn kind(&self) -> Kind {
        if self.is_disk_full() {
            return Kind::DiskFull;
        }
        if self.outside().is_some() {
            return Kind::Unavailable;
        }
        match self {
            Error::BadRequest(_) | Error::Invalid(_) => Kind::BadRequest,
            Error::NotFound => Kind::NotFound,
            Error::Conflict(_) => Kind::Conflict,
            Error::Gone(_) => Kind::Gone,
            Error::Unauthorized(_) => Kind::Unauthorized,
            Error::Unavailable(_) => Kind::Unavailable,
            _ => Kind::Internal,
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

    /// What a client of the JSON API is told: the request's fault as it
    /// is, a fault outside the server in words, its own fault only as
    /// "internal server error" (the detail is logged).
    pub fn for_client(self) -> String {
        if let Error::Unavailable(m) = self {
            m
        } else if let Some(said) = self.outside() {
            tracing::error!(error = ?self, "{said}");
            said.to_string()
        } else if self.kind() == Kind::Internal {
            tracing::error!(error = ?self, "request failed");
            "internal server error".to_string()
        } else {
            self.to_string()
        }
    }
}

/// What kind of failure an error is: who is at fault, and whether trying
/// again may help. The server answers each with an HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The request was wrong, or a study does not check.
    BadRequest,
    NotFound,
    /// Made against an outdated version.
    Conflict,
    /// Withdrawn.
    Gone,
    /// Who is asking could not be told, or may not.
    Unauthorized,
    /// Something needed is missing or held by another program, or the
    /// database is damaged: nothing was done.
    Unavailable,
    /// A write found the disk full: nothing was stored.
    DiskFull,
    /// The server's own fault.
    Internal,
}
