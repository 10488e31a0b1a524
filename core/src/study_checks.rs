//! Checks of a study before it runs: against the server's profiles, the
//! engine's catalog and endpoints, and the planner's memory fit; and the
//! designer's preview (the space's size, what will not fit, how long it
//! should take).

use std::collections::BTreeMap;

use engine_bridge::planner::ModelInfo;
use engine_bridge::profile::EngineKind;
use engine_bridge::settings_plan::{self, Asked, Planned};
use engine_bridge::{Profile, Settings};
use tunebook_study::{Study, StudyDef, StudyError};
use tunebook_views::types::CheckView;

use crate::db::trials;

/// Checks that every endpoint a study names (its `llm` strategy's, its
/// quality judge's) is one of the server's.
pub fn check_endpoints(
    endpoints: &engine_bridge::endpoints::Endpoints,
    def: &StudyDef,
) -> Result<(), StudyError> {
    let judge = def.probes.as_ref().and_then(|p| p.quality.as_ref()?.judge.as_ref());
    let named = def.strategy.endpoint.iter().chain(judge.map(|j| &j.endpoint));
    let errors: Vec<String> =
        named.filter_map(|name| engine_bridge::endpoints::named(endpoints, name).err()).collect();
    if errors.is_empty() { Ok(()) } else { Err(StudyError(errors)) }
}

/// Checks what a study asks of this machine: a study that runs here (not
/// on workers) may not vary where layers go when its engine's build has
/// no GPU to put them on.
pub async fn check_machine(profiles: &[Profile], def: &StudyDef) -> Result<(), StudyError> {
    let Some(profile) = profiles.iter().find(|p| p.name == def.profile) else { return Ok(()) };
    let varied: Vec<&str> = tunebook_views::GPU_PLACEMENT
        .iter()
        .copied()
        .filter(|s| def.space.contains_key(*s))
        .collect();
    if !def.machines.is_empty() || varied.is_empty() {
        return Ok(());
    }
    // The build's own word: a CPU-only llama.cpp lists no device.
    if engine_bridge::devices::offload_devices(profile).await.is_none_or(|d| !d.is_empty()) {
        return Ok(());
    }
    Err(StudyError(vec![format!(
        "this engine's build has no GPU to place layers on (its --list-devices names none), so \
         every value of {} runs the same on the CPU: leave {} out, or run the study on workers \
         that have GPUs",
        varied.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", "),
        if varied.len() == 1 { "it" } else { "them" },
    )]))
}

/// The planner's memory check for one study: each model file it may load
/// read once, the machine's available memory and free GPU memory read
/// once. It applies to llama.cpp; a configuration that leaves the split
/// between GPU and host to the engine (no `n_gpu_layers` on a machine with
/// a GPU) is not judged.
pub(crate) struct FitCheck {
    /// The study's own model, which a configuration loads unless it names
    /// another (see [`engine_bridge::catalog::MODEL_SETTING`]).
    default: String,
    models: BTreeMap<String, ModelInfo>,
    available: Option<u64>,
    gpu_free: Option<u64>,
}

impl FitCheck {
    pub(crate) async fn new(profile: &Profile, study: &Study) -> Self {
        let applies = matches!(profile.kind, EngineKind::LlamaServer | EngineKind::LlamaCppPython);
        let mut names = vec![study.def.model.clone()];
        names.extend(study.values_of(engine_bridge::catalog::MODEL_SETTING));
        let models: BTreeMap<String, ModelInfo> = names
            .into_iter()
            .filter(|_| applies)
            .filter_map(|n| Some((n.clone(), ModelInfo::read(&profile.model(&n)?.path).ok()?)))
            .collect();
        let available = engine_bridge::memory::mem_available();
        let gpu_free = match models.is_empty() {
            true => None,
            false => engine_bridge::memory::gpu_free_bytes().await,
        };
        Self { default: study.def.model.clone(), models, available, gpu_free }
    }

    /// Why `config` cannot fit, if the planner says so.
    pub(crate) fn will_not_fit(&self, config: &Settings) -> Option<String> {
        let name = config.get(engine_bridge::catalog::MODEL_SETTING).unwrap_or(&self.default);
        let (info, available) = (self.models.get(name.trim())?, self.available.as_ref()?);
        let asked = Asked::of(config).ok()?;
        let ctx = asked.ctx?;
        if config.get("n_gpu_layers").is_none() && self.gpu_free.is_some() {
            // The engine chooses (or fits) the layers: nothing to predict.
            return None;
        }
        let gpu_free = if asked.placement.gpu_layers == 0 { 0 } else { self.gpu_free? };
        let (plan, where_) = match settings_plan::plan(info, &asked, ctx, (gpu_free, *available)) {
            Planned::Host(plan) => (plan, ""),
            Planned::Placed(plan) if plan.gpu.fits => (plan.host, " in host memory"),
            Planned::Placed(plan) => (plan.gpu, " on the GPU"),
        };
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        let free = if where_ == " on the GPU" { "free" } else { "available" };
        (!plan.fits).then(|| {
            format!(
                "predicted not to fit{where_}: needs {:.2} GiB (weights {:.2}, K/V cache {:.2}, overhead {:.2}) with {:.2} GiB {free}",
                gib(plan.total),
                gib(plan.weights),
                gib(plan.kv.unwrap_or(0)),
                gib(plan.overhead),
                gib(plan.available)
            )
        })
    }
}

/// How long a study's check may be waited on.
pub const CHECK_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// How long a preview may spend counting what the constraints allow and
/// the planner rules out; past it the count is left out.
const COUNT_FOR: std::time::Duration = std::time::Duration::from_secs(2);

/// Of the grid (up to 200,000 configurations), how many the constraints
/// allow (`None`: not counted, too many or past `deadline`), how many of
/// those the planner says cannot fit, and a few of them with why.
fn count(
    study: &Study,
    fit: &FitCheck,
    deadline: std::time::Instant,
) -> (Option<u64>, u64, Vec<String>) {
    let (mut not_fit, mut examples) = (0, Vec::new());
    if study.space.grid_size() > 200_000 {
        return (None, 0, examples);
    }
    let mut n = 0;
    for (i, config) in study.space.grid().enumerate() {
        if i % 256 == 0 && std::time::Instant::now() > deadline {
            return (None, 0, Vec::new());
        }
        if !study.space.allows(&config) {
            continue;
        }
        n += 1;
        if let Some(reason) = fit.will_not_fit(&config) {
            not_fit += 1;
            if examples.len() < 3 {
                let what: Vec<String> = config.iter().map(|(k, v)| format!("{k}={v}")).collect();
                examples.push(format!("{}: {reason}", what.join(" ")));
            }
        }
    }
    (Some(n), not_fit, examples)
}

/// What the designer shows before a study runs: the size of its space, what
/// the planner rules out, and how long it should take going by earlier
/// trials of the same model.
pub async fn preview(
    db: &crate::db::Db,
    checked: &std::sync::Arc<crate::checked::Checked>,
    endpoints: &engine_bridge::endpoints::Endpoints,
    heavy: &crate::heavy::Turns,
    def: &StudyDef,
) -> Result<Result<CheckView, StudyError>, sqlx::Error> {
    if let Err(e) = check_endpoints(endpoints, def) {
        return Ok(Err(e));
    }
    let profiles = checked.profiles();
    if let Err(e) = check_machine(profiles, def).await {
        return Ok(Err(e));
    }
    // The checks are CPU work: off the request threads, and the count
    // bounded, so that the pages keep answering meanwhile.
    let (owned, def_owned) = (checked.clone(), def.clone());
    let checking = heavy.run("checking the study", CHECK_FOR, move || owned.study(&def_owned));
    let study = match checking.await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Ok(Err(e)),
        Err(e) => return Ok(Err(StudyError(vec![e.to_string()]))),
    };
    let profile = profiles.iter().find(|p| p.name == def.profile).expect("checked");
    let fit = FitCheck::new(profile, &study).await;
    let grid_size = study.space.grid_size().min(u64::MAX as u128) as u64;
    let deadline = std::time::Instant::now() + COUNT_FOR;
    let counted = heavy.run("counting the space", CHECK_FOR, move || {
        let counted = count(&study, &fit, deadline);
        (study, counted)
    });
    let (study, (allowed, not_fit, examples)) = match counted.await {
        Ok(c) => c,
        Err(e) => return Ok(Err(StudyError(vec![e.to_string()]))),
    };
    let budget = u64::from(def.budget.max_trials);
    let planned = allowed.map_or(budget, |a| a.min(budget));
    let runnable = allowed.map_or(planned, |a| planned.min(a - not_fit));
    let (mean_ms, n) = trials::mean_wall_ms(db, &def.profile, &def.model).await?;
    let (estimate_s, estimate_basis) = match mean_ms {
        Some(ms) => (
            Some(ms / 1e3 * runnable as f64),
            format!(
                "{runnable} trials at {:.1} s each, the mean of {n} earlier trials of this model (their probes may differ)",
                ms / 1e3
            ),
        ),
        None => (None, "no earlier trial of this model to go by".into()),
    };
    Ok(Ok(CheckView {
        grid_size,
        allowed,
        not_fit,
        not_fit_examples: examples,
        planned_trials: planned,
        estimate_s,
        estimate_basis,
        baseline: study.baseline.clone(),
        toml: toml::to_string(def).unwrap_or_default(),
    }))
}

#[cfg(test)]
mod tests {
    use engine_bridge::gguf::{LlamaSpec, write_random_llama};

    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Settings {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn offloaded_layers_are_judged_against_free_gpu_memory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        write_random_llama(&path, &LlamaSpec::tiny(), 1).unwrap();
        let info = ModelInfo::read(&path).unwrap();
        let gib = 1u64 << 30;
        let models = |name: &str| [(name.to_string(), info.clone())].into();
        let fit = FitCheck {
            default: "m".into(),
            models: models("m"),
            available: Some(64 * gib),
            gpu_free: Some(200 << 20),
        };
        // On the host alone it fits; every layer on a GPU with 200 MiB free
        // does not (the CUDA runtime and the overhead margin alone take 1 GiB).
        assert_eq!(fit.will_not_fit(&config(&[("ctx_size", "4096"), ("n_gpu_layers", "0")])), None);
        let why = fit
            .will_not_fit(&config(&[("ctx_size", "4096"), ("n_gpu_layers", "99")]))
            .expect("too big for the GPU");
        assert!(why.starts_with("predicted not to fit on the GPU: needs 1.02 GiB"), "{why}");
        assert!(why.ends_with("with 0.20 GiB free"), "{why}");
        // With a GPU and no layer count the engine decides: not judged.
        assert_eq!(fit.will_not_fit(&config(&[("ctx_size", "4096")])), None);
        // Without a GPU, offloading cannot be judged, host-only still is.
        let no_gpu = FitCheck { gpu_free: None, ..fit };
        assert_eq!(
            no_gpu.will_not_fit(&config(&[("ctx_size", "4096"), ("n_gpu_layers", "99")])),
            None
        );
        let tight = FitCheck { available: Some(100 << 20), ..no_gpu };
        let why = tight.will_not_fit(&config(&[("ctx_size", "4096")])).expect("too big");
        assert!(why.starts_with("predicted not to fit: needs"), "{why}");
        // A configuration that names another file is sized as that file;
        // one the check never read is not judged.
        let files = FitCheck { models: models("other"), ..tight };
        let named = config(&[("ctx_size", "4096"), ("model", "other")]);
        assert!(files.will_not_fit(&named).is_some_and(|w| w.starts_with("predicted not to fit")));
        assert_eq!(files.will_not_fit(&config(&[("ctx_size", "4096")])), None, "`m` is unread");
    }
}
