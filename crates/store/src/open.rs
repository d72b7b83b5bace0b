//! Opening a store: the superblock found on member 0, the volume over every
//! member, the base loaded, pending updates replayed from the WAL, and the
//! row cache set up and warmed on a thread of its own.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use solidgraph_io::sync::RwLockExt;
use solidgraph_io::{BackendChoice, Volume, VolumeOptions};

use crate::base::{load_base, load_table_range, member_path};
use crate::cache::PageCache;
use crate::error::{Result, StoreError, file_err};
use crate::order::OrderMaps;
use crate::rowcache::{Admit, RowCache};
use crate::store::Store;
use crate::superblock::{Superblock, Table};
use crate::warmup::warm_rows;
use crate::writer::{self, Writer};

#[derive(Clone)]
pub struct OpenOptions {
    /// Page cache budget in bytes (0: no cache).
    pub cache_bytes: u64,
    pub backend: BackendChoice,
    pub inflight_per_member: usize,
    /// Open for updates: takes the store's writer lock (one writer process).
    pub writable: bool,
    /// Memory the pending updates may hold before a write merges them into
    /// pages (0: merge only on request).
    pub delta_budget: u64,
    /// A cache of tensor rows (not pages) with this budget, for read-only
    /// opens: a hot row shares its page with cold ones, so caching rows
    /// holds several times more hot rows per byte. Tensor pages then bypass
    /// the page cache, which keeps adjacency. Open fills it with the rows
    /// of the highest-degree vertices (one read of the budget's bytes). 0:
    /// rows go through the page cache.
    pub row_cache_bytes: u64,
    /// Which rows the row cache takes in.
    pub row_admission: RowAdmission,
}

/// What a row cache admits on a miss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RowAdmission {
    /// Rows that missed before (a doorkeeper; see `rowcache::Admit::Seen`),
    /// so rows asked for once do not push out rows asked for again. The
    /// default: it hit the most rows in the sampling benchmark
    /// (docs/PERFORMANCE.md, Row cache).
    #[default]
    Seen,
    /// Every row (plain SIEVE).
    All,
    /// Only rows of the vertices of highest degree at import (the store's
    /// hot table), as many as the budget holds; every row when the budget
    /// holds more rows than the table ranks or the store has no hot table.
    /// SIEVE alone already keeps the hubs' rows, and the ranking (out-degree
    /// at import) misses rows hot for other reasons.
    Hot,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            cache_bytes: 256 << 20,
            backend: BackendChoice::Auto,
            inflight_per_member: 64,
            writable: false,
            delta_budget: 256 << 20,
            row_cache_bytes: 0,
            row_admission: RowAdmission::Seen,
        }
    }
}

/// Reads both superblock copies from member 0 with plain reads (the page
/// size is not known yet) and returns the valid one with the higher epoch.
fn bootstrap(dir: &Path, backend: &BackendChoice) -> Result<Superblock> {
    let p0 = member_path(dir, 0);
    let head = if let BackendChoice::Sim(disk) = backend {
        disk.peek(0, 0, 2 * 65536)
    } else {
        let mut f = std::fs::File::open(&p0).map_err(|e| {
            // A store is a directory: say what the path is instead, before
            // the member's own error ("Not a directory").
            match std::fs::metadata(dir) {
                // Nothing there is a missing file (an OSError with ENOENT
                // in Python), worded as what the caller asked for.
                Err(m) if m.kind() == std::io::ErrorKind::NotFound => {
                    StoreError::File { path: dir.to_path_buf(), source: std::io::Error::new(m.kind(), NoSuchStore(m)) }
                }
                Ok(m) if !m.is_dir() => StoreError::NotAStore { path: dir.to_path_buf(), reason: "is a file, not a SolidGraph store".into() },
                _ if e.kind() == std::io::ErrorKind::NotFound => {
                    StoreError::NotAStore { path: dir.to_path_buf(), reason: format!("not a SolidGraph store: {} is missing", p0.display()) }
                }
                _ => StoreError::File { path: p0.clone(), source: e },
            }
        })?;
        let mut head = Vec::new();
        f.by_ref().take(2 * 65536).read_to_end(&mut head).map_err(file_err(&p0))?;
        head
    };
    let mut best: Option<Superblock> = None;
    let mut first_err = None;
    let mut ps = 4096;
    while ps <= 65536 {
        for which in 0..2u64 {
            let at = which as usize * ps;
            if head.len() < at + ps {
                continue;
            }
            match Superblock::decode(which, &head[at..at + ps], dir) {
                Ok(sb) if sb.page_size as usize == ps => {
                    if best.as_ref().is_none_or(|b| sb.epoch > b.epoch) {
                        best = Some(sb);
                    }
                }
                Ok(_) => {}
                Err(e @ (StoreError::NewerFormat { .. } | StoreError::OlderFormat { .. })) => return Err(e),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        ps *= 2;
    }
    best.ok_or_else(|| match first_err {
        Some(StoreError::Corrupt { reason, .. }) => {
            StoreError::NotAStore { path: dir.to_path_buf(), reason: format!("not a SolidGraph store: no valid superblock ({reason})") }
        }
        Some(e) => e,
        None => StoreError::NotAStore { path: dir.to_path_buf(), reason: "not a SolidGraph store: file too short for a superblock".into() },
    })
}

/// The OS's "no such file" for a store path, shown as "no such store" (the
/// OS error stays its source, so its `kind()` and `errno` still say
/// NotFound / ENOENT).
#[derive(Debug)]
struct NoSuchStore(std::io::Error);

impl std::fmt::Display for NoSuchStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("no such store")
    }
}

impl std::error::Error for NoSuchStore {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

impl Store {
    pub fn open(path: &Path, opts: &OpenOptions) -> Result<Store> {
        Store::open_with(path, opts, None)
    }

    /// Another handle on this store, opened with `opts` (caches of its
    /// own), that shares this handle's vertex order maps (4 bytes a vertex
    /// each, loaded on first use) instead of loading them again: a loader
    /// sampling through caches of its own budget beside the user's handle.
    /// The maps are shared only when both opens see the same files and
    /// order table; otherwise the new handle loads its own.
    pub fn open_sibling(&self, opts: &OpenOptions) -> Result<Store> {
        let (files, maps) = self.order_share();
        Store::open_with(self.path(), opts, Some(Sibling { files, order: self.base().sb.order, maps }))
    }

    fn open_with(path: &Path, opts: &OpenOptions, sibling: Option<Sibling>) -> Result<Store> {
        check_cache_budgets(opts)?;
        let sb = bootstrap(path, &opts.backend)?;
        let paths: Vec<PathBuf> = (0..sb.members as usize).map(|i| member_path(path, i)).collect();
        let vol = Volume::open(
            &paths,
            VolumeOptions {
                page_size: sb.page_size as usize,
                stripe_pages: sb.stripe_pages,
                backend: opts.backend.clone(),
                inflight_per_member: opts.inflight_per_member,
                writable: opts.writable,
                ..Default::default()
            },
        )?;
        if vol.num_pages() < sb.total_pages {
            return Err(StoreError::Corrupt {
                page: vol.num_pages(),
                reason: format!("store is truncated: {} pages on disk, superblock says {}", vol.num_pages(), sb.total_pages),
            });
        }
        let base = load_base(&vol, sb)?;
        // The hubs whose rows the row cache starts with (and may admit only).
        let (rows, hot) = if opts.row_cache_bytes > 0 && !opts.writable {
            let hot = load_table_range(&vol, &base.sb.hot, 0, rows_held(&base.sb, opts.row_cache_bytes))?;
            (Some(row_cache(&base.sb, opts.row_cache_bytes, opts.row_admission, &hot)?), hot)
        } else {
            (None, Vec::new())
        };
        let cache = PageCache::new(opts.cache_bytes as usize, base.sb.page_size as usize);
        let files = file_identity(&member_path(path, 0), &opts.backend);
        let same = sibling.filter(|s| files.is_some() && s.files == files && s.order == base.sb.order);
        let mut s = Store::new(path, vol, cache, rows, base);
        s.set_identity(files, same.map(|s| s.maps));
        s.recover(opts)?;
        if s.gather().rows.is_some() {
            // A warm-up that fails leaves rows uncached, never wrong: a
            // gather that needs them reads their pages itself and meets the
            // same error there, in its caller.
            let (warm, hot) = (s.snapshot(), Arc::new(hot));
            let h = hot.clone();
            let spawned = std::thread::Builder::new().name("sg-warm-rows".into()).spawn(move || {
                let _ = warm_rows(warm.gather(), &warm.base(), &h);
                warm.warming().finish();
            });
            if spawned.is_err() {
                let _ = warm_rows(s.gather(), &s.base(), &hot);
                s.warming().finish();
            }
        }
        Ok(s)
    }

    /// Replays the log past the checkpoint into the delta; a writable open
    /// also takes the writer lock and keeps the log open for appends.
    fn recover(&mut self, opts: &OpenOptions) -> Result<()> {
        let base = self.base();
        let records = if opts.writable {
            let (mut w, records) = Writer::open(self.path(), &base, opts.delta_budget)?;
            if let BackendChoice::Sim(disk) = &opts.backend {
                w.wal.sim = Some(disk.clone());
            }
            self.writer = Some(w);
            records
        } else {
            writer::read_log(self.path(), &base)?
        };
        let mut delta = self.delta.write_locked();
        writer::replay(Arc::make_mut(&mut delta), records, &base.sb, self.path())
    }
}

/// What a sibling open shares when it sees the same store: the files'
/// identity and order table it was opened with, and its order maps.
struct Sibling {
    files: Option<(u64, u64)>,
    order: Table,
    maps: Arc<OrderMaps>,
}

/// Device and inode of a store's member file; None on the simulated disk
/// or when it cannot be read (the handle then shares nothing).
fn file_identity(path: &Path, backend: &BackendChoice) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    if matches!(backend, BackendChoice::Sim(_)) {
        return None;
    }
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// The row cache for `budget` bytes; see `RowAdmission`. `hot`: the head of
/// the hot table, as many vertices as the budget holds rows for.
fn row_cache(sb: &Superblock, budget: u64, admission: RowAdmission, hot: &[u64]) -> Result<RowCache> {
    let row_bytes: Vec<usize> = sb.tensors.iter().map(|t| t.row_bytes() as usize).collect();
    match admission {
        RowAdmission::Seen => return Ok(RowCache::new(budget as usize, &row_bytes, Admit::Seen)),
        RowAdmission::All => return Ok(RowCache::new(budget as usize, &row_bytes, Admit::All)),
        RowAdmission::Hot if sb.hot.words == 0 || rows_held(sb, budget) >= sb.hot.words => {
            return Ok(RowCache::new(budget as usize, &row_bytes, Admit::All));
        }
        RowAdmission::Hot => {}
    }
    let mut bits = vec![0u64; sb.num_nodes.div_ceil(64) as usize];
    for &v in hot {
        let word = bits
            .get_mut((v / 64) as usize)
            .ok_or_else(|| StoreError::Corrupt { page: sb.hot.start, reason: format!("hot table names vertex {v} of {}", sb.num_nodes) })?;
        *word |= 1 << (v % 64);
    }
    Ok(RowCache::new(budget as usize, &row_bytes, Admit::Only(Box::new(move |v| bits.get((v / 64) as usize).is_some_and(|w| w >> (v % 64) & 1 == 1)))))
}

/// How many vertices' rows (of every tensor) a row cache of `budget`
/// bytes holds.
/// Refuses caches larger than the machine's memory: the caches size their
/// tables from the budget at open, so such a budget is an allocation that
/// aborts the process, never a cache that could be filled.
fn check_cache_budgets(opts: &OpenOptions) -> Result<()> {
    let memory = crate::mem::machine_memory();
    if memory == 0 {
        return Ok(()); // unknown: nothing to check against
    }
    for (name, bytes) in [("cache_bytes", opts.cache_bytes), ("row_cache_bytes", opts.row_cache_bytes)] {
        if bytes > memory {
            return Err(StoreError::Invalid(format!("{name} {bytes} is more than this machine's memory ({memory} bytes)")));
        }
    }
    Ok(())
}

fn rows_held(sb: &Superblock, budget: u64) -> u64 {
    let row_bytes: Vec<usize> = sb.tensors.iter().map(|t| t.row_bytes() as usize).collect();
    RowCache::rows_held(budget as usize, &row_bytes) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::source::EdgeInput;
    use crate::import::{ImportOptions, import};
    use crate::order::VertexOrder;

    /// A star around `hub` over vertices 0..8, renumbered by degree: the
    /// hub becomes vertex 0 inside.
    fn star(p: &Path, hub: u64) {
        let leaves: Vec<u64> = (0..8).filter(|&v| v != hub).collect();
        let edges = [EdgeInput::Memory { src: vec![hub; leaves.len()], dst: leaves, weights: None, labels: None }];
        let o = ImportOptions { undirected: true, order: VertexOrder::Degree, ..Default::default() };
        import(p, &edges, &[], &o, &|_, _, _| {}).unwrap();
    }

    fn internal(s: &Store, v: u64) -> u64 {
        let mut ids = [v];
        s.to_internal(&mut ids).unwrap();
        ids[0]
    }

    #[test]
    fn a_sibling_shares_the_order_maps_of_the_same_store_only() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("g.sg");
        star(&p, 3);
        let a = Store::open(&p, &OpenOptions::default()).unwrap();
        assert_eq!(internal(&a, 3), 0);
        let b = a.open_sibling(&OpenOptions { cache_bytes: 1 << 20, ..Default::default() }).unwrap();
        assert!(Arc::ptr_eq(&a.order_share().1, &b.order_share().1));
        assert_eq!(internal(&b, 3), 0);
        // Another store renamed into place at the same path (as an import
        // does) while `a` is open: the sibling reads its own order.
        std::fs::remove_dir_all(&p).unwrap();
        star(&p, 5);
        let c = a.open_sibling(&OpenOptions::default()).unwrap();
        assert!(!Arc::ptr_eq(&a.order_share().1, &c.order_share().1));
        assert_eq!(internal(&c, 5), 0);
        assert_eq!(internal(&a, 3), 0);
    }
}
