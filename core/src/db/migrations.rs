//! The schema's migrations, one list a database kind, built into the
//! binary from `migrations/`, as sqlx's `migrate!` builds them (its proc
//! macro would compile sqlx a second time for the building machine; see
//! `rows.rs`): version and description from the file's name, the SQL
//! whole, so a database migrated by either has the same versions and
//! checksums.

use std::borrow::Cow;

use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{AssertSqlSafe, SqlSafeStr};

use super::Kind;

/// Each kind's files as `(name, SQL)`, in version order: the two folders
/// hold the same names, one list serves both.
macro_rules! files {
    ($($name:literal),* $(,)?) => {
        const SQLITE: &[(&str, &str)] =
            &[$(($name, include_str!(concat!("../../../migrations/sqlite/", $name)))),*];
        const POSTGRES: &[(&str, &str)] =
            &[$(($name, include_str!(concat!("../../../migrations/postgres/", $name)))),*];
    };
}

files!(
    "20261121000001_trials.sql",
    "20261121000002_trial_memory.sql",
    "20261121000003_trial_measurement.sql",
    "20261121000004_studies.sql",
    "20261121000005_reports.sql",
    "20261121000006_workers.sql",
    "20261121000007_machines.sql",
    "20261123000008_context_tokens.sql",
    "20261124000009_mismatched.sql",
    "20261124000010_divergence.sql",
    "20261124000011_goodput.sql",
    "20261125000012_support.sql",
);

/// The migrations of a kind of database.
pub fn migrator(kind: Kind) -> Migrator {
    let files = match kind {
        Kind::Sqlite => SQLITE,
        Kind::Postgres => POSTGRES,
    };
    Migrator::with_migrations(files.iter().map(|(name, sql)| migration(name, sql)).collect())
}

/// A file's migration as sqlx reads it: `<version>_<description>.sql`,
/// underscores in the description read as spaces.
fn migration(name: &str, sql: &'static str) -> Migration {
    let (version, rest) = name.split_once('_').expect("a migration's name has a version");
    let version = version.parse().expect("a migration's version is a number");
    let description = rest.trim_end_matches(".sql").replace('_', " ");
    let no_tx = sql.starts_with("-- no-transaction");
    Migration::new(
        version,
        Cow::Owned(description),
        MigrationType::Simple,
        AssertSqlSafe(sql).into_sql_str(),
        no_tx,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file in `migrations/` is listed, in order, and each reads as
    /// sqlx's own reader reads it from the folder.
    #[test]
    fn every_file_is_listed_and_read_as_sqlx_reads_it() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations");
        for (dir, kind) in [("sqlite", Kind::Sqlite), ("postgres", Kind::Postgres)] {
            let read = sqlx::migrate::resolve_blocking(&root.join(dir)).unwrap();
            let built = migrator(kind);
            assert_eq!(built.migrations.len(), read.len(), "{dir}: a file is not listed");
            for (ours, (theirs, _)) in built.migrations.iter().zip(&read) {
                assert_eq!(
                    (ours.version, &ours.description, ours.migration_type, ours.no_tx),
                    (theirs.version, &theirs.description, theirs.migration_type, theirs.no_tx)
                );
                assert_eq!(ours.checksum, theirs.checksum, "{dir}: {}", ours.version);
            }
        }
    }
}
