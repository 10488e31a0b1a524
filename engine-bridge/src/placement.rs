//! Where each tensor of a model goes for a configuration, as llama.cpp
//! decides it: tensor overrides first (`-ot PATTERN=BUFFER`, the first
//! pattern that matches wins; `--cpu-moe` and `--n-cpu-moe N` are
//! overrides that keep expert tensors on the CPU), then the offloaded
//! layers (`-ngl`: the last N of the blocks and the output layer). Among
//! several GPUs, the offloaded layers are dealt out by `tensor_split`'s
//! shares (`-sm layer`), every matrix is cut by them (`-sm row`), or all
//! goes to the main GPU (`-sm none`).

use crate::catalog::{Settings, tensor_overrides};

/// The expert tensors of a mixture-of-experts block, as llama.cpp names
/// them (`blk.N.ffn_up_exps.weight`, …).
static EXPERTS: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(r"\.ffn_(up|down|gate|gate_up)_exps").expect("valid")
});

/// Where a tensor's weights are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// Host memory.
    Host,
    /// The GPU (the first, where several are not told apart).
    Gpu,
}

/// The settings that place tensors.
#[derive(Debug, Clone, Default)]
pub struct Placement {
    /// Layers offloaded (`n_gpu_layers`).
    pub gpu_layers: u64,
    /// Tensor overrides (`-ot`) in the order llama.cpp checks them.
    overrides: Vec<(regex::Regex, Place)>,
    /// Experts of the blocks below this one stay on the CPU (`--n-cpu-moe`;
    /// `--cpu-moe` is every block): overrides llama.cpp checks after `-ot`.
    experts_on_cpu_below: u64,
    /// `tensor_split`'s shares, summed up to each GPU and divided by their
    /// sum (llama.cpp's split points); empty for one GPU.
    split_points: Vec<f64>,
    split_mode: SplitMode,
    main_gpu: usize,
}

/// How offloaded weights are shared among GPUs (`-sm`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SplitMode {
    /// Whole layers to each GPU by the split's shares.
    #[default]
    Layer,
    /// Every matrix cut by the split's shares.
    Row,
    /// Everything on the main GPU.
    None,
}

/// The settings that deal the offloaded layers among several GPUs: where
/// a study varies them, the GPU bytes of all of them together do not say
/// which one runs out.
pub const GPU_SPLIT: [&str; 3] = ["tensor_split", "split_mode", "main_gpu"];

/// The settings [`Placement::of`] reads, and no others: what a placement
/// is keyed by where it is remembered.
pub const SETTINGS: [&str; 7] = [
    "n_gpu_layers",
    "override_tensor",
    "n_cpu_moe",
    "cpu_moe",
    "tensor_split",
    "split_mode",
    "main_gpu",
];

impl Placement {
    /// `gpu_layers` layers offloaded and nothing overridden.
    pub fn layers(gpu_layers: u64) -> Self {
        Self { gpu_layers, ..Self::default() }
    }

    /// The placement a configuration's settings ask for, with
    /// `gpu_layers` layers offloaded where `n_gpu_layers` is not set.
    pub fn of(settings: &Settings, gpu_layers: u64) -> Result<Self, String> {
        let number = |name: &str| -> Result<Option<u64>, String> {
            settings
                .get(name)
                .map(|v| v.parse::<u64>().map_err(|_| format!("{name} `{v}` is not a count")))
                .transpose()
        };
        let mut placement = Self::layers(number("n_gpu_layers")?.unwrap_or(gpu_layers));
        if let Some(value) = settings.get("override_tensor") {
            for (pattern, buffer) in tensor_overrides(value)? {
                let place = if buffer.to_ascii_uppercase().starts_with("CPU") {
                    Place::Host
                } else {
                    Place::Gpu
                };
                placement.overrides.push((pattern, place));
            }
        }
        placement.experts_on_cpu_below = number("n_cpu_moe")?.unwrap_or(0);
        if settings.get("cpu_moe").is_some_and(|v| matches!(v.as_str(), "true" | "on" | "1")) {
            placement.experts_on_cpu_below = u64::MAX;
        }
        if let Some(split) = settings.get("tensor_split") {
            let shares = split
                .split([',', '/'])
                .map(|s| s.trim().parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0))
                .collect::<Option<Vec<f64>>>()
                .ok_or_else(|| format!("tensor_split `{split}` is not a list of shares"))?;
            let total: f64 = shares.iter().sum();
            if shares.len() > 1 && total > 0.0 {
                placement.split_points = shares
                    .iter()
                    .scan(0.0, |sum, s| {
                        *sum += s;
                        Some(*sum / total)
                    })
                    .collect();
            }
        }
        placement.split_mode = match settings.get("split_mode").map(String::as_str) {
            Some("row") => SplitMode::Row,
            Some("none") => SplitMode::None,
            _ => SplitMode::Layer,
        };
        placement.main_gpu = number("main_gpu")?.unwrap_or(0) as usize;
        Ok(placement)
    }

    /// How many GPUs the placement shares weights among (at least one).
    pub fn gpus(&self) -> usize {
        match self.split_mode {
            SplitMode::None => self.main_gpu + 1,
            _ => self.split_points.len().max(1),
        }
    }

    /// What share of an offloaded tensor each GPU holds: `layer` is its
    /// block, or the number of blocks for the output layer. By layer, as
    /// llama.cpp deals them: the offloaded layers' position among them
    /// (0 to 1) against the split points, the first point above it naming
    /// the GPU.
    pub fn gpu_shares(&self, layer: u64, blocks: u64) -> Vec<(usize, f64)> {
        if self.split_points.is_empty() || self.split_mode == SplitMode::None {
            let main = if self.split_mode == SplitMode::None { self.main_gpu } else { 0 };
            return vec![(main, 1.0)];
        }
        if self.split_mode == SplitMode::Row {
            let mut last = 0.0;
            return (self.split_points.iter().enumerate())
                .map(|(i, p)| (i, p - std::mem::replace(&mut last, *p)))
                .collect();
        }
        let active = self.gpu_layers.min(blocks + 1).max(1);
        let start = (blocks + 1).saturating_sub(self.gpu_layers);
        let at = layer.saturating_sub(start) as f64 / active as f64;
        let gpu = self.split_points.iter().take_while(|p| **p <= at).count();
        vec![(gpu.min(self.split_points.len() - 1), 1.0)]
    }

    /// Where tensor `name` of a model of `blocks` blocks goes.
    pub fn place(&self, name: &str, blocks: u64) -> Place {
        if let Some((_, place)) = self.overrides.iter().find(|(p, _)| p.is_match(name)) {
            return place.clone();
        }
        let block = name.strip_prefix("blk.").and_then(|rest| rest.split('.').next()?.parse().ok());
        if block.is_some_and(|b: u64| b < self.experts_on_cpu_below) && EXPERTS.is_match(name) {
            return Place::Host;
        }
        let slots = self.gpu_layers.min(blocks + 1);
        // Blocks from this index on are offloaded; the output layer is
        // the first slot to go.
        let first_on_gpu = blocks + 1 - slots;
        let on_gpu = match block {
            Some(i) => i >= first_on_gpu,
            None => slots >= 1 && name.starts_with("output"),
        };
        if on_gpu { Place::Gpu } else { Place::Host }
    }

    /// Blocks whose K/V cache is on the GPU: the offloaded ones.
    pub fn kv_blocks_on_gpu(&self, blocks: u64) -> u64 {
        self.gpu_layers.min(blocks + 1).saturating_sub(1)
    }

    /// The offloaded blocks' numbers (their K/V caches go with them).
    pub fn gpu_blocks(&self, blocks: u64) -> std::ops::Range<u64> {
        blocks - self.kv_blocks_on_gpu(blocks)..blocks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn layers_go_to_the_gpu_from_the_last_block_and_the_output_first() {
        let p = Placement::layers(3);
        let places: Vec<Place> =
            ["blk.0.attn_q.weight", "blk.1.attn_q.weight", "blk.3.ffn_up.weight", "output.weight"]
                .iter()
                .map(|n| p.place(n, 4))
                .collect();
        assert_eq!(places, [Place::Host, Place::Host, Place::Gpu, Place::Gpu]);
        assert_eq!(p.place("token_embd.weight", 4), Place::Host);
        assert_eq!(p.kv_blocks_on_gpu(4), 2);
    }

    #[test]
    fn experts_stay_on_the_cpu_as_asked() {
        let all = |s: &[(&str, &str)]| Placement::of(&settings(s), 0).unwrap();
        let some = all(&[("n_gpu_layers", "99"), ("n_cpu_moe", "2")]);
        assert_eq!(some.place("blk.1.ffn_gate_exps.weight", 4), Place::Host);
        assert_eq!(some.place("blk.2.ffn_gate_exps.weight", 4), Place::Gpu);
        assert_eq!(some.place("blk.1.ffn_gate_inp.weight", 4), Place::Gpu, "the router moves");
        let every = all(&[("n_gpu_layers", "99"), ("cpu_moe", "true")]);
        assert_eq!(every.place("blk.3.ffn_down_exps.weight", 4), Place::Host);
        let by_name = all(&[("n_gpu_layers", "99"), ("override_tensor", r"blk\.3\.=CPU")]);
        assert_eq!(by_name.place("blk.3.attn_k.weight", 4), Place::Host);
        assert_eq!(by_name.place("blk.2.attn_k.weight", 4), Place::Gpu);
        let onto = all(&[("n_gpu_layers", "0"), ("override_tensor", "output=CUDA0")]);
        assert_eq!(onto.place("output.weight", 4), Place::Gpu);
    }

    #[test]
    fn layers_are_dealt_among_gpus_as_llama_cpp_deals_them() {
        let of = |s: &[(&str, &str)]| Placement::of(&settings(s), 0).unwrap();
        // 12 blocks and the output, all offloaded, split 3:1. llama.cpp's
        // split points are 0.75 and 1; layer il goes to the first point
        // above il / 13: blocks 0 to 9 on GPU 0, 10, 11 and the output on 1.
        let p = of(&[("n_gpu_layers", "99"), ("tensor_split", "3,1")]);
        assert_eq!(p.gpus(), 2);
        let gpu = |layer| p.gpu_shares(layer, 12)[0].0;
        assert_eq!((0..=12).map(gpu).collect::<Vec<_>>(), [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1]);
        // Six offloaded (blocks 7 to 11 and the output), split evenly:
        // the first three on GPU 0.
        let p = of(&[("n_gpu_layers", "6"), ("tensor_split", "1/1")]);
        let gpu = |layer| p.gpu_shares(layer, 12)[0].0;
        assert_eq!((7..=12).map(gpu).collect::<Vec<_>>(), [0, 0, 0, 1, 1, 1]);
        assert_eq!(p.gpu_blocks(12), 7..12);
        // By rows every matrix is cut by the shares; with none, the main
        // GPU holds it all.
        let rows = of(&[("n_gpu_layers", "99"), ("tensor_split", "3,1"), ("split_mode", "row")]);
        assert_eq!(rows.gpu_shares(4, 12), [(0, 0.75), (1, 0.25)]);
        let none = of(&[("tensor_split", "3,1"), ("split_mode", "none"), ("main_gpu", "1")]);
        assert_eq!((none.gpus(), none.gpu_shares(4, 12)), (2, vec![(1, 1.0)]));
        assert_eq!(of(&[("n_gpu_layers", "99")]).gpus(), 1, "no split: one GPU");
        assert!(Placement::of(&settings(&[("tensor_split", "3,x")]), 0).is_err());
    }

    #[test]
    fn a_bad_override_is_named() {
        let err = Placement::of(&settings(&[("override_tensor", "exps=CPU;rm")]), 0).unwrap_err();
        assert!(err.contains("`CPU;rm`"), "{err}");
        let err = Placement::of(&settings(&[("override_tensor", "(=CPU")]), 0).unwrap_err();
        assert!(err.contains("not a pattern"), "{err}");
    }
}
