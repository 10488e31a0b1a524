//! Studies checked once: a server checks a definition against its
//! profiles the first time it is asked (to create, run, settle, plan,
//! report or hand to a worker) and keeps the checked study, which every
//! later ask shares.
//!
//! The profiles are read when the server starts and never change while it
//! runs, so a definition's check is the same each time; only checks that
//! pass are kept, and only the most recent [`KEEP`] of them.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use engine_bridge::Profile;
use engine_bridge::planner::ModelInfo;
use tunebook_study::{Study, StudyDef, StudyError};

/// How many checked studies are kept (the running ones and those the pages
/// are looking at).
const KEEP: usize = 64;

/// A server's checked studies, by definition.
pub struct Checked {
    profiles: Arc<Vec<Profile>>,
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    by_def: HashMap<String, Arc<Study>>,
    /// Keys oldest first, for letting go of the oldest past [`KEEP`].
    order: VecDeque<String>,
}

impl Checked {
    pub fn new(profiles: Arc<Vec<Profile>>) -> Self {
        Self { profiles, kept: Mutex::default() }
    }

    /// The profiles studies are checked against.
    pub fn profiles(&self) -> &Arc<Vec<Profile>> {
        &self.profiles
    }

    /// `def` checked against the server's profiles (see [`check`]), or
    /// what was kept when it was checked before.
    pub fn study(&self, def: &StudyDef) -> Result<Arc<Study>, StudyError> {
        // A definition is its JSON: two equal ones check the same.
        let key = serde_json::to_string(def).expect("a definition serializes");
        if let Some(study) = self.kept.lock().expect("checked studies").by_def.get(&key) {
            return Ok(study.clone());
        }
        let study = Arc::new(check(&self.profiles, def)?);
        let mut kept = self.kept.lock().expect("checked studies");
        if kept.by_def.insert(key.clone(), study.clone()).is_none() {
            kept.order.push_back(key);
        }
        while kept.order.len() > KEEP {
            let oldest = kept.order.pop_front().expect("more than KEEP");
            kept.by_def.remove(&oldest);
        }
        Ok(study)
    }

    /// How many checked studies are kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.kept.lock().unwrap().by_def.len()
    }
}

/// Checks a study against the server's profiles and the engine's catalog
/// (asked through [`Checked::study`], which keeps the answer).
fn check(profiles: &[Profile], def: &StudyDef) -> Result<Study, StudyError> {
    let profile = profiles.iter().find(|p| p.name == def.profile).ok_or_else(|| {
        let names: Vec<_> = profiles.iter().map(|p| p.name.as_str()).collect();
        StudyError(vec![format!(
            "unknown engine profile `{}` (there are: {})",
            def.profile,
            names.join(", ")
        )])
    })?;
    let models: Vec<String> = profile.models.iter().map(|m| m.name.clone()).collect();
    let mut study = def.check(&profile.catalog(), &models)?;
    let setting = engine_bridge::catalog::MODEL_SETTING;
    let mut files = study.values_of(setting);
    files.push(def.model.clone());
    files.sort();
    files.dedup();
    if let (Some(kld), true) = (&mut study.probes.kld, files.len() > 1) {
        // Divergence is measured from the best a study's files can do.
        let finest = highest_precision(profile, &files).unwrap_or_else(|| def.model.clone());
        kld.reference.insert(setting.to_string(), finest);
    }
    Ok(study)
}

/// Of several files of one model, the one of highest precision: the most
/// bytes of weights (a file that cannot be read counts as none).
fn highest_precision(profile: &Profile, names: &[String]) -> Option<String> {
    let bytes = |name: &String| {
        let path = &profile.model(name)?.path;
        Some(ModelInfo::read(path).ok()?.file_bytes)
    };
    names.iter().filter_map(|n| Some((bytes(n)?, n))).max().map(|(_, n)| n.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn demo() -> Arc<Vec<Profile>> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiles");
        Arc::new(Profile::load_dir(&dir).unwrap())
    }

    fn def(threads: u32) -> StudyDef {
        serde_json::from_value(serde_json::json!({
            "name": "kept",
            "profile": "demo",
            "model": "tiny-llama",
            "space": { "cache_type_k": ["f16", "q8_0"] },
            "fixed": { "threads": threads },
            "objectives": [{ "metric": "decode_tps" }],
            "budget": { "max_trials": 2 }
        }))
        .unwrap()
    }

    #[test]
    fn a_definition_is_checked_once_and_shared() {
        let checked = Checked::new(demo());
        let first = checked.study(&def(1)).unwrap();
        let again = checked.study(&def(1)).unwrap();
        assert!(Arc::ptr_eq(&first, &again), "the second ask shares the first check");
        let other = checked.study(&def(2)).unwrap();
        assert!(!Arc::ptr_eq(&first, &other), "another definition is its own check");
        assert_eq!(checked.len(), 2);
    }

    #[test]
    fn a_wrong_definition_is_refused_every_time_and_never_kept() {
        let checked = Checked::new(demo());
        let mut wrong = def(1);
        wrong.profile = "nowhere".into();
        for _ in 0..2 {
            let said = checked.study(&wrong).unwrap_err().to_string();
            assert!(said.contains("unknown engine profile `nowhere`"), "{said}");
        }
        assert_eq!(checked.len(), 0);
    }

    #[test]
    fn only_the_most_recent_are_kept() {
        let checked = Checked::new(demo());
        let first = checked.study(&def(1)).unwrap();
        for threads in 2..(KEEP as u32 + 2) {
            checked.study(&def(threads)).unwrap();
        }
        assert_eq!(checked.len(), KEEP);
        let again = checked.study(&def(1)).unwrap();
        assert!(!Arc::ptr_eq(&first, &again), "the oldest was let go and checked anew");
        assert_eq!(checked.len(), KEEP);
    }
}
