//! How fast workers take trials from the queue on PostgreSQL: 1,000 queued
//! trials drained by 8 workers at once (each takes a trial under a lease,
//! renews it once and finishes it), every trial checked taken exactly once.
//!
//! Run: cargo run --release -p tunebook --example queue_bench [-- TRIALS WORKERS]
//! (PostgreSQL at 127.0.0.1:5432, or TUNEBOOK_TEST_POSTGRES_URL)

#[path = "../tests/common/postgres.rs"]
mod postgres;
#[path = "../tests/common/queue_load.rs"]
#[allow(dead_code)]
mod queue_load;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let trials: usize = args.next().map_or(Ok(1000), |a| a.parse())?;
    let workers: usize = args.next().map_or(Ok(8), |a| a.parse())?;
    let (url, name) = postgres::fresh_postgres().await;
    let db = tunebook::db::Db::connect(&url).await?;
    let ids = queue_load::queued(&db, trials, "p").await;
    let rate = queue_load::drain(&db, &ids, workers).await;
    println!(
        "{trials} trials taken by {workers} workers on PostgreSQL, none twice: {rate:.0} trials/s \
         ({:.2} ms a trial: take, renew, finish)",
        1000.0 / rate
    );
    db.pool.close().await;
    postgres::drop_postgres(&name).await;
    Ok(())
}
