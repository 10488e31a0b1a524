//! The ggml tensor types a GGUF file may name: how many values one block
//! holds and how many bytes it takes, as ggml's own type table has them.
//! The reader uses this to make a size exact and to check it; a type not
//! listed here still reads, sized by where the next tensor starts.

/// A tensor type: its ggml id, name, values per block and bytes per block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GgmlType {
    pub id: u32,
    pub name: &'static str,
    pub block: u64,
    pub block_bytes: u64,
}

const fn t(id: u32, name: &'static str, block: u64, block_bytes: u64) -> GgmlType {
    GgmlType { id, name, block, block_bytes }
}

/// Every type ggml stores in files today (ids 4, 5 and 31–33, 36–38 were
/// removed from ggml and are not listed).
pub const TYPES: &[GgmlType] = &[
    t(0, "f32", 1, 4),
    t(1, "f16", 1, 2),
    t(2, "q4_0", 32, 18),
    t(3, "q4_1", 32, 20),
    t(6, "q5_0", 32, 22),
    t(7, "q5_1", 32, 24),
    t(8, "q8_0", 32, 34),
    t(9, "q8_1", 32, 36),
    t(10, "q2_K", 256, 84),
    t(11, "q3_K", 256, 110),
    t(12, "q4_K", 256, 144),
    t(13, "q5_K", 256, 176),
    t(14, "q6_K", 256, 210),
    t(15, "q8_K", 256, 292),
    t(16, "iq2_xxs", 256, 66),
    t(17, "iq2_xs", 256, 74),
    t(18, "iq3_xxs", 256, 98),
    t(19, "iq1_s", 256, 50),
    t(20, "iq4_nl", 32, 18),
    t(21, "iq3_s", 256, 110),
    t(22, "iq2_s", 256, 82),
    t(23, "iq4_xs", 256, 136),
    t(24, "i8", 1, 1),
    t(25, "i16", 1, 2),
    t(26, "i32", 1, 4),
    t(27, "i64", 1, 8),
    t(28, "f64", 1, 8),
    t(29, "iq1_m", 256, 56),
    t(30, "bf16", 1, 2),
    t(34, "tq1_0", 256, 54),
    t(35, "tq2_0", 256, 66),
    t(39, "mxfp4", 32, 17),
];

/// The type with ggml id `id`, if this table knows it.
pub fn by_id(id: u32) -> Option<GgmlType> {
    TYPES.iter().copied().find(|t| t.id == id)
}

/// The type named `name` (`q4_K`, `bf16`, …), if this table knows it.
pub fn by_name(name: &str) -> Option<GgmlType> {
    TYPES.iter().copied().find(|t| t.name.eq_ignore_ascii_case(name))
}

impl GgmlType {
    /// Bytes of a tensor of this type with `dims` (ggml order: rows of
    /// `dims[0]` values); `None` when a row is not a whole number of blocks.
    pub fn bytes(&self, dims: &[u64]) -> Option<u64> {
        let (row, rest) = dims.split_first()?;
        if row % self.block != 0 {
            return None;
        }
        let rows = rest.iter().try_fold(1u64, |n, d| n.checked_mul(*d))?;
        (row / self.block).checked_mul(self.block_bytes)?.checked_mul(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_the_blocks() {
        // A 4096 × 4096 matrix: 16.8 M values.
        let dims = [4096, 4096];
        let size = |name: &str| by_name(name).unwrap().bytes(&dims).unwrap();
        assert_eq!(size("f32"), 4096 * 4096 * 4);
        assert_eq!(size("bf16"), 4096 * 4096 * 2);
        assert_eq!(size("q8_0"), 4096 * 128 * 34);
        assert_eq!(size("iq4_nl"), 4096 * 128 * 18);
        assert_eq!(size("q4_K"), 4096 * 16 * 144);
        assert_eq!(size("mxfp4"), 4096 * 128 * 17, "4.25 bits a value");
        assert_eq!(by_name("q4_K").unwrap().bytes(&[100, 2]), None, "not whole blocks");
    }

    #[test]
    fn ids_and_names_are_each_listed_once() {
        for (i, a) in TYPES.iter().enumerate() {
            for b in &TYPES[i + 1..] {
                assert!(a.id != b.id && a.name != b.name, "{a:?} and {b:?}");
            }
        }
    }
}
