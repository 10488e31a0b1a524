//! GGUF model files: reading a model's header, metadata and tensor table
//! ([`read`]), the ggml tensor types ([`types`]), and writing models of our
//! own for tests and demos ([`write`]).

pub mod read;
pub mod types;
pub mod write;

pub use read::{Gguf, ReadError, Tensor};
pub use write::{
    GgufError, LlamaSpec, MetaValue, ModelSpec, TensorSpec, write_model, write_random_llama,
};
