//! The database: SQLite by default (WAL mode), PostgreSQL by URL, through
//! one `AnyPool` and runtime queries, so the build needs no database.

mod migrations;
pub mod queue;
pub mod reports;
mod rows;
pub mod studies;
pub mod trials;

use std::str::FromStr;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, Executor};

/// Which database a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Sqlite,
    Postgres,
}

impl Kind {
    /// Tells the kind from the URL scheme.
    pub fn of(url: &str) -> Result<Self, sqlx::Error> {
        if url.starts_with("sqlite:") {
            Ok(Kind::Sqlite)
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Ok(Kind::Postgres)
        } else {
            Err(sqlx::Error::Configuration(
                format!("unsupported database URL `{url}`: use sqlite://… or postgres://…").into(),
            ))
        }
    }
}

/// The one row a write's `RETURNING` gave. Such writes are read with
/// `fetch_all`, never `fetch_one`: SQLite reports a failure to commit (a
/// full disk) only once the statement is stepped to its end, and a
/// statement left after its first row keeps the write lock and hides the
/// error, so the write would be acknowledged and lost.
pub fn only<T>(rows: Vec<T>) -> Result<T, sqlx::Error> {
    rows.into_iter().next().ok_or(sqlx::Error::RowNotFound)
}

/// Whether `e` says the database file is not one, or is damaged
/// (SQLite's `SQLITE_NOTADB`, `SQLITE_CORRUPT`).
pub fn is_damaged(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if matches!(d.code().as_deref(), Some("11" | "26")))
}

/// `e` said in a user's words when the file is damaged.
fn damaged(url: &str, e: sqlx::Error) -> sqlx::Error {
    if !is_damaged(&e) {
        return e;
    }
    let path = url.trim_start_matches("sqlite:").trim_start_matches("//");
    let path = path.split('?').next().unwrap_or(path);
    sqlx::Error::Protocol(format!(
        "the database file {path} is damaged ({}): restore it from a backup, or move it aside \
         to start with an empty one",
        e.as_database_error().map_or(String::new(), |d| d.message().to_string())
    ))
}

/// A connection pool with its migrations applied.
#[derive(Clone)]
pub struct Db {
    pub pool: AnyPool,
    pub kind: Kind,
}

impl Db {
    /// Connects (creating an SQLite file and its folder if needed) and
    /// applies the migrations.
    pub async fn connect(url: &str) -> Result<Self, sqlx::Error> {
        sqlx::any::install_default_drivers();
        let kind = Kind::of(url)?;
        if kind == Kind::Sqlite {
            create_sqlite_parent(url)?;
        }
        let options = Self::connect_options(url)?;
        if kind == Kind::Sqlite {
            // A damaged file is said at once, not retried until the pool
            // gives up half a minute later.
            use sqlx::Connection;
            let mut one = sqlx::AnyConnection::connect_with(&options).await?;
            if let Err(e) = one.execute("SELECT count(*) FROM sqlite_master").await {
                return Err(damaged(url, e));
            }
            one.close().await?;
        }
        let pool = AnyPoolOptions::new()
            .max_connections(if kind == Kind::Sqlite { 4 } else { 8 })
            .after_connect(move |conn, _meta| {
                Box::pin(async move {
                    if kind == Kind::Sqlite {
                        conn.execute("PRAGMA journal_mode = WAL").await?;
                        conn.execute("PRAGMA busy_timeout = 5000").await?;
                        conn.execute("PRAGMA foreign_keys = ON").await?;
                        conn.execute("PRAGMA synchronous = NORMAL").await?;
                    }
                    Ok(())
                })
            })
            .connect_with(options)
            .await?;
        migrations::migrator(kind).run(&pool).await?;
        Ok(Self { pool, kind })
    }
}

impl Db {
    /// The options for a URL. On PostgreSQL, prepared statements are not
    /// kept: sqlx 0.9.0's generic driver gives a NULL `f64` parameter the
    /// type `real` (its `Double` and `Real` are swapped), and a kept
    /// statement first run with a NULL then refuses the number of a later
    /// run ("incorrect binary data format in bind parameter").
    pub fn connect_options(url: &str) -> Result<AnyConnectOptions, sqlx::Error> {
        let url = if Kind::of(url)? == Kind::Postgres && !url.contains("statement-cache-capacity") {
            let sep = if url.contains('?') { '&' } else { '?' };
            format!("{url}{sep}statement-cache-capacity=0")
        } else {
            url.to_string()
        };
        AnyConnectOptions::from_str(&url)
    }
}

/// SQLite creates the file (with `mode=rwc`) but not its folder.
fn create_sqlite_parent(url: &str) -> Result<(), sqlx::Error> {
    let path = url.trim_start_matches("sqlite:").trim_start_matches("//");
    let path = path.split('?').next().unwrap_or_default();
    if path.is_empty() || path.starts_with(":memory:") {
        return Ok(());
    }
    if let Some(dir) = std::path::Path::new(path).parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    Ok(())
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}
