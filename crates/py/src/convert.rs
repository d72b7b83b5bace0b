//! numpy <-> Rust conversions shared by the bindings.

use std::fmt::Display;

use numpy::{Element, PyArray1, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods, get_array_module};
use pyo3::prelude::*;
use pyo3::types::IntoPyDict;

use crate::errors::invalid;

/// `numpy.asarray(obj)`: lists, tuples and ranges become arrays the way
/// numpy sees them, so one code path checks every input form.
pub fn as_array<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyUntypedArray>> {
    let a = get_array_module(obj.py())?.call_method1("asarray", (obj,))?;
    Ok(a.downcast_into::<PyUntypedArray>()?)
}

fn try_ints<T>(a: &Bound<'_, PyUntypedArray>, what: &str) -> Option<PyResult<Vec<u64>>>
where
    T: Element + Copy + Display,
    u64: TryFrom<T>,
{
    let a = a.downcast::<PyArray1<T>>().ok()?.readonly();
    let v = a.as_array().iter().map(|&x| u64::try_from(x).map_err(|_| invalid(format!("{what} must be non-negative, not {x}")))).collect();
    Some(v)
}

/// Vertex ids (or other unsigned integers) from any 1-D integer array or
/// sequence of ints. Always copied: the store reads them with the GIL
/// released, while another Python thread could write to the caller's array.
/// Negative values are an error, not huge unsigned ids.
pub fn u64_vec(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u64>> {
    let a = as_array(obj)?;
    if a.ndim() != 1 {
        return Err(invalid(format!("{what} must be 1-D, not shape {:?}", a.shape())));
    }
    try_ints::<u64>(&a, what)
        .or_else(|| try_ints::<i64>(&a, what))
        .or_else(|| try_ints::<u32>(&a, what))
        .or_else(|| try_ints::<i32>(&a, what))
        .or_else(|| try_ints::<u16>(&a, what))
        .or_else(|| try_ints::<i16>(&a, what))
        .or_else(|| try_ints::<u8>(&a, what))
        .or_else(|| try_ints::<i8>(&a, what))
        // `numpy.asarray([])` is float64; an empty list is still no ids.
        .or_else(|| (a.len() == 0).then(|| Ok(Vec::new())))
        .unwrap_or_else(|| Err(invalid(format!("{what} must be integers, not {}", a.dtype()))))
}

/// A u64 result as an int64 array without a copy: the Vec moves into numpy
/// and is viewed as int64 (vertex ids and degrees are below 2^63; PyTorch
/// and PyG index with int64).
pub fn int64_array<'py>(py: Python<'py>, v: Vec<u64>) -> PyResult<Bound<'py, PyAny>> {
    PyArray1::from_vec(py, v).call_method1("view", ("int64",))
}

/// A 1-D array of `dtype` ("float32", "uint32") as a Vec, converting ints
/// and floats numpy can convert safely; NaN checks are the store's.
pub fn typed_vec<T: Element + Copy>(obj: &Bound<'_, PyAny>, dtype: &str, what: &str) -> PyResult<Vec<T>> {
    let np = get_array_module(obj.py())?;
    let a = np.call_method1("asarray", (obj,))?;
    let a = np.call_method("ascontiguousarray", (a,), Some(&[("dtype", dtype)].into_py_dict(obj.py())?))?;
    let a = a.downcast_into::<PyArray1<T>>().map_err(|_| invalid(format!("{what} must be a 1-D array of numbers")))?;
    Ok(a.readonly().as_array().to_vec())
}

/// The raw bytes of tensor rows of the store's `dtype` and row width. Other
/// dtypes are cast by numpy's `same_kind` rule, as numpy assigns into an
/// array (float64 to float32, int32 to int64, int to float); a cast that
/// changes kind (float to int, int to bool) is refused, naming both dtypes.
pub fn row_bytes(obj: &Bound<'_, PyAny>, dtype: &str, dim: u64, what: &str) -> PyResult<Vec<u8>> {
    let np = get_array_module(obj.py())?;
    let mut a = as_array(obj)?;
    let name: String = a.dtype().getattr("name")?.extract()?;
    if name != dtype {
        let kw = [("casting", "same_kind")].into_py_dict(obj.py())?;
        if !np.call_method("can_cast", (a.dtype(), dtype), Some(&kw))?.extract::<bool>()? {
            return Err(invalid(format!(
                "{what} holds {dtype} rows; {name} values do not cast to {dtype} safely (numpy's same_kind rule): convert them first"
            )));
        }
        a = a.call_method("astype", (dtype,), Some(&kw))?.downcast_into::<PyUntypedArray>()?;
    }
    let shape = a.shape().to_vec();
    let ok = match shape.as_slice() {
        [_] => dim == 1,
        [_, d] => *d as u64 == dim,
        _ => false,
    };
    if !ok {
        return Err(invalid(format!("{what}: rows must have width {dim}, got shape {shape:?}")));
    }
    let c = np.call_method1("ascontiguousarray", (a,))?;
    c.call_method0("tobytes")?.extract()
}
