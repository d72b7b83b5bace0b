//! `Graph.add_tensor`: a numpy array becomes a new node tensor of the store
//! (`Store::add_tensor`), read in place (no copy of a C-contiguous array)
//! with the GIL released, rows put in the store's vertex order on the way.

use numpy::{PyReadonlyArray1, PyUntypedArrayMethods, get_array_module};
use pyo3::prelude::*;
use solidgraph_store::{DType, Store, StoreError};

use crate::errors::{err, invalid};

/// Adds `array` ((num_nodes,) or (num_nodes, dim), one row per node in the
/// user's id order) as node tensor `name`.
pub fn add_tensor(py: Python<'_>, store: &Store, name: &str, array: &Bound<'_, PyAny>) -> PyResult<()> {
    let np = get_array_module(py)?;
    let a = np.call_method1("ascontiguousarray", (array,))?.downcast_into::<numpy::PyUntypedArray>()?;
    let descr: String = a.dtype().getattr("str")?.extract()?;
    let dtype =
        DType::parse(&descr).ok_or_else(|| invalid(format!("tensor {name:?}: dtype {descr} is not one of float32, float16, int64, int32, uint8, bool")))?;
    let (rows, dim) = match a.shape() {
        [n] => (*n as u64, 1),
        [n, d] => (*n as u64, *d as u64),
        s => return Err(invalid(format!("tensor {name:?} must be 1-D or 2-D, not shape {s:?}"))),
    };
    let n = store.num_nodes();
    if rows != n {
        return Err(invalid(format!("tensor {name:?} has {rows} rows; the graph has {n} nodes (one row per node)")));
    }
    let flat = a.call_method1("view", ("uint8",))?.call_method1("reshape", (-1,))?;
    let ro: PyReadonlyArray1<u8> = flat.extract()?;
    let bytes = ro.as_slice()?;
    let rb = (dim * dtype.size() as u64) as usize;
    let reordered = store.reordered();
    py.allow_threads(|| {
        store.add_tensor(name, dtype, dim, |first, buf: &mut [u8]| {
            let k = buf.len() / rb;
            if !reordered {
                let at = first as usize * rb;
                buf.copy_from_slice(&bytes[at..at + buf.len()]);
                return Ok::<(), StoreError>(());
            }
            // Row i of the store is the user's row of its external id.
            let mut ids: Vec<u64> = (first..first + k as u64).collect();
            store.to_external(&mut ids)?;
            for (i, &e) in ids.iter().enumerate() {
                let at = e as usize * rb;
                buf[i * rb..(i + 1) * rb].copy_from_slice(&bytes[at..at + rb]);
            }
            Ok(())
        })
    })
    .map_err(err)?;
    Ok(())
}
