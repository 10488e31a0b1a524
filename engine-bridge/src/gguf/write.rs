//! Writes small GGUF models with random weights, so tests and demos have a
//! real model that loads in llama.cpp without downloading anything; and
//! models of any tensor types and shapes, in one file or split, for the
//! planner's tests ([`write_model`]).
//!
//! The format (version 3): a header, metadata key/value pairs, tensor
//! descriptions, then the tensor data, each tensor aligned to 32 bytes.
//! Dimensions are written in ggml order (fastest-varying first).

use std::fs::File;
use std::io::Read;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::types;

use MetaValue as Value;

const GGUF_MAGIC: &[u8; 4] = b"GGUF";
const GGUF_VERSION: u32 = 3;
const ALIGNMENT: u64 = 32;

/// The shape of a llama-architecture model with a byte-level vocabulary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlamaSpec {
    /// Transformer blocks.
    pub layers: u32,
    /// Model width (embedding length).
    pub width: u32,
    /// Attention (query) heads.
    pub heads: u32,
    /// Key/value heads; fewer than `heads` gives grouped-query attention.
    pub kv_heads: u32,
    /// Feed-forward hidden size.
    pub feed_forward: u32,
    /// Context length the model claims to be trained for.
    pub context_length: u32,
    /// Experts in each block's feed-forward (0: a dense model), and how
    /// many of them each token uses.
    pub experts: u32,
    pub experts_used: u32,
    /// Tensors of three types, as a quantized model has them: attention in
    /// f16, feed-forward (experts too), embeddings and output in q8_0, the
    /// norms and the router in f32. Otherwise every tensor is f32.
    pub quantized: bool,
}

impl LlamaSpec {
    /// A model of about 10 MB that loads in a fraction of a second: for tests.
    pub fn tiny() -> Self {
        Self {
            layers: 4,
            width: 256,
            heads: 4,
            kv_heads: 2,
            feed_forward: 512,
            context_length: 4096,
            experts: 0,
            experts_used: 0,
            quantized: false,
        }
    }

    /// A model of about 500 MB: large enough that decoding is bound by memory
    /// bandwidth, as it is for real models on real machines.
    pub fn memory_bound() -> Self {
        Self {
            layers: 12,
            width: 1024,
            heads: 16,
            kv_heads: 4,
            feed_forward: 2816,
            context_length: 4096,
            experts: 0,
            experts_used: 0,
            quantized: false,
        }
    }

    /// The tiny model as a mixture of experts: eight experts in each
    /// block, two used per token (as Mixtral has them).
    pub fn tiny_moe() -> Self {
        Self { experts: 8, experts_used: 2, feed_forward: 256, ..Self::tiny() }
    }

    fn head_dim(&self) -> u32 {
        self.width / self.heads
    }
}

/// Vocabulary: `<unk>`, `<s>`, `</s>`, the 256 byte tokens and the word
/// separator `▁`, so that any UTF-8 text tokenizes by byte fallback.
const VOCAB_SIZE: u32 = 260;

/// Errors from writing a model file.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    #[error("invalid model shape: {0}")]
    InvalidSpec(String),
    #[error("cannot write {path}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// A metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaValue {
    U16(u16),
    U32(u32),
    F32(f32),
    Str(String),
    ArrStr(Vec<String>),
    ArrF32(Vec<f32>),
    ArrI32(Vec<i32>),
}

impl MetaValue {
    fn type_id(&self) -> u32 {
        match self {
            Value::U16(_) => 2,
            Value::U32(_) => 4,
            Value::F32(_) => 6,
            Value::Str(_) => 8,
            Value::ArrStr(_) | Value::ArrF32(_) | Value::ArrI32(_) => 9,
        }
    }
}

struct Tensor {
    name: String,
    /// ggml order: `dims[0]` varies fastest.
    dims: Vec<u64>,
    /// Fill: `None` for random values, `Some(v)` for a constant.
    constant: Option<f32>,
    kind: Stored,
}

/// How a random model stores a tensor's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stored {
    F32,
    F16,
    /// Blocks of 32 values: an f16 scale, then 32 signed bytes.
    Q8_0,
}

impl Stored {
    fn ggml_type(self) -> u32 {
        let name = match self {
            Stored::F32 => "f32",
            Stored::F16 => "f16",
            Stored::Q8_0 => "q8_0",
        };
        types::by_name(name).expect("a ggml type").id
    }

    /// `values` as this type stores them, appended to `out`.
    fn encode(self, values: &[f32], out: &mut Vec<u8>) {
        match self {
            Stored::F32 => values.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            Stored::F16 => values
                .iter()
                .for_each(|x| out.extend_from_slice(&half::f16::from_f32(*x).to_le_bytes())),
            Stored::Q8_0 => {
                for block in values.chunks(32) {
                    let most = block.iter().fold(0.0f32, |m, x| m.max(x.abs()));
                    let d = half::f16::from_f32(most / 127.0);
                    let step = d.to_f32();
                    out.extend_from_slice(&d.to_le_bytes());
                    for x in block {
                        let q =
                            if step > 0.0 { (x / step).round().clamp(-127.0, 127.0) } else { 0.0 };
                        out.push(q as i8 as u8);
                    }
                }
            }
        }
    }
}

impl Tensor {
    fn elements(&self) -> u64 {
        self.dims.iter().product()
    }

    fn bytes(&self) -> u64 {
        match self.kind {
            Stored::F32 => self.elements() * 4,
            Stored::F16 => self.elements() * 2,
            Stored::Q8_0 => self.elements() / 32 * 34,
        }
    }
}

fn metadata(spec: &LlamaSpec) -> Vec<(&'static str, Value)> {
    let mut tokens = vec!["<unk>".to_string(), "<s>".into(), "</s>".into()];
    tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    tokens.push("\u{2581}".into());
    // Token types: 1 normal, 2 unknown, 3 control, 6 byte.
    let mut types = vec![2, 3, 3];
    types.extend(std::iter::repeat_n(6, 256));
    types.push(1);
    let mut meta = vec![
        ("general.architecture", Value::Str("llama".into())),
        ("general.name", Value::Str("tunebook random llama".into())),
        ("general.alignment", Value::U32(ALIGNMENT as u32)),
        ("llama.block_count", Value::U32(spec.layers)),
        ("llama.context_length", Value::U32(spec.context_length)),
        ("llama.embedding_length", Value::U32(spec.width)),
        ("llama.feed_forward_length", Value::U32(spec.feed_forward)),
        ("llama.attention.head_count", Value::U32(spec.heads)),
        ("llama.attention.head_count_kv", Value::U32(spec.kv_heads)),
        ("llama.rope.dimension_count", Value::U32(spec.head_dim())),
        ("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
        ("llama.vocab_size", Value::U32(VOCAB_SIZE)),
        ("tokenizer.ggml.model", Value::Str("llama".into())),
        ("tokenizer.ggml.tokens", Value::ArrStr(tokens)),
        ("tokenizer.ggml.scores", Value::ArrF32(vec![0.0; VOCAB_SIZE as usize])),
        ("tokenizer.ggml.token_type", Value::ArrI32(types)),
        ("tokenizer.ggml.unknown_token_id", Value::U32(0)),
        ("tokenizer.ggml.bos_token_id", Value::U32(1)),
        ("tokenizer.ggml.eos_token_id", Value::U32(2)),
    ];
    if spec.experts > 0 {
        meta.push(("llama.expert_count", Value::U32(spec.experts)));
        meta.push(("llama.expert_used_count", Value::U32(spec.experts_used)));
    }
    meta
}

fn tensors(spec: &LlamaSpec) -> Vec<Tensor> {
    let (w, ff, vocab) = (spec.width as u64, spec.feed_forward as u64, VOCAB_SIZE as u64);
    let kv = (spec.kv_heads * spec.head_dim()) as u64;
    let (attention, matrices) =
        if spec.quantized { (Stored::F16, Stored::Q8_0) } else { (Stored::F32, Stored::F32) };
    let random = |name: String, dims: Vec<u64>, kind| Tensor { name, dims, constant: None, kind };
    let ones =
        |name: String| Tensor { name, dims: vec![w], constant: Some(1.0), kind: Stored::F32 };
    let mut out = vec![
        random("token_embd.weight".into(), vec![w, vocab], matrices),
        ones("output_norm.weight".into()),
        random("output.weight".into(), vec![w, vocab], matrices),
    ];
    for i in 0..spec.layers {
        out.push(ones(format!("blk.{i}.attn_norm.weight")));
        out.push(random(format!("blk.{i}.attn_q.weight"), vec![w, w], attention));
        out.push(random(format!("blk.{i}.attn_k.weight"), vec![w, kv], attention));
        out.push(random(format!("blk.{i}.attn_v.weight"), vec![w, kv], attention));
        out.push(random(format!("blk.{i}.attn_output.weight"), vec![w, w], attention));
        out.push(ones(format!("blk.{i}.ffn_norm.weight")));
        if spec.experts == 0 {
            out.push(random(format!("blk.{i}.ffn_gate.weight"), vec![w, ff], matrices));
            out.push(random(format!("blk.{i}.ffn_up.weight"), vec![w, ff], matrices));
            out.push(random(format!("blk.{i}.ffn_down.weight"), vec![ff, w], matrices));
        } else {
            let n = spec.experts as u64;
            out.push(random(format!("blk.{i}.ffn_gate_inp.weight"), vec![w, n], Stored::F32));
            out.push(random(format!("blk.{i}.ffn_gate_exps.weight"), vec![w, ff, n], matrices));
            out.push(random(format!("blk.{i}.ffn_up_exps.weight"), vec![w, ff, n], matrices));
            out.push(random(format!("blk.{i}.ffn_down_exps.weight"), vec![ff, w, n], matrices));
        }
    }
    out
}

fn padding(offset: u64) -> u64 {
    (ALIGNMENT - offset % ALIGNMENT) % ALIGNMENT
}

struct Writer<W: Write> {
    inner: W,
    written: u64,
}

impl<W: Write> Writer<W> {
    fn bytes(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.written += b.len() as u64;
        self.inner.write_all(b)
    }
    fn u32(&mut self, v: u32) -> std::io::Result<()> {
        self.bytes(&v.to_le_bytes())
    }
    fn u64(&mut self, v: u64) -> std::io::Result<()> {
        self.bytes(&v.to_le_bytes())
    }
    fn str(&mut self, s: &str) -> std::io::Result<()> {
        self.u64(s.len() as u64)?;
        self.bytes(s.as_bytes())
    }
    fn value(&mut self, v: &Value) -> std::io::Result<()> {
        match v {
            Value::U16(x) => self.bytes(&x.to_le_bytes()),
            Value::U32(x) => self.u32(*x),
            Value::F32(x) => self.bytes(&x.to_le_bytes()),
            Value::Str(s) => self.str(s),
            Value::ArrStr(items) => {
                self.u32(8)?;
                self.u64(items.len() as u64)?;
                items.iter().try_for_each(|s| self.str(s))
            }
            Value::ArrF32(items) => {
                self.u32(6)?;
                self.u64(items.len() as u64)?;
                items.iter().try_for_each(|x| self.bytes(&x.to_le_bytes()))
            }
            Value::ArrI32(items) => {
                self.u32(5)?;
                self.u64(items.len() as u64)?;
                items.iter().try_for_each(|x| self.bytes(&x.to_le_bytes()))
            }
        }
    }
    fn pad(&mut self) -> std::io::Result<()> {
        let n = padding(self.written) as usize;
        self.bytes(&vec![0u8; n])
    }
}

/// Writes a llama model with F32 random weights (uniform, scaled by
/// 1/sqrt(fan-in)) drawn from `seed`. Returns the file size in bytes.
pub fn write_random_llama(path: &Path, spec: &LlamaSpec, seed: u64) -> Result<u64, GgufError> {
    if spec.heads == 0 || spec.kv_heads == 0 || !spec.width.is_multiple_of(spec.heads) {
        return Err(GgufError::InvalidSpec(format!(
            "width {} must be a positive multiple of heads {}",
            spec.width, spec.heads
        )));
    }
    if !spec.heads.is_multiple_of(spec.kv_heads) {
        return Err(GgufError::InvalidSpec(format!(
            "heads {} must be a multiple of kv_heads {}",
            spec.heads, spec.kv_heads
        )));
    }
    let io = |source| GgufError::Io { path: path.display().to_string(), source };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    // Write to a temporary name and rename, so a half-written model never
    // stands at the final path.
    let partial = path.with_extension("gguf.partial");
    let file = File::create(&partial).map_err(io)?;
    let mut w = Writer { inner: BufWriter::new(file), written: 0 };
    write_all(&mut w, spec, seed).map_err(io)?;
    w.inner.flush().map_err(io)?;
    std::fs::rename(&partial, path).map_err(io)?;
    Ok(w.written)
}

fn write_all<W: Write>(w: &mut Writer<W>, spec: &LlamaSpec, seed: u64) -> std::io::Result<()> {
    let meta = metadata(spec);
    let tensors = tensors(spec);
    let table: Vec<_> = tensors
        .iter()
        .map(|t| (t.name.as_str(), &t.dims[..], t.kind.ggml_type(), t.bytes()))
        .collect();
    header(w, meta.iter().map(|(k, v)| (*k, v)), &table)?;
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut values, mut buf) = (Vec::new(), Vec::new());
    for t in &tensors {
        let scale = 1.0 / (t.dims[0] as f32).sqrt();
        values.clear();
        values.extend(
            (0..t.elements())
                .map(|_| t.constant.unwrap_or_else(|| rng.random_range(-scale..scale))),
        );
        buf.clear();
        t.kind.encode(&values, &mut buf);
        w.bytes(&buf)?;
        w.pad()?;
    }
    Ok(())
}

/// Writes the header, the metadata and the tensor table, each tensor
/// described as (name, dims, ggml type, bytes), and pads to where the data
/// starts.
fn header<'a, W: Write>(
    w: &mut Writer<W>,
    meta: impl ExactSizeIterator<Item = (&'a str, &'a Value)>,
    tensors: &[(&str, &[u64], u32, u64)],
) -> std::io::Result<()> {
    w.bytes(GGUF_MAGIC)?;
    w.u32(GGUF_VERSION)?;
    w.u64(tensors.len() as u64)?;
    w.u64(meta.len() as u64)?;
    for (key, value) in meta {
        w.str(key)?;
        w.u32(value.type_id())?;
        w.value(value)?;
    }
    let mut offset = 0u64;
    for (name, dims, ggml_type, size) in tensors {
        w.str(name)?;
        w.u32(dims.len() as u32)?;
        dims.iter().try_for_each(|d| w.u64(*d))?;
        w.u32(*ggml_type)?;
        w.u64(offset)?;
        offset += size + padding(*size);
    }
    w.pad()
}

/// A tensor of a model [`write_model`] writes.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorSpec {
    pub name: String,
    /// A ggml type id (see [`super::types`]).
    pub ggml_type: u32,
    /// ggml order: `dims[0]` varies fastest.
    pub dims: Vec<u64>,
    /// The size of a type the table does not know; ignored for one it does.
    pub bytes: Option<u64>,
}

impl TensorSpec {
    /// A tensor of the type named `kind` (`q4_K`, `bf16`, …).
    pub fn new(name: impl Into<String>, kind: &str, dims: &[u64]) -> Self {
        let ggml_type = types::by_name(kind).unwrap_or_else(|| panic!("unknown type {kind}")).id;
        Self { name: name.into(), ggml_type, dims: dims.to_vec(), bytes: None }
    }

    /// Its data's size.
    pub fn size(&self) -> Result<u64, GgufError> {
        match types::by_id(self.ggml_type) {
            Some(t) => t.bytes(&self.dims).ok_or_else(|| {
                GgufError::InvalidSpec(format!(
                    "{}: {:?} is not whole blocks",
                    self.name, self.dims
                ))
            }),
            None => self.bytes.ok_or_else(|| {
                GgufError::InvalidSpec(format!(
                    "{}: type {} needs its size",
                    self.name, self.ggml_type
                ))
            }),
        }
    }
}

/// A model of any tensors: its metadata and tensor table are what a real
/// one has; its weights are zeros (it is for planning, not for loading).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelSpec {
    pub metadata: Vec<(String, MetaValue)>,
    pub tensors: Vec<TensorSpec>,
}

/// Writes `spec` at `path`; with `parts` > 1, split as llama.cpp's
/// `gguf-split` does: `STEM-0000k-of-0000n.gguf` beside `path`, the tensors
/// in order across the parts, the metadata in the first, and `split.no`,
/// `split.count` and `split.tensors.count` in each. Returns the files.
pub fn write_model(path: &Path, spec: &ModelSpec, parts: u16) -> Result<Vec<PathBuf>, GgufError> {
    let sizes = spec.tensors.iter().map(TensorSpec::size).collect::<Result<Vec<_>, _>>()?;
    let parts = parts.max(1);
    let paths: Vec<PathBuf> = if parts == 1 {
        vec![path.to_path_buf()]
    } else {
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("model");
        (1..=parts)
            .map(|k| path.with_file_name(format!("{stem}-{k:05}-of-{parts:05}.gguf")))
            .collect()
    };
    let per_part = spec.tensors.len().div_ceil(parts as usize).max(1);
    for (no, file) in paths.iter().enumerate() {
        let io = |source| GgufError::Io { path: file.display().to_string(), source };
        let mut meta: Vec<(String, Value)> = if no == 0 { spec.metadata.clone() } else { vec![] };
        if parts > 1 {
            meta.push(("split.no".into(), Value::U16(no as u16)));
            meta.push(("split.count".into(), Value::U16(parts)));
            meta.push(("split.tensors.count".into(), Value::U32(spec.tensors.len() as u32)));
        }
        let range =
            (no * per_part).min(spec.tensors.len())..((no + 1) * per_part).min(spec.tensors.len());
        let table: Vec<_> = spec.tensors[range.clone()]
            .iter()
            .zip(&sizes[range.clone()])
            .map(|(t, size)| (t.name.as_str(), &t.dims[..], t.ggml_type, *size))
            .collect();
        let mut w = Writer { inner: BufWriter::new(File::create(file).map_err(io)?), written: 0 };
        header(&mut w, meta.iter().map(|(k, v)| (k.as_str(), v)), &table).map_err(io)?;
        for size in &sizes[range] {
            std::io::copy(&mut std::io::repeat(0).take(*size), &mut w.inner).map_err(io)?;
            w.written += size;
            w.pad().map_err(io)?;
        }
        w.inner.flush().map_err(io)?;
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_model_has_header_and_expected_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        let spec = LlamaSpec::tiny();
        let size = write_random_llama(&path, &spec, 7).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len() as u64, size);
        assert_eq!(&bytes[0..4], b"GGUF");
        assert_eq!(u32::from_le_bytes(bytes[4..8].try_into().unwrap()), 3);
        let n_tensors = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
        assert_eq!(n_tensors, 3 + 9 * spec.layers as u64);
        // Weights dominate: 4 bytes per parameter, plus a small header.
        let params: u64 = tensors(&spec).iter().map(Tensor::elements).sum();
        assert!(size > params * 4 && size < params * 4 + 64 * 1024, "size {size}");
    }

    #[test]
    fn same_seed_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.gguf"), dir.path().join("b.gguf"));
        write_random_llama(&a, &LlamaSpec::tiny(), 1).unwrap();
        write_random_llama(&b, &LlamaSpec::tiny(), 1).unwrap();
        assert_eq!(std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
    }

    #[test]
    fn rejects_heads_that_do_not_divide_width() {
        let spec = LlamaSpec { width: 250, ..LlamaSpec::tiny() };
        let dir = tempfile::tempdir().unwrap();
        let err = write_random_llama(&dir.path().join("x.gguf"), &spec, 0).unwrap_err();
        assert!(err.to_string().contains("multiple of heads"), "{err}");
    }
}
