//! One Tunebook per data folder. The folder holds the engines Tunebook
//! has running (`engines/`): a second Tunebook on it would stop them as
//! "left behind" and record the first one's trial as failed. So each
//! Tunebook (server, `run`, worker) takes an exclusive lock on
//! `tunebook.lock` in its data folder before anything else, and holds it
//! until it ends; the kernel lets go of it however the process ends.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::Path;

/// The held lock; dropping it lets go.
#[derive(Debug)]
pub struct DataLock {
    _file: File,
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
            Ok(DataLock { _file: file })
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
}
