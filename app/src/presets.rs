//! The designer's presets: named sets of settings to vary for one kind of
//! engine, and the rows of the form each fills in.

use crate::design::VaryRow;
use crate::types::ParamView;

/// A named set of settings to vary, for one kind of engine.
pub struct Preset {
    pub label: &'static str,
    /// The engine names (as profiles report them) it is meant for.
    pub engines: &'static [&'static str],
    /// Setting, values, baseline.
    pub rows: &'static [(&'static str, &'static str, &'static str)],
    pub constraints: &'static str,
    /// Objectives it sets (metric, goal); none: the form's stay.
    pub objectives: &'static [(&'static str, &'static str)],
    /// The load probe's workload it sets; blank: none.
    pub load_workload: &'static str,
}

/// The seeds' llama.cpp axes, serving a team, and a vLLM throughput set.
pub const PRESETS: &[Preset] = &[
    Preset {
        label: "llama.cpp axes",
        engines: &["llama-server", "llama-cpp-python"],
        rows: &[
            ("n_gpu_layers", "0, 99", "99"),
            ("ctx_size", "4096..32768 log", "8192"),
            ("cache_type_k", "f16, q8_0, q4_0", "f16"),
            ("cache_type_v", "f16, q8_0, q4_0", "f16"),
            ("flash_attn", "on, off", "on"),
            ("batch_size", "512, 2048", "2048"),
            ("ubatch_size", "128, 512", "512"),
        ],
        constraints: "cache_type_k == cache_type_v\nflash_attn == \"on\" when cache_type_v != \"f16\"",
        objectives: &[],
        load_workload: "",
    },
    Preset {
        label: "serve a team",
        engines: &["llama-server"],
        rows: &[
            ("parallel", "1, 2, 4, 8", "1"),
            ("ctx_size", "8192..65536 log", "16384"),
            ("batch_size", "512, 2048", "2048"),
            ("ubatch_size", "128, 512", "512"),
            ("cache_type_k", "f16, q8_0", "f16"),
            ("cache_type_v", "f16, q8_0", "f16"),
        ],
        constraints: "cache_type_k == cache_type_v",
        objectives: &[("goodput_rps", "max"), ("peak_rss_bytes", "min")],
        load_workload: "chat",
    },
    Preset {
        label: "vLLM throughput",
        engines: &["vllm"],
        rows: &[
            ("gpu_memory_utilization", "0.80..0.95 points 4", "0.9"),
            ("max_num_seqs", "64, 128, 256", "256"),
            ("max_num_batched_tokens", "2048..16384 log", "8192"),
            ("kv_cache_dtype", "auto, fp8", "auto"),
            ("enable_prefix_caching", "bool", "true"),
        ],
        constraints: "",
        objectives: &[],
        load_workload: "",
    },
];

impl Preset {
    /// The rows whose settings the engine has; where trials run without a
    /// GPU (`gpu` false), not those that place layers on one.
    pub fn rows_for(&self, params: &[ParamView], gpu: bool, next_key: &mut u32) -> Vec<VaryRow> {
        self.rows
            .iter()
            .filter(|(name, _, _)| params.iter().any(|p| p.name == *name))
            .filter(|(name, _, _)| gpu || !tunebook_views::GPU_PLACEMENT.contains(name))
            .map(|(name, values, baseline)| {
                *next_key += 1;
                VaryRow {
                    key: *next_key,
                    name: name.to_string(),
                    values: values.to_string(),
                    baseline: baseline.to_string(),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_keep_the_settings_the_engine_has() {
        let param = |name: &str| ParamView {
            name: name.into(),
            flag: String::new(),
            kind: "int".into(),
            choices: vec![],
            min: None,
            max: None,
            default: String::new(),
            phase: "load_time".into(),
            help: String::new(),
        };
        let mut key = 0;
        let params = [param("ctx_size"), param("threads"), param("n_gpu_layers")];
        let rows = PRESETS[0].rows_for(&params, false, &mut key);
        assert_eq!(rows.len(), 1, "without a GPU, no layers to place: {rows:?}");
        assert_eq!((rows[0].name.as_str(), rows[0].key), ("ctx_size", 1));
        let rows = PRESETS[0].rows_for(&params, true, &mut key);
        assert_eq!(
            rows.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
            ["n_gpu_layers", "ctx_size"]
        );
    }
}
