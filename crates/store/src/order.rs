//! Vertex order: the ids a store uses inside against the ids its user gave.
//!
//! An import may renumber vertices by degree, highest first
//! (`ImportOptions::order`). Most edges point at hubs, so hubs with small
//! ids make the gaps between sorted neighbor ids small (fewer varint bytes
//! to read), pack the hubs' lists and feature rows together, and put the
//! per-vertex state that algorithms read at random (ranks, labels) for most
//! edges into a few MiB that stay in the CPU caches.
//!
//! Everything below the user-facing API (pages, GTT, delta, WAL, engine)
//! speaks internal ids. The Python and CLI layers translate at their edge
//! with the batch calls here. Vertices added after import (ids at or past
//! the table's length) keep their ids, as do sentinels like `u64::MAX`.
//!
//! On disk: one Table. Word 0 is the vertex count n at import; then
//! `ceil(n / 2)` words map external to internal ids and as many map internal
//! to external ids, two u32 per word (low half first). An empty table means
//! ids are kept as given.

use std::cmp::Reverse;
use std::sync::{Arc, Mutex};

use rayon::slice::ParallelSliceMut;
use solidgraph_io::Volume;
use solidgraph_io::sync::MutexExt;

use crate::base::load_table_range;
use crate::error::{Result, StoreError};
use crate::superblock::Table;

/// How an import numbers vertices inside the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VertexOrder {
    /// Keep the input's ids.
    #[default]
    Input,
    /// Highest degree (out + in) first, ties by input id.
    Degree,
}

impl VertexOrder {
    pub fn parse(s: &str) -> Option<VertexOrder> {
        match s {
            "input" => Some(VertexOrder::Input),
            "degree" => Some(VertexOrder::Degree),
            _ => None,
        }
    }
}

/// Both directions of a renumbering of `0..n`.
pub struct Permutation {
    pub to_internal: Vec<u32>,
    pub to_external: Vec<u32>,
}

impl Permutation {
    /// Highest `degree` first, ties by id.
    pub fn by_degree(degree: &[u32]) -> Permutation {
        let mut to_external: Vec<u32> = (0..degree.len() as u32).collect();
        to_external.par_sort_unstable_by_key(|&v| (Reverse(degree[v as usize]), v));
        let mut to_internal = vec![0u32; degree.len()];
        for (i, &v) in to_external.iter().enumerate() {
            to_internal[v as usize] = i as u32;
        }
        Permutation { to_internal, to_external }
    }

    /// The table words (see the module doc).
    pub fn words(&self) -> Vec<u64> {
        self.words_iter().collect()
    }

    /// `words` one at a time: the import writes them page by page.
    pub fn words_iter(&self) -> impl Iterator<Item = u64> + '_ {
        fn pack(m: &[u32]) -> impl Iterator<Item = u64> + '_ {
            m.chunks(2).map(|c| c[0] as u64 | (c.get(1).copied().unwrap_or(0) as u64) << 32)
        }
        std::iter::once(self.to_internal.len() as u64).chain(pack(&self.to_internal)).chain(pack(&self.to_external))
    }

    /// How many words `words_iter` gives.
    pub fn words_len(&self) -> u64 {
        1 + 2 * self.to_internal.len().div_ceil(2) as u64
    }
}

/// Table words read at once while loading a map.
const LOAD_WORDS: usize = 1 << 20;

/// The two maps, each read from the store the first time it is needed
/// (64 MiB each at 2^24 vertices; analytics only ever need one).
#[derive(Default)]
pub(crate) struct OrderMaps {
    to_internal: Mutex<Option<Arc<Vec<u32>>>>,
    to_external: Mutex<Option<Arc<Vec<u32>>>>,
}

impl OrderMaps {
    /// The map to internal ids (`to_internal`) or to external ones, loaded
    /// on first use; None when the store keeps input ids.
    pub(crate) fn get(&self, vol: &Volume, t: &Table, num_nodes: u64, to_internal: bool) -> Result<Option<Arc<Vec<u32>>>> {
        if t.words == 0 {
            return Ok(None);
        }
        let slot = if to_internal { &self.to_internal } else { &self.to_external };
        let mut g = slot.locked();
        if let Some(m) = g.as_ref() {
            return Ok(Some(m.clone()));
        }
        let corrupt = |reason: String| StoreError::Corrupt { page: t.start, reason };
        let n = vertices(vol, t, num_nodes)?;
        let half = n.div_ceil(2);
        // A chunk of words at a time: the map's 4 B per vertex is the peak.
        let first = if to_internal { 1 } else { 1 + half };
        let mut m: Vec<u32> = Vec::with_capacity(2 * half as usize);
        for from in (0..half).step_by(LOAD_WORDS) {
            let words = load_table_range(vol, t, first + from, (LOAD_WORDS as u64).min(half - from))?;
            m.extend(words.iter().flat_map(|&w| [w as u32, (w >> 32) as u32]));
        }
        m.truncate(n as usize);
        if let Some(&bad) = m.iter().find(|&&v| v as u64 >= n) {
            return Err(corrupt(format!("vertex order maps to {bad}, past its {n} vertices")));
        }
        let m = Arc::new(m);
        *g = Some(m.clone());
        Ok(Some(m))
    }

    /// Maps `ids` in place (see `map_ids`). A few ids (a BFS source) read
    /// their table pages instead of loading a whole map.
    pub(crate) fn map<T: Copy + TryInto<usize> + From<u32>>(&self, vol: &Volume, t: &Table, num_nodes: u64, to_internal: bool, ids: &mut [T]) -> Result<()> {
        if t.words == 0 {
            return Ok(());
        }
        let slot = if to_internal { &self.to_internal } else { &self.to_external };
        let loaded = slot.locked().is_some();
        if loaded || ids.len() > FEW {
            if let Some(m) = self.get(vol, t, num_nodes, to_internal)? {
                map_ids(&m, ids);
            }
            return Ok(());
        }
        let n = vertices(vol, t, num_nodes)?;
        let first = if to_internal { 1 } else { 1 + n.div_ceil(2) };
        for x in ids {
            if let Ok(i) = (*x).try_into()
                && (i as u64) < n
            {
                // In the table: `vertices` checked its length against n.
                let at = first + i as u64 / 2;
                let Some(&w) = load_table_range(vol, t, at, 1)?.first() else {
                    return Err(StoreError::Corrupt { page: t.start, reason: format!("vertex order table has no word {at}") });
                };
                let m = if i % 2 == 0 { w as u32 } else { (w >> 32) as u32 };
                if m as u64 >= n {
                    return Err(StoreError::Corrupt { page: t.start, reason: format!("vertex order maps to {m}, past its {n} vertices") });
                }
                *x = T::from(m);
            }
        }
        Ok(())
    }
}

/// The vertex count of a (non-empty) order table, checked against the
/// table's length and the store's vertex count: the maps' words are read
/// by position from it, so a count the table does not hold is corruption,
/// not an index past the words read.
fn vertices(vol: &Volume, t: &Table, num_nodes: u64) -> Result<u64> {
    let n = load_table_range(vol, t, 0, 1)?.first().copied().unwrap_or(0);
    if t.words != 1 + 2 * n.div_ceil(2) || n > num_nodes {
        return Err(StoreError::Corrupt {
            page: t.start,
            reason: format!("vertex order of {n} vertices in {} words, store has {num_nodes} vertices", t.words),
        });
    }
    Ok(n)
}

/// Ids mapped one table page each rather than by loading a map.
const FEW: usize = 16;

/// Maps every id `map` covers, in place; others pass unchanged.
pub(crate) fn map_ids<T: Copy + TryInto<usize> + From<u32>>(map: &[u32], ids: &mut [T]) {
    for x in ids {
        if let Ok(i) = (*x).try_into()
            && let Some(&m) = map.get(i)
        {
            *x = T::from(m);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_degree_is_a_permutation_hubs_first() {
        let deg = [1u32, 5, 0, 5, 2];
        let p = Permutation::by_degree(&deg);
        assert_eq!(p.to_external, vec![1, 3, 4, 0, 2]);
        for (e, &i) in p.to_internal.iter().enumerate() {
            assert_eq!(p.to_external[i as usize] as usize, e);
        }
        let mut ids = vec![0u64, 1, 4, 7, u64::MAX];
        map_ids(&p.to_internal, &mut ids);
        assert_eq!(ids, vec![3, 0, 2, 7, u64::MAX]);
        let mut neg = vec![-1i64, 2];
        map_ids(&p.to_external, &mut neg);
        assert_eq!(neg, vec![-1, 4]);
        let w = p.words();
        assert_eq!(w.len(), 7);
        assert_eq!(p.words_len(), 7);
        assert_eq!(w[..2], [5, 3]);
    }
}
