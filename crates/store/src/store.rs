//! An open store: the parts it shares with its snapshots (volume, caches,
//! order maps), its current base and pending updates, and the small
//! accessors. Each kind of work lives in a file of its own: `open.rs`,
//! `read.rs` (batched reads over base and delta), `draw.rs` (the sampler's
//! partial reads), `ids.rs` (id mapping), `update.rs`, `merge.rs`; the
//! parts below take what they need of it (`planner.rs`, `gather.rs`,
//! `warmup.rs`, `scan.rs`, `verify.rs`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use solidgraph_io::sync::RwLockExt;
use solidgraph_io::{MemberStats, Volume};

use crate::base::{Base, Direction, GttRef};
use crate::cache::{CacheStats, PageCache};
use crate::delta::Delta;
use crate::error::{Result, StoreError};
use crate::fetch::Fetcher;
use crate::gather::Gather;
use crate::order::OrderMaps;
use crate::rowcache::{Expected, RowCache};
use crate::superblock::{Superblock, TensorMeta};
use crate::verify::{self, VerifyReport};
use crate::warmup::Warming;
use crate::writer::Writer;

#[derive(Debug, Clone, Default)]
pub struct StoreStats {
    pub cache: CacheStats,
    /// The row cache's, when there is one (hits and misses count rows).
    pub rows: Option<CacheStats>,
    pub members: Vec<MemberStats>,
    pub page_size: u64,
    /// Syncs of the write-ahead log since open (0 when read-only).
    pub wal_syncs: u64,
}

impl StoreStats {
    /// Every page read from the volume: cache misses, scans and the row
    /// cache's reads, which bypass the page cache.
    pub fn pages_read(&self) -> u64 {
        self.bytes_read() / self.page_size.max(1)
    }
    pub fn ios(&self) -> u64 {
        self.members.iter().map(|m| m.ios).sum()
    }
    pub fn bytes_read(&self) -> u64 {
        self.members.iter().map(|m| m.bytes_read).sum()
    }
}

/// Parts a store shares with its snapshots.
struct Shared {
    path: PathBuf,
    vol: Volume,
    cache: PageCache,
    /// Tensor rows (`rowcache.rs`). Only in read-only opens: no merge here
    /// can change a row.
    rows: Option<RowCache>,
    warming: Warming,
    /// Shared with sibling handles (`Store::open_sibling`).
    order: Arc<OrderMaps>,
    /// Device and inode of the first member file, when it is a file: two
    /// opens see the same store only if they match (an import renames a
    /// new directory into place).
    files: Option<(u64, u64)>,
}

/// What `Store::view` returns: reads through it see one version.
pub enum View<'a> {
    Store(&'a Store),
    Snapshot(Box<Store>),
}

impl std::ops::Deref for View<'_> {
    type Target = Store;
    fn deref(&self) -> &Store {
        match self {
            View::Store(s) => s,
            View::Snapshot(s) => s,
        }
    }
}

pub struct Store {
    shared: Arc<Shared>,
    base: RwLock<Arc<Base>>,
    /// Updates since the pages were written (replayed from the WAL at open).
    /// Shared with snapshots: a write copies it only while a snapshot holds
    /// it (`Arc::make_mut`), so taking a snapshot costs no copy.
    pub(crate) delta: RwLock<Arc<Delta>>,
    /// The log and writer lock of a store opened writable.
    pub(crate) writer: Option<Writer>,
}

impl Store {
    /// A store over `base` with no pending updates, not writable yet (see
    /// `open`). The warm-up counts as done unless there is a row cache.
    pub(crate) fn new(path: &Path, vol: Volume, cache: PageCache, rows: Option<RowCache>, base: Base) -> Store {
        Store {
            shared: Arc::new(Shared { path: path.to_path_buf(), vol, cache, warming: Warming::new(rows.is_none()), rows, order: Arc::default(), files: None }),
            delta: RwLock::new(Arc::new(Delta::new(&base, base.sb.directed && base.sb.inn.is_none()))),
            base: RwLock::new(Arc::new(base)),
            writer: None,
        }
    }

    /// A read-only view of the graph as it is now: later updates and merges
    /// do not change what it reads, and the pages it reads are not reused
    /// while it lives. Costs no copy: the next write copies the pending
    /// updates instead, once, if this view still holds them.
    pub fn snapshot(&self) -> Store {
        // The base changes only under the delta's write lock (merge,
        // add_tensor), so the pair read under its read lock is one version.
        // Read apart, a merge between the two reads pairs the old base
        // with the new delta, and every read of the view retries forever.
        let delta = self.delta.read_locked();
        let base = self.base();
        assert_eq!(base.sb.epoch, delta.epoch, "a snapshot's pages and pending updates are of one version");
        Store { shared: self.shared.clone(), base: RwLock::new(base), delta: RwLock::new(delta.clone()), writer: None }
    }

    /// One version of the graph for a call that reads it more than once
    /// (an analytics pass per level, a sampling hop per read): a snapshot
    /// when this store takes writes, else the store itself. Without it a
    /// batch committed between two reads is seen by the later ones only,
    /// and the answer matches no version of the graph.
    pub fn view(&self) -> View<'_> {
        if self.writer.is_some() { View::Snapshot(Box::new(self.snapshot())) } else { View::Store(self) }
    }

    /// The current base (see `Base`).
    pub(crate) fn base(&self) -> Arc<Base> {
        self.base.read_locked().clone()
    }

    pub(crate) fn set_base(&self, b: Arc<Base>) {
        *self.base.write_locked() = b;
    }

    /// Where reads get pages: the volume through the page cache, or not.
    pub(crate) fn fetcher(&self) -> Fetcher<'_> {
        Fetcher { vol: &self.shared.vol, cache: &self.shared.cache }
    }

    /// Where gathers get rows: pages and the row cache.
    pub(crate) fn gather(&self) -> Gather<'_> {
        Gather { fetch: self.fetcher(), rows: self.shared.rows.as_ref() }
    }

    pub(crate) fn cache(&self) -> &PageCache {
        &self.shared.cache
    }

    pub(crate) fn order(&self) -> &OrderMaps {
        &self.shared.order
    }

    /// What a sibling open needs to share this handle's order maps
    /// (`Store::open_sibling`): the files' identity and the maps.
    pub(crate) fn order_share(&self) -> (Option<(u64, u64)>, Arc<OrderMaps>) {
        (self.shared.files, self.shared.order.clone())
    }

    /// Records the files' identity of a store being opened and takes a
    /// sibling's order maps; before any other handle exists.
    pub(crate) fn set_identity(&mut self, files: Option<(u64, u64)>, order: Option<Arc<OrderMaps>>) {
        let shared = Arc::get_mut(&mut self.shared).expect("a store being opened has no other handle");
        shared.files = files;
        if let Some(order) = order {
            shared.order = order;
        }
    }

    pub(crate) fn warming(&self) -> &Warming {
        &self.shared.warming
    }

    /// Refuses the lower lists while updates are pending: they hold the
    /// pages' edges only, and patching them is not worth it for a region
    /// the next merge drops.
    pub(crate) fn check_lower(&self, dir: Direction) -> Result<()> {
        if dir == Direction::Lower && !self.delta.read_locked().is_empty() {
            return Err(StoreError::Invalid("the lower lists do not hold the pending updates: read out-lists, or merge (which drops the lower lists)".into()));
        }
        Ok(())
    }

    pub(crate) fn check_ids(&self, ids: &[u64]) -> Result<()> {
        let n = self.num_nodes();
        match ids.iter().find(|&&v| v >= n) {
            Some(&v) => Err(StoreError::VertexOutOfRange { vertex: v, num_nodes: n }),
            None => Ok(()),
        }
    }

    pub(crate) fn check_columns(&self, weights: bool, labels: bool) -> Result<()> {
        self.base().check_columns(weights, labels)
    }

    pub fn path(&self) -> &Path {
        &self.shared.path
    }
    /// The superblock of the pages (updates since the last merge are not in
    /// it; see `num_nodes`, `num_edges`).
    pub fn superblock(&self) -> Superblock {
        self.base().sb.clone()
    }
    /// Vertices, including those added since the pages were written.
    pub fn num_nodes(&self) -> u64 {
        let d = self.delta.read_locked();
        d.base_nodes + d.added_nodes
    }
    /// Stored edges, counting updates since the pages were written.
    pub fn num_edges(&self) -> u64 {
        let d = self.delta.read_locked();
        d.base_edges.saturating_add_signed(d.edges_added)
    }
    pub fn directed(&self) -> bool {
        self.base().sb.directed
    }
    pub fn has_weights(&self) -> bool {
        self.base().sb.fmt.weights
    }
    pub fn has_labels(&self) -> bool {
        self.base().sb.fmt.labels
    }
    pub fn page_size(&self) -> usize {
        self.shared.vol.page_size()
    }
    pub fn tensors(&self) -> Vec<TensorMeta> {
        self.base().sb.tensors.clone()
    }
    pub fn tensor_meta(&self, name: &str) -> Result<TensorMeta> {
        let base = self.base();
        base.tensor_index(name).map(|i| base.sb.tensors[i].clone())
    }
    pub fn volume(&self) -> &Volume {
        &self.shared.vol
    }
    /// Bytes of the store on disk.
    pub fn size_bytes(&self) -> u64 {
        self.base().sb.total_pages * self.page_size() as u64
    }

    pub fn gtt(&self, dir: Direction) -> Result<GttRef> {
        self.check_lower(dir)?;
        GttRef::new(self.base(), dir)
    }

    pub fn stats(&self) -> StoreStats {
        StoreStats {
            cache: self.shared.cache.stats(),
            rows: self.shared.rows.as_ref().map(|r| r.stats()),
            members: self.shared.vol.stats(),
            page_size: self.page_size() as u64,
            wal_syncs: self.writer.as_ref().map_or(0, |w| w.wal.syncs()),
        }
    }

    pub fn reset_stats(&self) {
        self.shared.cache.reset_stats();
        if let Some(r) = &self.shared.rows {
            r.reset_stats();
        }
        self.shared.vol.reset_stats();
    }

    /// Empties the page and row caches (for cold measurements).
    pub fn clear_cache(&self) {
        self.shared.cache.clear();
        if let Some(r) = &self.shared.rows {
            r.clear();
        }
    }

    /// Tells the row cache that a batch gathered later will ask for the
    /// rows of vertices `ids` (internal ids): it keeps them and takes them in
    /// on a miss while the result lives (`rowcache::Upcoming`). Without a
    /// row cache this counts nothing.
    pub fn expect_rows(&self, ids: Vec<u64>) -> Expected {
        match &self.shared.rows {
            Some(rc) => rc.expect(ids),
            None => Expected::new(None, Vec::new()),
        }
    }

    /// Rows counted by live `expect_rows` results, duplicates counted.
    pub fn upcoming_rows(&self) -> usize {
        self.shared.rows.as_ref().map_or(0, |rc| rc.upcoming().held())
    }

    /// Blocks until the row cache's warm-up is over (see `Warming`).
    pub fn wait_warm(&self) {
        self.shared.warming.wait();
    }

    /// Checks the whole store (`verify.rs`); `progress(done, total)` after
    /// each batch. Pages no region names (freed by merges) are counted, not
    /// read.
    pub fn verify(&self, progress: &mut dyn FnMut(u64, u64)) -> Result<VerifyReport> {
        verify::verify(self.volume(), &self.base(), self.path(), progress)
    }
}
