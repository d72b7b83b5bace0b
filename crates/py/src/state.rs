//! The process-wide budget for whole-graph algorithms' state, as the CLI's
//! `run --state-budget` sets it: a store's vertex count sizes each
//! algorithm's arrays, so a caller on a small machine (or one reading
//! stores it does not trust) caps what an algorithm may allocate.

use pyo3::prelude::*;
use solidgraph_engine::state;

use crate::errors::invalid;

/// Sets the most memory, in bytes, the state of every later whole-graph
/// algorithm in this process may take (BFS levels, PageRank ranks, ...);
/// an algorithm that needs more raises `OverBudgetError` before it
/// allocates anything. None restores the default, the machine's memory.
#[pyfunction]
#[pyo3(signature = (budget))]
pub fn set_state_budget(budget: Option<u64>) -> PyResult<()> {
    match budget {
        Some(0) => Err(invalid("set_state_budget: the budget must be at least 1 byte (None restores the default)")),
        b => {
            state::set_budget(b.unwrap_or(0));
            Ok(())
        }
    }
}

/// The state budget in bytes now in force (the machine's memory unless
/// `set_state_budget` lowered it).
#[pyfunction]
pub fn state_budget() -> u64 {
    state::budget()
}
