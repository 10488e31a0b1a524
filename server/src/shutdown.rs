//! The signals that stop a command: Ctrl-C and SIGTERM (what service
//! managers and `kill` send), taken alike by every long-running command.

/// Resolves on Ctrl-C or SIGTERM.
pub async fn signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down");
}
