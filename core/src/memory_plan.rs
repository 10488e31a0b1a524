//! The planner's prediction of each configuration's memory, as a study's
//! findings take it (see `tunebook_study::findings::PlanFn`): the model
//! file's weights and its K/V cache's bytes at the configuration's context
//! and cache types, split between host and GPU as llama.cpp places the
//! layers. The findings model what was measured with it, so that what the
//! settings did beyond the known structure is what they explain.

use std::collections::BTreeMap;
use std::sync::Arc;

use engine_bridge::Settings;
use engine_bridge::catalog::MODEL_SETTING;
use engine_bridge::planner::ModelInfo;
use engine_bridge::profile::EngineKind;
use engine_bridge::settings_plan;
use tunebook_study::findings::PlanFn;
use tunebook_study::{Metric, StudyDef};

use crate::checked::Checked;

/// The planner for `def`'s configurations on its profile: each model file
/// the study may load read once. `None` for an engine the planner does
/// not know, or when the study's own file cannot be read.
pub fn planner(checked: &Checked, def: &StudyDef) -> Option<PlanFn> {
    let profile = checked.profiles().iter().find(|p| p.name == def.profile)?;
    if !matches!(profile.kind, EngineKind::LlamaServer | EngineKind::LlamaCppPython) {
        return None;
    }
    let study = checked.study(def).ok()?;
    let mut names = study.values_of(MODEL_SETTING);
    names.push(def.model.clone());
    let models: BTreeMap<String, ModelInfo> = names
        .into_iter()
        .filter_map(|n| Some((n.clone(), ModelInfo::read(&profile.model(&n)?.path).ok()?)))
        .collect();
    let default = def.model.clone();
    models.contains_key(&default).then(|| remembered(models, default))
}

/// The plan of `models` by name (a configuration names one in
/// [`MODEL_SETTING`], else it is `default`), each plan remembered.
fn remembered(models: BTreeMap<String, ModelInfo>, default: String) -> PlanFn {
    let memo = settings_plan::Memo::default();
    Arc::new(move |s: &Settings, metric: Metric| {
        let name = s.get(MODEL_SETTING).unwrap_or(&default).trim();
        as_metric(memo.predicted(name, models.get(name)?, s)?, metric)
    })
}

/// What the planner predicts of `metric` ([`settings_plan::predicted`]):
/// the weights and the K/V cache on the host (peak RSS), or on the GPU
/// where layers are offloaded. A configuration that leaves the split to
/// the engine (no `n_gpu_layers` stated) is predicted with none
/// offloaded; on a machine with a GPU its trials then differ from the
/// plan, which the findings' model takes up.
fn as_metric(bytes: settings_plan::Predicted, metric: Metric) -> Option<f64> {
    match metric {
        Metric::PeakRssBytes => Some(bytes.host as f64),
        Metric::PeakGpuBytes => bytes.gpu.map(|b| b as f64),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use engine_bridge::gguf::write::LlamaSpec;

    use super::*;

    fn predicted(info: &ModelInfo, s: &Settings, metric: Metric) -> Option<f64> {
        as_metric(settings_plan::predicted(info, s)?, metric)
    }

    /// The tiny model the tests write: a quantized cache needs less, a
    /// longer context more, and settings the planner does not read (the
    /// thread count) change nothing.
    #[test]
    fn the_plan_follows_the_context_and_the_cache_types() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tiny.gguf");
        engine_bridge::gguf::write::write_random_llama(&path, &LlamaSpec::tiny(), 1).unwrap();
        let info = ModelInfo::read(&path).unwrap();
        let at = |pairs: &[(&str, &str)]| {
            let s: Settings = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            predicted(&info, &s, Metric::PeakRssBytes).unwrap()
        };
        let base = at(&[("ctx_size", "2048")]);
        assert!(at(&[("ctx_size", "4096")]) > base);
        assert!(at(&[("ctx_size", "2048"), ("cache_type_k", "q4_0")]) < base);
        assert_eq!(at(&[("ctx_size", "2048"), ("threads", "1")]), base);
        assert_eq!(predicted(&info, &Settings::new(), Metric::DecodeTps), None);
        // Remembered, the plan is the same, by the model each names.
        let plan = remembered([("tiny".to_string(), info.clone())].into(), "tiny".into());
        let settings = |pairs: &[(&str, &str)]| -> Settings {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let plan_at = |pairs: &[(&str, &str)], metric| plan(&settings(pairs), metric);
        for pairs in [&[("ctx_size", "2048")][..], &[("ctx_size", "4096"), ("threads", "2")]] {
            let direct = predicted(&info, &settings(pairs), Metric::PeakRssBytes);
            assert_eq!(plan_at(pairs, Metric::PeakRssBytes), direct);
            assert_eq!(plan_at(pairs, Metric::PeakRssBytes), direct, "remembered");
        }
        let offloaded = [("ctx_size", "2048"), ("n_gpu_layers", "99")];
        assert!(plan_at(&offloaded, Metric::PeakGpuBytes).unwrap() > 0.0);
        assert_eq!(plan_at(&offloaded[..1], Metric::PeakGpuBytes), None, "none offloaded");
        assert_eq!(plan_at(&[("model", "other")], Metric::PeakRssBytes), None);
    }
}
