//! Weights: named f32 tensors in `weights.safetensors`, each checked
//! against the shape model.json declares for it and for finiteness.

use std::collections::BTreeMap;
use std::path::Path;

use safetensors::{Dtype, SafeTensors, tensor::TensorView};

use crate::error::{Result, RunnerError};
use crate::limits::{MAX_COLS, MAX_ELEMENTS, MAX_WEIGHTS_BYTES};
use crate::tensor::Tensor;

/// One weight as stored: its shape (as PyTorch has it) and values, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Weight {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

impl Weight {
    pub fn new(shape: Vec<usize>, data: Vec<f32>) -> Weight {
        assert_eq!(shape.iter().product::<usize>(), data.len(), "a weight holds the product of its shape");
        Weight { shape, data }
    }

    /// As a runner value: `[product of leading dims, last dim]`, a vector as one row.
    pub fn to_tensor(&self) -> Tensor {
        let cols = self.shape.last().copied().unwrap_or(1);
        let rows = self.data.len().checked_div(cols).unwrap_or(0);
        Tensor::new(rows, cols, self.data.clone())
    }
}

/// Checks a declared shape against the limits: what model.json may ask for.
pub fn check_declared(name: &str, shape: &[usize]) -> Result<()> {
    let elements = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let ok = !shape.is_empty() && shape.len() <= 4 && shape.iter().all(|&d| d > 0) && shape[shape.len() - 1] <= MAX_COLS;
    if !ok || elements.is_none_or(|n| n > MAX_ELEMENTS) {
        return Err(RunnerError::Invalid(format!(
            "weight {name:?} declares shape {shape:?}: 1 to 4 positive dims, at most {MAX_COLS} columns, {MAX_ELEMENTS} values"
        )));
    }
    Ok(())
}

/// Every declared weight, checked: present, f32, of the declared shape, finite.
pub fn check_weights(declared: &BTreeMap<String, Vec<usize>>, given: &BTreeMap<String, Weight>) -> Result<()> {
    for (name, shape) in declared {
        check_declared(name, shape)?;
        let w = given.get(name).ok_or_else(|| RunnerError::MissingWeight { name: name.clone() })?;
        if &w.shape != shape {
            return Err(RunnerError::WeightShape { name: name.clone(), found: w.shape.clone(), expected: shape.clone() });
        }
        if let Some(at) = w.data.iter().position(|x| !x.is_finite()) {
            return Err(RunnerError::WeightNotFinite { name: name.clone(), at, value: w.data[at] });
        }
    }
    Ok(())
}

/// Reads the declared weights from a safetensors file (others in it, such as
/// batch norm's `num_batches_tracked`, are left unread).
pub fn read_weights(path: &Path, declared: &BTreeMap<String, Vec<usize>>) -> Result<BTreeMap<String, Weight>> {
    let io = |source| RunnerError::Io { path: path.to_path_buf(), source };
    let size = std::fs::metadata(path).map_err(io)?.len();
    if size > MAX_WEIGHTS_BYTES {
        return Err(RunnerError::TooLarge { path: path.to_path_buf(), size, limit: MAX_WEIGHTS_BYTES });
    }
    let bytes = std::fs::read(path).map_err(io)?;
    let file = SafeTensors::deserialize(&bytes).map_err(|e| RunnerError::WeightsFile(e.to_string()))?;
    let mut out = BTreeMap::new();
    for (name, shape) in declared {
        check_declared(name, shape)?;
        let view = file.tensor(name).map_err(|_| RunnerError::MissingWeight { name: name.clone() })?;
        if view.dtype() != Dtype::F32 {
            return Err(RunnerError::WeightDtype { name: name.clone(), found: format!("{:?}", view.dtype()) });
        }
        let data = view.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        out.insert(name.clone(), Weight { shape: view.shape().to_vec(), data });
    }
    check_weights(declared, &out)?;
    Ok(out)
}

/// Writes weights as safetensors (little-endian f32).
pub fn write_weights(path: &Path, weights: &BTreeMap<String, Weight>) -> Result<()> {
    let bytes: Vec<(String, Vec<u8>, Vec<usize>)> =
        weights.iter().map(|(n, w)| (n.clone(), w.data.iter().flat_map(|x| x.to_le_bytes()).collect(), w.shape.clone())).collect();
    let views = bytes
        .iter()
        .map(|(n, b, s)| Ok((n.as_str(), TensorView::new(Dtype::F32, s.clone(), b).map_err(|e| RunnerError::WeightsFile(e.to_string()))?)))
        .collect::<Result<Vec<_>>>()?;
    safetensors::serialize_to_file(views, None, path).map_err(|e| RunnerError::WeightsFile(format!("{}: {e}", path.display())))
}
