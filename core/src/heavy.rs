//! CPU work a request asks for (a study's check, its findings): run on
//! tokio's blocking threads, two at a time per server, so the request
//! threads keep answering, and waited on only so long.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::error::{Error, Result};

/// At most this many at once: the machine's cores are the engines' too.
const AT_ONCE: usize = 2;

/// One server's turns at CPU work, shared by its copies. Owned by the
/// server rather than the process, so that servers in one process (the
/// tests') never wait on each other's work.
#[derive(Clone)]
pub struct Turns(Arc<Semaphore>);

impl Default for Turns {
    fn default() -> Self {
        Self(Arc::new(Semaphore::new(AT_ONCE)))
    }
}

impl Turns {
    /// `work`'s answer, computed off the request threads; past `bound` the
    /// request is told to come back (the work runs on, and the next ask
    /// waits its turn behind it).
    pub async fn run<T: Send + 'static>(
        &self,
        what: &str,
        bound: Duration,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T> {
        let waited = tokio::time::timeout(bound, async {
            let turn = self.0.clone().acquire_owned().await.expect("never closed");
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_past_its_bound_is_said_not_waited_for() {
        let turns = Turns::default();
        let quick = turns.run("adding", Duration::from_secs(5), || 2 + 2).await.unwrap();
        assert_eq!(quick, 4);
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let slow = turns.run("waiting", Duration::from_millis(50), move || rx.recv().ok()).await;
        let said = slow.unwrap_err().to_string();
        assert!(said.contains("waiting took over 0 s"), "{said}");
        drop(tx);
    }

    #[tokio::test]
    async fn one_servers_work_never_waits_on_anothers() {
        let (busy, other) = (Turns::default(), Turns::default());
        let (release, hold) = tokio::sync::watch::channel(false);
        let (started, mut running) = tokio::sync::mpsc::unbounded_channel();
        let mut held = Vec::new();
        for _ in 0..AT_ONCE {
            let (busy, mut hold, started) = (busy.clone(), hold.clone(), started.clone());
            held.push(tokio::spawn(async move {
                busy.run("holding", Duration::from_secs(60), move || {
                    started.send(()).unwrap();
                    let wait = hold.wait_for(|go| *go);
                    tokio::runtime::Handle::current().block_on(wait).map(drop).ok()
                })
                .await
            }));
        }
        for _ in 0..AT_ONCE {
            running.recv().await.unwrap();
        }
        // The busy server's turns are all taken: its next ask waits…
        let waits = busy.run("waiting", Duration::from_millis(100), || ()).await;
        assert!(waits.is_err(), "every turn of the busy server is held");
        // …while the other server's is answered.
        let answered = other.run("adding", Duration::from_secs(5), || 2 + 2).await.unwrap();
        assert_eq!(answered, 4);
        release.send(true).unwrap();
        for h in held {
            h.await.unwrap().unwrap();
        }
    }
}
