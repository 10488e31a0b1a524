//! The model file of a planted world, as the server's planner reads a
//! GGUF file's metadata: its blocks' and output layer's bytes and its K/V
//! heads. The planner then predicts the GPU bytes of the weights and the
//! cache as llama.cpp places them (`-ngl N` moves the output layer and
//! the last N − 1 blocks), which need not be what the world's truth
//! does, and without the compute buffers or the runtime's share: a plan,
//! not the answer.

use engine_bridge::Settings;
use engine_bridge::planner::{ModelInfo, TensorInfo};
use engine_bridge::settings_plan::Memo;

/// A world's model file, and its plans remembered as the server's are.
pub(super) struct File {
    info: ModelInfo,
    memo: Memo,
}

impl File {
    /// The planner's GPU bytes for `s` (`None` with no layer offloaded).
    pub fn gpu_bytes(&self, s: &Settings) -> Option<f64> {
        Some(self.memo.predicted("m", &self.info, s)?.gpu? as f64)
    }

    /// The fullest GPU's share of its memory, GPUs of `sizes` bytes (see
    /// [`engine_bridge::settings_plan::Predicted::fullest`]).
    pub fn fullest(&self, s: &Settings, sizes: &[u64]) -> Option<f64> {
        self.memo.predicted("m", &self.info, s)?.fullest(sizes)
    }
}

/// A dense model's file: `blocks` blocks of `block` bytes, an output layer
/// and a token embedding of `output` bytes each, `kv_heads` K/V heads of
/// `head` elements a block, trained for `context` tokens.
pub(super) fn dense(
    blocks: u32,
    block: f64,
    output: f64,
    (kv_heads, head): (u32, u32),
    context: u64,
) -> File {
    let tensor = |name: String, bytes: f64| TensorInfo {
        name,
        // Q4_K, as the worlds' models are quantized.
        ggml_type: 12,
        dims: vec![4096, (bytes / 4096.0).round() as u64],
        bytes: bytes as u64,
    };
    let ends = [("token_embd.weight", output), ("output.weight", output)];
    let tensors: Vec<TensorInfo> = ends
        .into_iter()
        .map(|(n, b)| tensor(n.into(), b))
        .chain((0..blocks).map(|i| tensor(format!("blk.{i}.ffn_down.weight"), block)))
        .collect();
    let info = ModelInfo {
        architecture: "llama".into(),
        name: None,
        layers: blocks,
        embedding: 4096,
        heads: 32,
        kv_heads: vec![kv_heads; blocks as usize],
        key_length: head,
        value_length: head,
        context_length: Some(context),
        experts: None,
        experts_used: None,
        file_bytes: tensors.iter().map(|t| t.bytes).sum(),
        files: vec![],
        tensors,
    };
    File { info, memo: Memo::default() }
}
