//! Fresh PostgreSQL databases on this machine's server (127.0.0.1:5432, or TUNEBOOK_TEST_POSTGRES_URL), one per test.

use sqlx::{Connection, Executor};

fn postgres_admin_url() -> String {
    std::env::var("TUNEBOOK_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// A fresh PostgreSQL database, dropped by [`drop_postgres`].
pub async fn fresh_postgres() -> (String, String) {
    sqlx::any::install_default_drivers();
    let admin = postgres_admin_url();
    let name = format!("tunebook_test_{}_{}", std::process::id(), rand_suffix());
    let mut conn = sqlx::AnyConnection::connect(&admin)
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL at {admin} is needed for this test: {e}"));
    conn.execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).await.unwrap();
    let base = admin.rsplit_once('/').unwrap().0;
    (format!("{base}/{name}"), name)
}

pub async fn drop_postgres(name: &str) {
    let mut conn = sqlx::AnyConnection::connect(&postgres_admin_url()).await.unwrap();
    conn.execute(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
        .await
        .unwrap();
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos()
        as u64
}
