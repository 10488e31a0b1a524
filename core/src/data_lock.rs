//! One Tunebook per data folder. The folder holds the engines Tunebook
//! has running (`engines/`): a second Tunebook on it would stop them as
//! "left behind" and record the first one's trial as failed. So each
//! Tunebook (server, `run`, worker) takes an exclusive lock on
//! `tunebook.lock` in its data folder before anything else, and holds it
//! until it ends; the kernel lets go of it however the process ends.
//!
//! Two Tunebooks with their own data folders on one database would do the
//! same to each other's trials, so the database is held too
//! ([`DataLock::with_database`]): SQLite by a lock file beside its file,
//! PostgreSQL by an advisory lock on a connection kept open.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::Path;

/// The held lock; dropping it lets go.
#[derive(Debug)]
pub struct DataLock {
    _file: File,
    _database: Option<Database>,
}

/// What holds the database for this Tunebook (the connection is only
/// kept, never used again: the mutex makes it shareable).
enum Database {
    File { _held: File },
    Postgres { _held: std::sync::Mutex<sqlx::AnyConnection> },
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Database::File { .. } => "database held by a lock file",
            Database::Postgres { .. } => "database held by an advisory lock",
        })
    }
}

/// PostgreSQL's advisory lock key for "a Tunebook uses this database".
const ADVISORY_KEY: i64 = 0x7475_6e65_626f_6f6b;

impl DataLock {
    /// Holds the database at `url` too, or says another Tunebook does.
    pub async fn with_database(mut self, url: &str) -> crate::Result<Self> {
        let taken = || {
            crate::Error::Unavailable(format!(
                "another Tunebook is using the database {}: stop it first, or give this one its own database",
                shown(url)
            ))
        };
        if let Some(rest) = url.strip_prefix("sqlite:") {
            let path = rest.trim_start_matches("//").split('?').next().unwrap_or_default();
            if path.is_empty() || path.contains(":memory:") {
                return Ok(self);
            }
            let lock = format!("{path}.lock");
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&lock)?;
            match file.try_lock() {
                Ok(()) => self._database = Some(Database::File { _held: file }),
                Err(TryLockError::WouldBlock) => return Err(taken()),
                Err(TryLockError::Error(e)) => return Err(e.into()),
            }
        } else {
            use sqlx::{Connection, Row};
            let options = crate::db::Db::connect_options(url)?;
            let mut conn = sqlx::AnyConnection::connect_with(&options).await?;
            let row = sqlx::query("SELECT pg_try_advisory_lock($1) AS held")
                .bind(ADVISORY_KEY)
                .fetch_one(&mut conn)
                .await?;
            if !row.try_get::<bool, _>("held")? {
                return Err(taken());
            }
            self._database = Some(Database::Postgres { _held: std::sync::Mutex::new(conn) });
        }
        Ok(self)
    }
}

/// A database URL as it may be shown: without a password.
fn shown(url: &str) -> String {
    match (url.split_once("://"), url.rsplit_once('@')) {
        (Some((scheme, _)), Some((_, host))) => format!("{scheme}://…@{host}"),
        _ => url.to_string(),
    }
}

/// Takes the data folder's lock, or says who holds it.
pub fn take(data_dir: &Path) -> crate::Result<DataLock> {
    std::fs::create_dir_all(data_dir)?;
    let path = data_dir.join("tunebook.lock");
    let mut file =
        OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path)?;
    match file.try_lock() {
        Ok(()) => {
            file.set_len(0)?;
            file.rewind()?;
            write!(file, "{}", std::process::id())?;
            Ok(DataLock { _file: file, _database: None })
        }
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            Err(crate::Error::Unavailable(format!(
                "another Tunebook (process {}) is using the data folder {}: stop it first, or give this one its own --data-dir",
                holder.trim(),
                data_dir.display()
            )))
        }
        Err(TryLockError::Error(e)) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let first = take(dir.path()).unwrap();
        let err = take(dir.path()).unwrap_err().to_string();
        assert!(err.contains(&format!("process {}", std::process::id())), "{err}");
        drop(first);
        assert!(take(dir.path()).is_ok(), "free again once the holder ends");
    }

    #[tokio::test]
    async fn one_tunebook_a_database_whatever_its_data_folder() {
        let (a, b, db) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        let url = format!("sqlite://{}/shared.db?mode=rwc", db.path().display());
        let first = take(a.path()).unwrap().with_database(&url).await.unwrap();
        let err = take(b.path()).unwrap().with_database(&url).await.unwrap_err().to_string();
        assert!(err.contains("another Tunebook is using the database"), "{err}");
        drop(first);
        assert!(take(b.path()).unwrap().with_database(&url).await.is_ok(), "free again");
        assert_eq!(shown("postgres://me:secret@db:5432/t"), "postgres://…@db:5432/t");
    }
}
