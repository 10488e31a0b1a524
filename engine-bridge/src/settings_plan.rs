//! A configuration's memory planned from its settings: the context size,
//! the K/V cache types and the layers placed on GPUs, read from the
//! settings one way for a study's check of what fits and for
//! `tunebook plan`.

use crate::catalog::Settings;
use crate::placement::Placement;
use crate::planner::{MemoryPlan, ModelInfo, OffloadPlan};

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
