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
use engine_bridge::placement::GPU_SPLIT;
use engine_bridge::planner::ModelInfo;
use engine_bridge::profile::EngineKind;
use engine_bridge::settings_plan::{self, Predicted};
use tunebook_study::findings::PlanFn;
use tunebook_study::strategy::GpuFillFn;
use tunebook_study::{Metric, StudyDef};

use crate::checked::Checked;

/// The planner for `def`'s configurations on its profile: each model file
/// the study may load read once. `None` for an engine the planner does
/// not know, or when the study's own file cannot be read.
pub fn planner(checked: &Checked, def: &StudyDef) -> Option<PlanFn> {
    let plans = Plans::read(checked, def)?;
    Some(Arc::new(move |s: &Settings, metric: Metric| as_metric(plans.of(s)?, metric)))
}

/// How full the planner predicts a configuration leaves the GPUs, for the
/// search (see `tunebook_study::strategy::GpuFillFn`): the fullest GPU's
/// planned bytes over its memory, `sizes` in the engine's order of
/// devices (from `nvidia-smi`). Where the sizes are not known (no GPU
/// here, or the study runs on other machines), the GPUs' bytes together;
/// but not where the study varies how layers are dealt among GPUs
/// ([`GPU_SPLIT`]): the bytes together do not say which GPU runs out, and
/// on the strategy benchmark's `split` they left five of 15 searches
/// short of 95 % of the front at 200 trials where one had been.
pub fn gpu_fill(checked: &Checked, def: &StudyDef, sizes: Vec<u64>) -> Option<GpuFillFn> {
    if sizes.is_empty() {
        let study = checked.study(def).ok()?;
        if study.space.params.iter().any(|p| GPU_SPLIT.contains(&p.name.as_str())) {
            return None;
        }
    }
    let plans = Plans::read(checked, def)?;
    Some(Arc::new(move |s: &Settings| fill(&plans.of(s)?, &sizes)))
}

/// A configuration's fill (see [`gpu_fill`]): `None` with no layer
/// offloaded.
fn fill(planned: &Predicted, sizes: &[u64]) -> Option<f64> {
    match sizes.is_empty() {
        true => planned.gpu.map(|b| b as f64),
        false => planned.fullest(sizes),
    }
}

/// The model files a study may load, read once, and their plans
/// remembered.
struct Plans {
    models: BTreeMap<String, ModelInfo>,
    /// The study's model: a configuration names another in
    /// [`MODEL_SETTING`].
    default: String,
    memo: settings_plan::Memo,
}

impl Plans {
    /// `None` for an engine the planner does not know, or when the
    /// study's own file cannot be read.
    fn read(checked: &Checked, def: &StudyDef) -> Option<Self> {
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
        models.contains_key(&default).then(|| Self::of_models(models, default))
    }

    fn of_models(models: BTreeMap<String, ModelInfo>, default: String) -> Self {
        Plans { models, default, memo: settings_plan::Memo::default() }
    }

    /// The plan of `s`, by the model it names.
    fn of(&self, s: &Settings) -> Option<Predicted> {
        let name = s.get(MODEL_SETTING).unwrap_or(&self.default).trim();
        self.memo.predicted(name, self.models.get(name)?, s)
    }
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
        let plans = Plans::of_models([("tiny".to_string(), info.clone())].into(), "tiny".into());
        let settings = |pairs: &[(&str, &str)]| -> Settings {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let plan_at =
            |pairs: &[(&str, &str)], metric| as_metric(plans.of(&settings(pairs))?, metric);
        for pairs in [&[("ctx_size", "2048")][..], &[("ctx_size", "4096"), ("threads", "2")]] {
            let direct = predicted(&info, &settings(pairs), Metric::PeakRssBytes);
            assert_eq!(plan_at(pairs, Metric::PeakRssBytes), direct);
            assert_eq!(plan_at(pairs, Metric::PeakRssBytes), direct, "remembered");
        }
        let offloaded = [("ctx_size", "2048"), ("n_gpu_layers", "99")];
        assert!(plan_at(&offloaded, Metric::PeakGpuBytes).unwrap() > 0.0);
        assert_eq!(plan_at(&offloaded[..1], Metric::PeakGpuBytes), None, "none offloaded");
        assert_eq!(plan_at(&[("model", "other")], Metric::PeakRssBytes), None);

        // Dealt 1 to 3 between GPUs of 1 and 2 GiB: the fuller one's share
        // of its memory; without their sizes, the bytes together.
        let dealt = |split: &str| {
            let s =
                settings(&[("ctx_size", "2048"), ("n_gpu_layers", "99"), ("tensor_split", split)]);
            plans.of(&s).unwrap()
        };
        let planned = dealt("1,3");
        let gpu = planned.gpu.unwrap() as f64;
        assert_eq!(planned.gpus.len(), 2);
        assert!((planned.gpus.iter().sum::<u64>() as f64 - gpu).abs() <= 2.0, "{planned:?}");
        let sizes = [1u64 << 30, 2 << 30];
        let share = |i: usize| planned.gpus[i] as f64 / sizes[i] as f64;
        assert_eq!(fill(&planned, &sizes), Some(share(0).max(share(1))));
        assert!(dealt("3,1").gpus[0] > planned.gpus[0], "the other way, the first holds more");
        assert_eq!(fill(&planned, &[]), Some(gpu));
        assert_eq!(fill(&planned, &[1 << 30]), None, "two GPUs dealt, one known");
        assert_eq!(fill(&plans.of(&settings(&[("ctx_size", "2048")])).unwrap(), &[1 << 30]), None);
    }

    /// The search's fill: by each GPU's memory where it is known; else the
    /// bytes together, and none where the study deals layers among GPUs.
    #[test]
    fn the_fill_is_left_out_where_the_bytes_together_cannot_tell() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tiny.gguf");
        engine_bridge::gguf::write::write_random_llama(&path, &LlamaSpec::tiny(), 1).unwrap();
        let toml = format!(
            "name = \"p\"\nkind = \"llama-server\"\nbinary = \"/bin/true\"\n\
             [[models]]\nname = \"m\"\npath = {:?}\n",
            path.display().to_string()
        );
        std::fs::write(dir.path().join("p.toml"), toml).unwrap();
        let profiles = engine_bridge::Profile::load_dir(dir.path()).unwrap();
        let checked = Checked::new(Arc::new(profiles));
        let def = |space: serde_json::Value| -> StudyDef {
            serde_json::from_value(serde_json::json!({
                "name": "fill", "profile": "p", "model": "m", "space": space,
                "fixed": { "ctx_size": 2048 },
                "objectives": [{ "metric": "decode_tps" }],
                "budget": { "max_trials": 4 }
            }))
            .unwrap()
        };
        let layers = def(serde_json::json!({ "n_gpu_layers": { "min": 0, "max": 5 } }));
        let dealt = def(serde_json::json!({
            "n_gpu_layers": { "min": 0, "max": 5 }, "tensor_split": ["1,3", "3,1"]
        }));
        let at = |pairs: &[(&str, &str)]| -> Settings {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let all = at(&[("n_gpu_layers", "5"), ("tensor_split", "1,3")]);
        let together = gpu_fill(&checked, &layers, vec![]).expect("one GPU's bytes");
        assert!(together(&all).unwrap() > 1e6, "bytes, not a share");
        assert_eq!(together(&at(&[("n_gpu_layers", "0")])), None);
        assert!(gpu_fill(&checked, &dealt, vec![]).is_none(), "which GPU runs out is not known");
        let sizes = vec![1 << 30, 2 << 30];
        let fuller = gpu_fill(&checked, &dealt, sizes).expect("each GPU's size known");
        assert!(fuller(&all).unwrap() < 1.0, "a share of a GPU's memory");
    }
}
