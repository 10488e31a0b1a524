//! CPU work a request asks for (a study's check, its findings): run on
//! tokio's blocking threads, two at a time, so the request threads keep
//! answering, and waited on only so long.

use std::time::Duration;

use tokio::sync::Semaphore;

use crate::error::{Error, Result};

/// At most this many at once: the machine's cores are the engines' too.
static TURNS: Semaphore = Semaphore::const_new(2);

/// `work`'s answer, computed off the request threads; past `bound` the
/// request is told to come back (the work runs on, and the next ask
/// waits its turn behind it).
pub async fn run<T: Send + 'static>(
    what: &str,
    bound: Duration,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T> {
    let waited = tokio::time::timeout(bound, async {
        let turn = TURNS.acquire().await.expect("never closed");
        // The turn goes with the work: held until it ends, waited on or not.
        tokio::task::spawn_blocking(move || {
            let _turn = turn;
            work()
        })
        .await
    })
    .await;
    match waited {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Err(Error::Unavailable(format!(
            "{what} took over {} s on this machine: try again in a while",
            bound.as_secs()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_past_its_bound_is_said_not_waited_for() {
        let quick = run("adding", Duration::from_secs(5), || 2 + 2).await.unwrap();
        assert_eq!(quick, 4);
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let slow = run("waiting", Duration::from_millis(50), move || rx.recv().ok()).await;
        let said = slow.unwrap_err().to_string();
        assert!(said.contains("waiting took over 0 s"), "{said}");
        drop(tx);
    }
}
