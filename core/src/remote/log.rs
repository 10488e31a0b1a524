//! A worker's report of its engine's output, added to the trial's log
//! here (which `/api/trials/{id}/log` follows as it does a local engine's):
//! each report's end kept, the whole log bounded.

use crate::service::Service;

/// Most output one report from a worker adds (its end is kept).
const MAX_LOG_REPORT: usize = 512 * 1024;
/// Most output kept of one worker's trial.
const MAX_LOG_FILE: u64 = 64 * 1024 * 1024;

/// Appends `text` to trial `trial`'s log; a failure to is logged, not
/// raised: the measurement matters more than the engine's words.
pub async fn append_log(service: &Service, trial: i64, text: &str) {
    use tokio::io::AsyncWriteExt;
    if text.is_empty() {
        return;
    }
    let text = match text.len().checked_sub(MAX_LOG_REPORT) {
        Some(cut) if cut > 0 => {
            let at = text.ceil_char_boundary(cut);
            format!("[… {at} bytes of this report left out …]\n{}", &text[at..])
        }
        _ => text.to_string(),
    };
    let path = service.logs_dir.join(format!("trial-{trial}.log"));
    let written = async {
        let kept = tokio::fs::metadata(&path).await.map_or(0, |m| m.len());
        if kept > MAX_LOG_FILE {
            return Ok(());
        }
        tokio::fs::create_dir_all(&service.logs_dir).await?;
        let mut file = tokio::fs::OpenOptions::new().create(true).append(true).open(&path).await?;
        file.write_all(text.as_bytes()).await
    };
    if let Err(e) = written.await {
        tracing::warn!(trial, error = %e, "could not keep a worker's engine output");
    }
}
