//! A dense row-major f32 matrix: the one value type of the runner. Node
//! tensors, weights (flattened to `[product of leading dims, last dim]`),
//! intermediate values and per-edge scores are all `Tensor`s.

use solidgraph_store::{DType, Rows};

use crate::error::{Result, RunnerError};
use crate::limits::{MAX_COLS, MAX_ELEMENTS};

#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f32>,
}

impl Tensor {
    pub fn new(rows: usize, cols: usize, data: Vec<f32>) -> Tensor {
        assert_eq!(rows.checked_mul(cols), Some(data.len()), "tensor data holds rows * cols values");
        Tensor { rows, cols, data }
    }

    pub fn zeros(rows: usize, cols: usize) -> Tensor {
        Tensor::new(rows, cols, vec![0.0; rows * cols])
    }

    /// Builds a tensor from caller data, checking the shape instead of asserting it.
    pub fn from_vec(name: &str, rows: usize, cols: usize, data: Vec<f32>) -> Result<Tensor> {
        if rows.checked_mul(cols) != Some(data.len()) || cols > MAX_COLS || data.len() > MAX_ELEMENTS {
            let message = format!("{} values do not make a {rows} x {cols} tensor (limits: {MAX_COLS} columns, {MAX_ELEMENTS} values)", data.len());
            return Err(RunnerError::Input { name: name.into(), message });
        }
        Ok(Tensor { rows, cols, data })
    }

    /// The rows a store gather returns (`Store::tensor`, `Sample::tensors`), as f32.
    pub fn from_rows(name: &str, rows: &Rows) -> Result<Tensor> {
        let cols = rows.dim as usize;
        let width = |size: usize| cols.checked_mul(size).filter(|&w| w > 0);
        let input = |message: String| RunnerError::Input { name: name.into(), message };
        let data: Vec<f32> = match rows.dtype {
            DType::F32 => {
                let w = width(4).ok_or_else(|| input("zero-width tensor".into()))?;
                if !rows.data.len().is_multiple_of(w) {
                    return Err(input(format!("{} bytes are not whole rows of {w}", rows.data.len())));
                }
                rows.data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
            }
            DType::F16 => {
                let w = width(2).ok_or_else(|| input("zero-width tensor".into()))?;
                if !rows.data.len().is_multiple_of(w) {
                    return Err(input(format!("{} bytes are not whole rows of {w}", rows.data.len())));
                }
                rows.data.chunks_exact(2).map(|b| f16_to_f32(u16::from_le_bytes([b[0], b[1]]))).collect()
            }
            other => {
                return Err(input(format!("dtype {other:?} is not f32; the runner computes in f32")));
            }
        };
        let n = data.len() / cols;
        Tensor::from_vec(name, n, cols, data)
    }

    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }

    pub fn row_mut(&mut self, i: usize) -> &mut [f32] {
        &mut self.data[i * self.cols..(i + 1) * self.cols]
    }

    /// The first `n` rows.
    pub fn head(&self, n: usize) -> Tensor {
        assert!(n <= self.rows, "head of {n} rows of {}", self.rows);
        Tensor::new(n, self.cols, self.data[..n * self.cols].to_vec())
    }

    /// The largest |a - b| / max(1, |b|) over all elements: the tests' tolerance measure.
    pub fn max_rel_diff(&self, other: &Tensor) -> f32 {
        assert_eq!((self.rows, self.cols), (other.rows, other.cols), "compared tensors have one shape");
        self.data.iter().zip(&other.data).map(|(a, b)| (a - b).abs() / b.abs().max(1.0)).fold(0.0, f32::max)
    }
}

/// IEEE half to single precision (stores may keep features as f16 to halve their pages).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let frac = (h & 0x3ff) as u32;
    let bits = match (exp, frac) {
        (0, 0) => sign,
        (0, f) => {
            // Subnormal: value = f * 2^-24, exact in f32.
            return if sign != 0 { -(f as f32) * 2f32.powi(-24) } else { f as f32 * 2f32.powi(-24) };
        }
        (0x1f, f) => sign | 0x7f80_0000 | (f << 13),
        (e, f) => sign | ((e + 112) << 23) | (f << 13),
    };
    f32::from_bits(bits)
}
