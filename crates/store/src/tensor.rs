//! Node tensors: named, typed, row-major in their own region. The rows form
//! one byte stream over the payloads of consecutive tensor pages (page size
//! minus the header), so rows may straddle a page boundary; a gather maps
//! each row to the pages it covers, reads them in one batch, and copies.
//!
//! Tensor page header: key = tensor index in the superblock, aux = page index
//! within the tensor's region.

use crate::page::HEADER;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum DType {
    F32 = 1,
    F16 = 2,
    I64 = 3,
    I32 = 4,
    U8 = 5,
    Bool = 6,
}

impl DType {
    pub fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F16 => 2,
            DType::I64 => 8,
            DType::U8 | DType::Bool => 1,
        }
    }

    pub fn from_u8(b: u8) -> Option<DType> {
        Some(match b {
            1 => DType::F32,
            2 => DType::F16,
            3 => DType::I64,
            4 => DType::I32,
            5 => DType::U8,
            6 => DType::Bool,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F16 => "float16",
            DType::I64 => "int64",
            DType::I32 => "int32",
            DType::U8 => "uint8",
            DType::Bool => "bool",
        }
    }

    /// From a numpy dtype string ("<f4", "|b1", ...) or a name ("float32").
    pub fn parse(s: &str) -> Option<DType> {
        Some(match s.trim_start_matches(['<', '|', '=']) {
            "f4" | "float32" => DType::F32,
            "f2" | "float16" => DType::F16,
            "i8" | "int64" => DType::I64,
            "i4" | "int32" => DType::I32,
            "u1" | "uint8" => DType::U8,
            "b1" | "bool" => DType::Bool,
            _ => return None,
        })
    }
}

/// Payload bytes per tensor page.
pub fn payload(page_size: usize) -> usize {
    page_size - HEADER
}

/// Pages a tensor of `rows` x `row_bytes` occupies.
pub fn pages_for(rows: u64, row_bytes: u64, page_size: usize) -> u64 {
    (rows * row_bytes).div_ceil(payload(page_size) as u64)
}

/// Region-relative pages holding row `r`.
pub fn row_pages(r: u64, row_bytes: u64, page_size: usize) -> std::ops::Range<u64> {
    let pl = payload(page_size) as u64;
    let start = r * row_bytes;
    let end = start + row_bytes;
    start / pl..end.div_ceil(pl)
}
