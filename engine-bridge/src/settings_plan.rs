//! A configuration's memory planned from its settings: the context size,
//! the K/V cache types and the layers placed on GPUs, read from the
//! settings one way for a study's check of what fits, for `tunebook
//! plan`, and for the bytes the findings and the search take from the
//! planner.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::catalog::Settings;
use crate::placement::Placement;
use crate::planner::{MemoryPlan, ModelInfo, OffloadPlan};

/// The settings [`Asked::of`] reads, and no others (those of the
/// placement among them): a plan is the same for two configurations
/// alike in these.
pub const SETTINGS: [&str; 10] = [
    "ctx_size",
    "cache_type_k",
    "cache_type_v",
    crate::placement::SETTINGS[0],
    crate::placement::SETTINGS[1],
    crate::placement::SETTINGS[2],
    crate::placement::SETTINGS[3],
    crate::placement::SETTINGS[4],
    crate::placement::SETTINGS[5],
    crate::placement::SETTINGS[6],
];

/// What a configuration's settings ask of memory.
pub struct Asked<'a> {
    /// The context size, where the settings name one (0: the model's own).
    pub ctx: Option<u64>,
    /// The K and V cache types (`f16` unless set).
    pub types: (&'a str, &'a str),
    /// The layers and experts placed on GPUs.
    pub placement: Placement,
}

impl<'a> Asked<'a> {
    /// What `settings` ask; an error names a setting that cannot be read.
    pub fn of(settings: &'a Settings) -> Result<Self, String> {
        let ctx = match settings.get("ctx_size") {
            Some(c) => Some(c.trim().parse().map_err(|_| format!("ctx_size `{c}` is not a size"))?),
            None => None,
        };
        let cache = |name: &str| settings.get(name).map_or("f16", String::as_str);
        let placement = Placement::of(settings, 0)?;
        Ok(Asked { ctx, types: (cache("cache_type_k"), cache("cache_type_v")), placement })
    }

    /// The context the engine allocates for `info`: the settings' own, or
    /// the model's trained length (4096 when the file does not say).
    pub fn ctx_for(&self, info: &ModelInfo) -> u64 {
        match self.ctx {
            Some(c) if c > 0 => c,
            _ => info.context_length.unwrap_or(4096),
        }
    }
}

/// Where a configuration's memory goes.
pub enum Planned {
    /// All of it in host memory: no layer on a GPU.
    Host(MemoryPlan),
    /// Split between the GPUs and the host.
    Placed(OffloadPlan),
}

/// The memory `info` takes as `asked`, with `ctx` tokens of context, against
/// `gpu_free` bytes of GPU memory and `host_available` of host memory.
pub fn plan(
    info: &ModelInfo,
    asked: &Asked<'_>,
    ctx: u64,
    (gpu_free, host_available): (u64, u64),
) -> Planned {
    let (k, v) = asked.types;
    if asked.placement.gpu_layers == 0 {
        Planned::Host(info.memory_plan(ctx, k, v, host_available))
    } else {
        Planned::Placed(info.placed_plan(ctx, (k, v), &asked.placement, (gpu_free, host_available)))
    }
}

/// The bytes the planner predicts a configuration places on the host and
/// on the GPUs: weights and K/V cache, not the margin the fit check adds
/// for buffers and the runtime, which is a guess, not a prediction.
#[derive(Debug, Clone, PartialEq)]
pub struct Predicted {
    pub host: u64,
    /// `None` where no layer is offloaded.
    pub gpu: Option<u64>,
    /// Each GPU's part of `gpu`, in the order `tensor_split` deals them
    /// (one GPU where the settings deal none); empty where none is
    /// offloaded.
    pub gpus: Vec<u64>,
}

impl Predicted {
    /// How full the fullest GPU would be: each GPU's bytes over its
    /// memory (`sizes`, in the engine's order of devices). `None` where no
    /// layer is offloaded, or where the plan deals layers to more GPUs
    /// than `sizes` names.
    pub fn fullest(&self, sizes: &[u64]) -> Option<f64> {
        self.gpu?;
        (self.gpus.len() <= sizes.len()).then(|| {
            let fill = |(bytes, size): (&u64, &u64)| *bytes as f64 / (*size).max(1) as f64;
            self.gpus.iter().zip(sizes).map(fill).fold(0.0, f64::max)
        })
    }
}

/// What `settings` place where for `info`, at the settings' context (the
/// model's own where they name none); `None` where a setting the planner
/// reads cannot be read. Settings that leave the split to the engine (no
/// `n_gpu_layers`) are planned with none offloaded.
pub fn predicted(info: &ModelInfo, settings: &Settings) -> Option<Predicted> {
    let asked = Asked::of(settings).ok()?;
    let plan = info.placed_plan(
        asked.ctx.unwrap_or(0),
        asked.types,
        &asked.placement,
        (u64::MAX, u64::MAX),
    );
    let bytes = |side: &MemoryPlan| side.weights.saturating_add(side.kv.unwrap_or(0));
    let offloaded = asked.placement.gpu_layers > 0;
    let gpus = match offloaded {
        true => plan.gpus.iter().map(|g| g.weights.saturating_add(g.kv)).collect(),
        false => Vec::new(),
    };
    Some(Predicted { host: bytes(&plan.host), gpu: offloaded.then(|| bytes(&plan.gpu)), gpus })
}

/// Plans remembered by the settings [`predicted`] reads ([`SETTINGS`])
/// and the model's name: a search plans every configuration it scores,
/// thousands for each proposal, and a model of a thousand tensors takes
/// tens of microseconds to plan. At most [`Memo::MOST`] are kept.
#[derive(Debug, Default)]
pub struct Memo {
    plans: Mutex<HashMap<Vec<Option<String>>, Option<Predicted>>>,
}

impl Memo {
    pub const MOST: usize = 1 << 16;

    /// [`predicted`] for `info`, named `model`, remembered.
    pub fn predicted(
        &self,
        model: &str,
        info: &ModelInfo,
        settings: &Settings,
    ) -> Option<Predicted> {
        let key: Vec<Option<String>> = std::iter::once(Some(model.to_string()))
            .chain(SETTINGS.iter().map(|k| settings.get(*k).cloned()))
            .collect();
        let mut plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
        if plans.len() >= Self::MOST {
            plans.clear();
        }
        plans.entry(key).or_insert_with(|| predicted(info, settings)).clone()
    }
}
