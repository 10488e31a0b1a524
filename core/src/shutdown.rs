//! The signals that stop a command: Ctrl-C and SIGTERM (what service
//! managers and `kill` send), taken alike by every long-running command.

/// Resolves on Ctrl-C or SIGTERM. The handlers are installed when this is
/// called, not when the future is first polled: a server can answer
/// requests before the task awaiting its shutdown has run, and a SIGTERM
/// in between would otherwise meet the default action and end it at once.
pub fn signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut interrupt = signal(SignalKind::interrupt()).expect("SIGINT handler");
    async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = term.recv() => {}
        }
        tracing::info!("shutting down");
    }
}
