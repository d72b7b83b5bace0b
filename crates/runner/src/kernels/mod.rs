//! Kernels: the code that runs one op on one device. `reference` is the
//! portable oracle (plain loops, one thread); `cpu` is the optimised CPU
//! set (GEMM from the `gemm` crate, rayon over destination rows, fused
//! aggregate + GEMM). Shapes are checked before a kernel runs (columns at
//! load, rows per run), so kernels assert them rather than report them.

pub mod cpu;
pub mod reference;

use crate::block::{Block, EdgeView};
use crate::dfg::Op;
use crate::tensor::Tensor;

/// What a kernel reads: the op's operands in [`Op::operands`] order, the block
/// it names and the edges it sees (self-loops and coefficients applied).
pub struct Args<'a> {
    pub x: &'a [&'a Tensor],
    pub block: Option<&'a Block>,
    pub edges: Option<&'a EdgeView>,
}

pub trait Kernel: Send + Sync {
    /// Named in errors and in `Model::kernel_names`.
    fn name(&self) -> &str;

    /// False when the kernel's device or CPU features are missing here.
    fn available(&self) -> bool {
        true
    }

    /// Runs `op`; an error (a device failure, an op it does not implement) names the cause.
    fn run(&self, op: &Op, args: &Args) -> Result<Tensor, String>;
}

/// The `[lo, hi)` edge range of each destination, for kernels that split by row.
pub(crate) fn rows_of(v: &EdgeView) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
    v.indptr.windows(2).map(|w| w[0]..w[1])
}
