//! Where Tunebook finds its things when the command line and environment
//! do not say. Run from a checkout, the checkout's own folders (`profiles`,
//! `data`, `target/site`); run from anywhere else, the user's XDG folders
//! for profiles (`~/.config/tunebook/profiles`) and data
//! (`~/.local/share/tunebook`), and the browser bundle installed beside the
//! binary (`site/` next to it, or `../share/tunebook/site`).

use std::path::{Path, PathBuf};

use etcetera::BaseStrategy;

/// The folder of engine profiles: `profiles` here, else the user's.
pub fn profiles() -> PathBuf {
    here_or("profiles", |xdg| xdg.config_dir().join("tunebook/profiles"))
}

/// The data folder (database, engine logs): `data` here, else the user's.
pub fn data() -> PathBuf {
    here_or("data", |xdg| xdg.data_dir().join("tunebook"))
}

/// The folder holding the browser bundle under `pkg/`: `target/site` here,
/// else beside the binary.
pub fn site() -> PathBuf {
    let local = PathBuf::from("target/site");
    if local.is_dir() {
        return local;
    }
    let exe = std::env::current_exe().ok();
    let beside = exe.as_deref().and_then(Path::parent).map(site_beside);
    beside.flatten().unwrap_or(local)
}

/// Where an installed bundle sits for a binary in `bin`: `bin/site`, or
/// `bin/../share/tunebook/site` (a prefix install).
fn site_beside(bin: &Path) -> Option<PathBuf> {
    [bin.join("site"), bin.join("../share/tunebook/site")]
        .into_iter()
        .find(|p| p.join("pkg").is_dir())
}

/// `local` when it exists in the working folder, else the XDG folder
/// (`local` itself where no home folder is known).
fn here_or(local: &str, xdg: impl Fn(&etcetera::base_strategy::Xdg) -> PathBuf) -> PathBuf {
    let here = PathBuf::from(local);
    if here.exists() {
        return here;
    }
    etcetera::base_strategy::Xdg::new().map(|x| xdg(&x)).unwrap_or(here)
}

#[cfg(test)]
mod tests {
    use super::site_beside;

    #[test]
    fn an_installed_bundle_is_found_beside_the_binary_or_under_its_prefix() {
        let root = tempfile::tempdir().unwrap();
        let bin = root.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        assert_eq!(site_beside(&bin), None);
        std::fs::create_dir_all(root.path().join("share/tunebook/site/pkg")).unwrap();
        assert_eq!(site_beside(&bin), Some(bin.join("../share/tunebook/site")));
        std::fs::create_dir_all(bin.join("site/pkg")).unwrap();
        assert_eq!(site_beside(&bin), Some(bin.join("site")));
    }
}
