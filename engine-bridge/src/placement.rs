//! Where each tensor of a model goes for a configuration, as llama.cpp
//! decides it: tensor overrides first (`-ot PATTERN=BUFFER`, the first
//! pattern that matches wins; `--cpu-moe` and `--n-cpu-moe N` are
//! overrides that keep expert tensors on the CPU), then the offloaded
//! layers (`-ngl`: the last N of the blocks and the output layer).

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
}

impl Placement {
    /// `gpu_layers` layers offloaded and nothing overridden.
    pub fn layers(gpu_layers: u64) -> Self {
        Self { gpu_layers, overrides: vec![], experts_on_cpu_below: 0 }
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
        Ok(placement)
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
    fn a_bad_override_is_named() {
        let err = Placement::of(&settings(&[("override_tensor", "exps=CPU;rm")]), 0).unwrap_err();
        assert!(err.contains("`CPU;rm`"), "{err}");
        let err = Placement::of(&settings(&[("override_tensor", "(=CPU")]), 0).unwrap_err();
        assert!(err.contains("not a pattern"), "{err}");
    }
}
