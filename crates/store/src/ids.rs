//! Id mapping at the user-facing edge: the store's vertex order
//! (`order.rs`) applied to the ids users give and the ids results return.

use std::sync::Arc;

use crate::error::Result;
use crate::store::Store;

impl Store {
    /// Whether the import renumbered vertices (`order.rs`); callers that
    /// face users translate ids with `to_internal` / `to_external` and
    /// reindex per-vertex results with `external_ids` either way.
    pub fn reordered(&self) -> bool {
        self.base().sb.order.words > 0
    }

    /// The user's id of each of the store's vertices from the import (None
    /// when ids were kept): for loops that need it per element.
    pub fn external_ids(&self) -> Result<Option<Arc<Vec<u32>>>> {
        let sb = &self.base().sb;
        self.order().get(self.volume(), &sb.order, sb.num_nodes, false)
    }

    /// User ids to the store's, in place (ids past the import's vertices,
    /// and negative ones, pass unchanged).
    pub fn to_internal<T: Copy + TryInto<usize> + From<u32>>(&self, ids: &mut [T]) -> Result<()> {
        let sb = &self.base().sb;
        self.order().map(self.volume(), &sb.order, sb.num_nodes, true, ids)
    }

    /// The store's ids to the user's, in place (sentinels pass unchanged).
    pub fn to_external<T: Copy + TryInto<usize> + From<u32>>(&self, ids: &mut [T]) -> Result<()> {
        let sb = &self.base().sb;
        self.order().map(self.volume(), &sb.order, sb.num_nodes, false, ids)
    }
}
