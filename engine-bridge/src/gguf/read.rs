//! Reads a GGUF file's header, metadata and tensor table, never its
//! weights, and the same of every part of a model split across files
//! (`split.count`).
//!
//! A tensor's size is taken from where its data starts and where the next
//! tensor's does, so every type reads, including types newer than this
//! reader. Where [`super::types`] knows the type, the size is computed from
//! the dimensions, checked to fit that space, and exact (the space also
//! holds up to `alignment − 1` bytes of padding).
//!
//! Every count and length is bounded before anything is allocated for it.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::types;

/// Most tensors in one file, metadata pairs in one file, and parts.
const MAX_TENSORS: u64 = 1 << 20;
const MAX_PAIRS: u64 = 1 << 16;
const MAX_PARTS: u64 = 1 << 10;
/// Longest key or tensor name, and longest string value kept.
const MAX_NAME: u64 = 1 << 16;
const MAX_STRING: u64 = 1 << 24;
/// Arrays longer than this (a tokenizer's vocabulary) are skipped, not kept.
const MAX_KEPT_ARRAY: u64 = 1 << 16;
/// ggml's most dimensions.
const MAX_DIMS: u32 = 4;
const DEFAULT_ALIGNMENT: u64 = 32;

/// A model as its GGUF file (or files) describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Gguf {
    /// The first part's metadata; arrays longer than 65,536 are left out.
    pub metadata: BTreeMap<String, Value>,
    pub tensors: Vec<Tensor>,
    /// Bytes of every part together.
    pub file_bytes: u64,
    /// The files read, in part order (one for a model in one file).
    pub parts: Vec<PathBuf>,
}

/// One tensor's entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub name: String,
    pub ggml_type: u32,
    /// ggml order: `dims[0]` varies fastest.
    pub dims: Vec<u64>,
    pub bytes: u64,
    /// Which part of a split model holds it (0 for a single file).
    pub part: usize,
}

/// What was wrong with a file, and where.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ReadError {
    pub path: String,
    pub message: String,
}

/// Reads a model file and, when it is one part of a split model, every
/// other part beside it.
pub fn read(path: &Path) -> Result<Gguf, ReadError> {
    let first = read_part(path)?;
    let count = first.metadata.get("split.count").and_then(Value::as_u64).unwrap_or(1);
    if count <= 1 {
        return Ok(Gguf {
            metadata: first.metadata,
            tensors: first.tensors,
            file_bytes: first.file_bytes,
            parts: vec![path.to_path_buf()],
        });
    }
    let error = |message: String| ReadError { path: path.display().to_string(), message };
    if count > MAX_PARTS {
        return Err(error(format!("split.count {count} is over {MAX_PARTS}")));
    }
    let paths = split_paths(path, count).ok_or_else(|| {
        error(format!(
            "a part of a model split in {count}, but not named NAME-00001-of-{count:05}.gguf: \
             its other parts cannot be found"
        ))
    })?;
    let mut gguf =
        Gguf { metadata: BTreeMap::new(), tensors: vec![], file_bytes: 0, parts: vec![] };
    for (no, part_path) in paths.into_iter().enumerate() {
        let part = if part_path == path { first.clone() } else { read_part(&part_path)? };
        let said = part.metadata.get("split.no").and_then(Value::as_u64).unwrap_or(0);
        if said != no as u64 {
            return Err(ReadError {
                path: part_path.display().to_string(),
                message: format!("says it is part {} where part {} belongs", said + 1, no + 1),
            });
        }
        gguf.file_bytes += part.file_bytes;
        gguf.tensors.extend(part.tensors.into_iter().map(|t| Tensor { part: no, ..t }));
        if no == 0 {
            gguf.metadata = part.metadata;
        }
        gguf.parts.push(part_path);
    }
    Ok(gguf)
}

/// The paths of every part, from any part's path: `NAME-0000k-of-0000n.gguf`.
fn split_paths(path: &Path, count: u64) -> Option<Vec<PathBuf>> {
    let name = path.file_name()?.to_str()?;
    let suffix = format!("-of-{count:05}.gguf");
    let stem = name.strip_suffix(&suffix)?;
    let (prefix, no) = stem.rsplit_once('-')?;
    (no.len() == 5 && no.bytes().all(|b| b.is_ascii_digit())).then_some(())?;
    Some((1..=count).map(|k| path.with_file_name(format!("{prefix}-{k:05}{suffix}"))).collect())
}

#[derive(Clone)]
struct Part {
    metadata: BTreeMap<String, Value>,
    tensors: Vec<Tensor>,
    file_bytes: u64,
}

fn read_part(path: &Path) -> Result<Part, ReadError> {
    let error = |message: String| ReadError { path: path.display().to_string(), message };
    let file = File::open(path).map_err(|e| error(e.to_string()))?;
    let file_bytes = file.metadata().map_err(|e| error(e.to_string()))?.len();
    let mut r = Reader { inner: BufReader::new(file), file_bytes };
    r.part().map_err(error)
}

/// Entries as the tensor table lists them, before their sizes are known.
struct Entry {
    name: String,
    ggml_type: u32,
    dims: Vec<u64>,
    offset: u64,
}

struct Reader {
    inner: BufReader<File>,
    file_bytes: u64,
}

impl Reader {
    fn part(&mut self) -> Result<Part, String> {
        let mut magic = [0u8; 4];
        self.exact(&mut magic)?;
        if &magic != b"GGUF" {
            return Err("not a GGUF file".into());
        }
        let version = self.u32()?;
        if !(2..=3).contains(&version) {
            return Err(format!("GGUF version {version} is not read (2 and 3 are)"));
        }
        let n_tensors = self.count(MAX_TENSORS, "tensors")?;
        let n_pairs = self.count(MAX_PAIRS, "metadata pairs")?;
        let mut metadata = BTreeMap::new();
        for _ in 0..n_pairs {
            let key = self.string(MAX_NAME)?;
            let kind = self.u32()?;
            if let Some(value) = self.value(kind)? {
                metadata.insert(key, value);
            }
        }
        let mut entries = Vec::with_capacity(n_tensors as usize);
        for _ in 0..n_tensors {
            let name = self.string(MAX_NAME)?;
            let n_dims = self.u32()?;
            if n_dims == 0 || n_dims > MAX_DIMS {
                return Err(format!("tensor {name} has {n_dims} dimensions"));
            }
            let dims = (0..n_dims).map(|_| self.u64()).collect::<Result<Vec<_>, _>>()?;
            let ggml_type = self.u32()?;
            let offset = self.u64()?;
            entries.push(Entry { name, ggml_type, dims, offset });
        }
        let alignment = metadata
            .get("general.alignment")
            .and_then(Value::as_u64)
            .filter(|a| a.is_power_of_two())
            .unwrap_or(DEFAULT_ALIGNMENT);
        let here = self.position()?;
        let data_start = here.div_ceil(alignment) * alignment;
        let data_bytes =
            self.file_bytes.checked_sub(data_start).ok_or("the tensor data is missing")?;
        let tensors = sized(entries, data_bytes)?;
        Ok(Part { metadata, tensors, file_bytes: self.file_bytes })
    }

    fn exact(&mut self, buf: &mut [u8]) -> Result<(), String> {
        self.inner.read_exact(buf).map_err(|_| "the file ends too soon".to_string())
    }

    fn u32(&mut self) -> Result<u32, String> {
        let mut b = [0u8; 4];
        self.exact(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    fn u64(&mut self) -> Result<u64, String> {
        let mut b = [0u8; 8];
        self.exact(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn count(&mut self, most: u64, what: &str) -> Result<u64, String> {
        let n = self.u64()?;
        if n > most {
            return Err(format!("{n} {what}, over the {most} read"));
        }
        Ok(n)
    }

    fn position(&mut self) -> Result<u64, String> {
        self.inner.stream_position().map_err(|e| e.to_string())
    }

    fn skip(&mut self, n: u64) -> Result<(), String> {
        if self.position()?.saturating_add(n) > self.file_bytes {
            return Err("the file ends too soon".into());
        }
        self.inner.seek_relative(n as i64).map_err(|e| e.to_string())
    }

    fn string(&mut self, most: u64) -> Result<String, String> {
        let n = self.u64()?;
        if n > most || self.position()?.saturating_add(n) > self.file_bytes {
            return Err(format!("a string of {n} bytes"));
        }
        let mut buf = vec![0u8; n as usize];
        self.exact(&mut buf)?;
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    /// A metadata value of GGUF type `kind`; `None` for an array too long
    /// to keep (it is skipped).
    fn value(&mut self, kind: u32) -> Result<Option<Value>, String> {
        let mut b = [0u8; 8];
        Ok(Some(match kind {
            0 | 1 | 7 => {
                self.exact(&mut b[..1])?;
                match kind {
                    0 => Value::from(b[0]),
                    1 => Value::from(b[0] as i8),
                    _ => Value::from(b[0] != 0),
                }
            }
            2 | 3 => {
                self.exact(&mut b[..2])?;
                let v = u16::from_le_bytes([b[0], b[1]]);
                if kind == 2 { Value::from(v) } else { Value::from(v as i16) }
            }
            4..=6 => {
                self.exact(&mut b[..4])?;
                let bits = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                match kind {
                    4 => Value::from(bits),
                    5 => Value::from(bits as i32),
                    _ => Value::from(f32::from_bits(bits) as f64),
                }
            }
            10..=12 => {
                self.exact(&mut b)?;
                let bits = u64::from_le_bytes(b);
                match kind {
                    10 => Value::from(bits),
                    11 => Value::from(bits as i64),
                    _ => Value::from(f64::from_bits(bits)),
                }
            }
            8 => Value::from(self.string(MAX_STRING)?),
            9 => return self.array(),
            other => return Err(format!("metadata of unknown type {other}")),
        }))
    }

    fn array(&mut self) -> Result<Option<Value>, String> {
        let kind = self.u32()?;
        let n = self.u64()?;
        if kind == 9 {
            return Err("an array of arrays".into());
        }
        let width = match kind {
            0 | 1 | 7 => Some(1),
            2 | 3 => Some(2),
            4..=6 => Some(4),
            10..=12 => Some(8),
            _ => None,
        };
        if n > MAX_KEPT_ARRAY {
            // Skipped: fixed-width values at once, strings one by one.
            match width {
                Some(w) => self.skip(n.saturating_mul(w))?,
                None => {
                    for _ in 0..n {
                        let len = self.u64()?;
                        self.skip(len)?;
                    }
                }
            }
            return Ok(None);
        }
        let mut items = Vec::with_capacity(n as usize);
        for _ in 0..n {
            items.extend(self.value(kind)?);
        }
        Ok(Some(Value::Array(items)))
    }
}

/// Each entry's size: from its type and dimensions where the type is
/// known (and it must fit before the next tensor), from the offsets where
/// it is not.
fn sized(entries: Vec<Entry>, data_bytes: u64) -> Result<Vec<Tensor>, String> {
    let mut starts: Vec<u64> = entries.iter().map(|e| e.offset).collect();
    starts.sort_unstable();
    let mut out = Vec::with_capacity(entries.len());
    for e in entries {
        let next = starts.iter().copied().find(|s| *s > e.offset).unwrap_or(data_bytes);
        let space = next.checked_sub(e.offset).filter(|_| e.offset <= data_bytes);
        let space =
            space.ok_or_else(|| format!("tensor {} starts past the end of the file", e.name))?;
        let bytes = match types::by_id(e.ggml_type) {
            Some(t) => {
                let bytes = t.bytes(&e.dims).ok_or_else(|| {
                    format!("tensor {}: {:?} is not whole blocks of {}", e.name, e.dims, t.name)
                })?;
                if bytes > space {
                    return Err(format!(
                        "tensor {} needs {bytes} bytes as {} but has {space}",
                        e.name, t.name
                    ));
                }
                bytes
            }
            None => space,
        };
        out.push(Tensor { name: e.name, ggml_type: e.ggml_type, dims: e.dims, bytes, part: 0 });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::{MetaValue, ModelSpec, TensorSpec, write_model};

    /// Tensors of types a sizing by type number alone gets wrong (bf16,
    /// iq4_nl, mxfp4, i8, f64), K-quants, an MoE expert tensor, and a type
    /// no table knows yet.
    fn mixed() -> ModelSpec {
        let mut unknown = TensorSpec::new("blk.1.future.weight", "f32", &[250]);
        unknown.ggml_type = 77;
        unknown.bytes = Some(1000);
        ModelSpec {
            metadata: vec![
                ("general.architecture".into(), MetaValue::Str("llama".into())),
                ("general.alignment".into(), MetaValue::U32(32)),
            ],
            tensors: vec![
                TensorSpec::new("token_embd.weight", "bf16", &[256, 300]),
                TensorSpec::new("blk.0.attn_q.weight", "q4_K", &[256, 256]),
                TensorSpec::new("blk.0.attn_k.weight", "q6_K", &[256, 64]),
                TensorSpec::new("blk.0.attn_v.weight", "iq4_nl", &[256, 64]),
                TensorSpec::new("blk.0.ffn_gate_exps.weight", "mxfp4", &[256, 512, 8]),
                TensorSpec::new("blk.0.ffn_down_exps.weight", "iq2_xxs", &[512, 256, 8]),
                TensorSpec::new("blk.0.attn_norm.weight", "f32", &[256]),
                TensorSpec::new("blk.0.scale", "f64", &[3]),
                TensorSpec::new("blk.0.index", "i8", &[5]),
                TensorSpec::new("output.weight", "q8_0", &[256, 300]),
                unknown,
            ],
        }
    }

    #[test]
    fn every_type_reads_at_its_exact_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        let spec = mixed();
        write_model(&path, &spec, 1).unwrap();
        let gguf = read(&path).unwrap();
        assert_eq!(gguf.tensors.len(), spec.tensors.len());
        for (read, written) in gguf.tensors.iter().zip(&spec.tensors) {
            assert_eq!(
                (&read.name, read.ggml_type, &read.dims),
                (&written.name, written.ggml_type, &written.dims)
            );
            let size = written.size().unwrap();
            if written.ggml_type == 77 {
                // Unknown: up to where the next would start, padding and all.
                assert_eq!(read.bytes, size.next_multiple_of(32), "{}", read.name);
            } else {
                assert_eq!(read.bytes, size, "{}", read.name);
            }
        }
        assert_eq!(gguf.tensors[0].bytes, 256 * 300 * 2, "bf16: two bytes a value");
        assert_eq!(gguf.tensors[4].bytes, 256 * 512 * 8 / 32 * 17, "mxfp4: 17 bytes per 32");
        assert_eq!(gguf.file_bytes, std::fs::metadata(&path).unwrap().len());
        assert_eq!(gguf.metadata["general.architecture"], "llama");
    }

    #[test]
    fn a_split_model_reads_as_one_from_any_part() {
        let dir = tempfile::tempdir().unwrap();
        let spec = mixed();
        let parts = write_model(&dir.path().join("big.gguf"), &spec, 3).unwrap();
        assert!(parts[0].ends_with("big-00001-of-00003.gguf"), "{parts:?}");
        let whole = read(&parts[0]).unwrap();
        assert_eq!(whole.parts, parts);
        assert_eq!(whole.tensors.len(), spec.tensors.len());
        let names: Vec<&str> = whole.tensors.iter().map(|t| t.name.as_str()).collect();
        let written: Vec<&str> = spec.tensors.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, written);
        assert_eq!(whole.tensors.last().unwrap().part, 2);
        let on_disk: u64 = parts.iter().map(|p| std::fs::metadata(p).unwrap().len()).sum();
        assert_eq!(whole.file_bytes, on_disk);
        assert_eq!(whole.metadata["general.architecture"], "llama", "the first part's metadata");
        assert_eq!(read(&parts[1]).unwrap(), whole, "from the second part too");
        std::fs::remove_file(&parts[2]).unwrap();
        let err = read(&parts[0]).unwrap_err();
        assert!(err.path.ends_with("big-00003-of-00003.gguf"), "{err}");
    }

    #[test]
    fn a_vocabulary_sized_array_is_skipped_and_the_rest_still_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        let tokens = (0..70_000).map(|i| format!("t{i}")).collect();
        let spec = ModelSpec {
            metadata: vec![
                ("tokenizer.ggml.tokens".into(), MetaValue::ArrStr(tokens)),
                ("llama.attention.head_count_kv".into(), MetaValue::ArrI32(vec![8, 8, 4])),
                ("general.name".into(), MetaValue::Str("after".into())),
            ],
            tensors: vec![TensorSpec::new("w", "f16", &[64])],
        };
        write_model(&path, &spec, 1).unwrap();
        let gguf = read(&path).unwrap();
        assert!(!gguf.metadata.contains_key("tokenizer.ggml.tokens"));
        assert_eq!(gguf.metadata["llama.attention.head_count_kv"], serde_json::json!([8, 8, 4]));
        assert_eq!(gguf.metadata["general.name"], "after");
        assert_eq!(gguf.tensors[0].bytes, 128);
    }

    #[test]
    fn broken_files_are_refused_with_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        write_model(&path, &mixed(), 1).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let refused = |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            read(&path).unwrap_err().message
        };
        // Truncated inside the tensor data: the last tensor has no room.
        let short = refused(&bytes[..bytes.len() - 2000]);
        assert!(short.contains("needs") || short.contains("past the end"), "{short}");
        assert!(refused(&bytes[..100]).contains("ends too soon"));
        let mut huge = bytes.clone();
        huge[8..16].copy_from_slice(&(1u64 << 40).to_le_bytes());
        assert!(refused(&huge).contains("tensors, over"), "a count checked before it is used");
        let mut v1 = bytes.clone();
        v1[4..8].copy_from_slice(&1u32.to_le_bytes());
        assert!(refused(&v1).contains("version 1"));
        assert!(refused(b"GGML and then some").contains("not a GGUF file"));
    }
}
