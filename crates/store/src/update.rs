//! Batched updates of a writable store: validate the whole batch against the
//! current graph, log it as one WAL record, apply it to the delta, and (by
//! default) return only once the record is durable. A batch that fails
//! validation changes nothing.
//!
//! A record is visible to readers as soon as it is appended (later batches
//! validate against it); it is acknowledged to its writer once durable.
//! Recovery replays the durable records at open.

use rustc_hash::FxHashSet;
use std::fs::File;
use std::path::Path;
use std::sync::Mutex;

use crate::delta::{Op, Shape};
use crate::error::{Result, StoreError, file_err};
use crate::space::Space;
use crate::store::{Direction, OpenOptions, Store};
use crate::wal::{self, Wal};

/// Batches of at least this many items sync the log on a second thread
/// while they are applied.
const SYNC_BESIDE_APPLY: usize = 1024;

pub(crate) struct Writer {
    pub wal: Wal,
    /// Validation and append of one batch (or one merge) at a time.
    pub serial: Mutex<()>,
    pub space: Mutex<Space>,
    /// Pending-update bytes that trigger a merge (0: never by itself).
    delta_budget: u64,
    /// Held for the life of the store: one writer process.
    _lock: File,
}

fn lock(path: &Path) -> Result<File> {
    use std::os::fd::AsRawFd;
    let f = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(path).map_err(file_err(path))?;
    // SAFETY: flock on an fd we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(StoreError::Locked { path: path.parent().unwrap_or(path).to_path_buf() });
    }
    Ok(f)
}

/// A WAL record: the change in edge count (computed at validation, so replay
/// needs no reads), then the operation.
fn record(edges_added: i64, op: &Op) -> Vec<u8> {
    let mut b = edges_added.to_le_bytes().to_vec();
    b.extend_from_slice(&op.encode());
    b
}

impl Store {
    fn shape(&self) -> Shape {
        let base = self.base();
        Shape { undirected: !base.sb.directed, has_in: base.sb.directed && base.sb.inn.is_some() }
    }

    /// Replays the log past the checkpoint into the delta; a writable open
    /// also takes the writer lock and keeps the log open for appends.
    pub(crate) fn recover(&mut self, opts: &OpenOptions) -> Result<()> {
        let wal_path = self.path().join("wal.log");
        let base = self.base();
        let checkpoint = base.sb.checkpoint_lsn;
        let records = if opts.writable {
            let lock = lock(&self.path().join("writer.lock"))?;
            let (wal, records) = Wal::open(&wal_path, checkpoint)?;
            let space = Mutex::new(Space::new(&base));
            self.writer = Some(Writer { wal, serial: Mutex::new(()), space, delta_budget: opts.delta_budget, _lock: lock });
            records
        } else if wal_path.exists() {
            let bytes = std::fs::read(&wal_path).map_err(file_err(&wal_path))?;
            wal::recover(&bytes, &wal_path)?.records.into_iter().filter(|r| r.0 > checkpoint).collect()
        } else {
            Vec::new()
        };
        let shape = self.shape();
        let delta = self.delta.get_mut().unwrap();
        for (lsn, payload) in records {
            let bad = |why: String| StoreError::BadInput { path: wal_path.clone(), reason: format!("record {lsn}: {why}") };
            if payload.len() < 8 {
                return Err(bad("too short".into()));
            }
            let edges = i64::from_le_bytes(payload[..8].try_into().expect("8"));
            let op = Op::decode(&payload[8..]).map_err(|e| bad(e.to_string()))?;
            delta.apply(&op, shape);
            delta.edges_added += edges;
        }
        Ok(())
    }

    pub(crate) fn writer(&self) -> Result<&Writer> {
        self.writer.as_ref().ok_or(StoreError::ReadOnly)
    }

    /// Logs and applies a validated batch. Over the delta budget, the
    /// batch that crossed it merges (with the batch lock held, so writers
    /// wait and readers do not).
    fn commit(&self, w: &Writer, op: Op, edges_added: i64, durable: bool) -> Result<u64> {
        let lsn = w.wal.append(&record(edges_added, &op))?;
        let shape = self.shape();
        let apply = || {
            let mut d = self.delta.write().unwrap();
            d.apply(&op, shape);
            d.edges_added += edges_added;
            d.bytes
        };
        // The fdatasync waits on the device; the apply is CPU: overlap them
        // for big batches (the batch is acknowledged only after both).
        let (bytes, synced) = if durable && op.items() >= SYNC_BESIDE_APPLY {
            std::thread::scope(|sc| {
                let sync = sc.spawn(|| w.wal.sync_to(lsn));
                let bytes = apply();
                (bytes, sync.join().unwrap_or_else(|_| Err(StoreError::Invalid("WAL sync thread panicked".into()))))
            })
        } else {
            let bytes = apply();
            (bytes, if durable { w.wal.sync_to(lsn) } else { Ok(()) })
        };
        synced?;
        if w.delta_budget > 0 && bytes as u64 > w.delta_budget {
            // The batch is logged (and durable if asked): a failed merge
            // does not undo it. The next write over budget tries again, and
            // `merge()` reports the error.
            if let Err(e) = self.merge_locked(w) {
                log::warn!("{}: merge over the delta budget failed (updates stay in the log): {e}", self.path().display());
            }
        }
        Ok(lsn)
    }

    /// Update batches applied since the pages were written (held in the
    /// delta and the WAL until a merge).
    pub fn pending_updates(&self) -> u64 {
        self.delta.read().unwrap().ops
    }

    /// Makes every appended update durable.
    pub fn flush(&self) -> Result<()> {
        let w = self.writer()?;
        w.wal.sync_to(w.wal.appended_lsn())
    }

    fn check_live(&self, ids: &[u64], what: &str) -> Result<()> {
        let n = self.num_nodes();
        let d = self.delta.read().unwrap();
        for &v in ids {
            if v >= n {
                return Err(StoreError::Invalid(format!("{what}: vertex {} does not exist (the graph has {n} vertices)", self.user_id(v))));
            }
            if d.deleted.contains(&v) {
                return Err(StoreError::Invalid(format!("{what}: vertex {} was deleted", self.user_id(v))));
            }
        }
        Ok(())
    }

    /// `v` as the caller named it (update calls take the store's ids), for
    /// error messages.
    fn user_id(&self, v: u64) -> u64 {
        let mut x = [v];
        match self.to_external(&mut x) {
            Ok(()) => x[0],
            Err(_) => v,
        }
    }

    /// Stored entries of edge s -> d (both directions of an undirected edge).
    fn entries(directed: bool, s: u64, d: u64) -> i64 {
        if !directed && s != d { 2 } else { 1 }
    }

    fn pairs<'a>(src: &'a [u64], dst: &'a [u64], what: &str) -> Result<()> {
        if src.len() != dst.len() {
            return Err(StoreError::Invalid(format!("{what}: {} sources but {} destinations", src.len(), dst.len())));
        }
        if src.is_empty() {
            return Err(StoreError::Invalid(format!("{what}: empty batch")));
        }
        Ok(())
    }

    /// Adds `count` vertices; `tensors` gives their rows (row-major bytes)
    /// for some tensors, others read as zeros. Returns the new ids.
    pub fn add_vertices(&self, count: u64, tensors: &[(String, Vec<u8>)], durable: bool) -> Result<std::ops::Range<u64>> {
        let w = self.writer()?;
        let _g = w.serial.lock().unwrap();
        if count == 0 || count > 1 << 32 {
            return Err(StoreError::Invalid(format!("add_vertices: count {count} must be in 1..=2^32")));
        }
        for (name, rows) in tensors {
            let t = self.tensor_meta(name)?;
            if rows.len() as u64 != count * t.row_bytes() {
                return Err(StoreError::Invalid(format!(
                    "add_vertices: tensor {name:?} rows are {} bytes ({} x {}), got {} bytes for {count} vertices",
                    t.row_bytes(),
                    t.dim,
                    t.dtype.name(),
                    rows.len()
                )));
            }
        }
        let first = self.num_nodes();
        self.commit(w, Op::AddVertices { count, tensors: tensors.to_vec() }, 0, durable)?;
        Ok(first..first + count)
    }

    /// Deletes vertices and every edge that touches them.
    pub fn delete_vertices(&self, ids: &[u64], durable: bool) -> Result<()> {
        let w = self.writer()?;
        let _g = w.serial.lock().unwrap();
        self.check_live(ids, "delete_vertices")?;
        let mut seen = FxHashSet::default();
        if let Some(v) = ids.iter().find(|v| !seen.insert(**v)) {
            return Err(StoreError::Invalid(format!("delete_vertices: vertex {} listed twice", self.user_id(*v))));
        }
        // Edge entries that go: the vertices' lists, and their entries in
        // other lists (known for undirected stores and stores with in-edges).
        let out = self.neighbors(ids, Direction::Out, false, false)?;
        let mut gone = 0i64;
        let sb = self.superblock();
        let has_in = sb.inn.is_some() || !sb.directed;
        let inn = if has_in { Some(self.neighbors(ids, Direction::In, false, false)?) } else { None };
        for (i, &v) in ids.iter().enumerate() {
            let list = &out.indices[out.indptr[i] as usize..out.indptr[i + 1] as usize];
            gone += list.len() as i64;
            if let Some(inn) = &inn {
                let l = &inn.indices[inn.indptr[i] as usize..inn.indptr[i + 1] as usize];
                // Entries v in the out-lists of neighbors that stay.
                gone += l.iter().filter(|&&u| u != v && !seen.contains(&u)).count() as i64;
            }
        }
        self.commit(w, Op::DeleteVertices { ids: ids.to_vec() }, -gone, durable)?;
        Ok(())
    }

    /// Adds edges (an existing edge is replaced); undirected stores add both
    /// directions. Weights default to 1.0 where the store keeps weights.
    pub fn add_edges(&self, src: &[u64], dst: &[u64], weights: Option<&[f32]>, labels: Option<&[u32]>, durable: bool) -> Result<()> {
        let w = self.writer()?;
        let _g = w.serial.lock().unwrap();
        Self::pairs(src, dst, "add_edges")?;
        self.check_live(src, "add_edges")?;
        self.check_live(dst, "add_edges")?;
        if let Some(ws) = weights {
            self.check_columns(true, false)?;
            if ws.len() != src.len() {
                return Err(StoreError::Invalid(format!("add_edges: {} weights for {} edges", ws.len(), src.len())));
            }
            if let Some(x) = ws.iter().find(|x| !x.is_finite()) {
                return Err(StoreError::Invalid(format!("add_edges: weight {x} is not finite")));
            }
        }
        if let Some(ls) = labels {
            self.check_columns(false, true)?;
            if ls.len() != src.len() {
                return Err(StoreError::Invalid(format!("add_edges: {} labels for {} edges", ls.len(), src.len())));
            }
        }
        let now = self.find_edges(src, dst)?;
        let directed = self.directed();
        let mut seen = FxHashSet::default();
        let mut added = 0i64;
        for (i, (&s, &d)) in src.iter().zip(dst).enumerate() {
            let key = if directed { (s, d) } else { (s.min(d), s.max(d)) };
            if now[i].is_none() && seen.insert(key) {
                added += Self::entries(directed, s, d);
            }
        }
        let op = Op::AddEdges { src: src.to_vec(), dst: dst.to_vec(), weights: weights.map(<[f32]>::to_vec), labels: labels.map(<[u32]>::to_vec) };
        self.commit(w, op, added, durable)?;
        Ok(())
    }

    /// Deletes edges; each must exist.
    pub fn delete_edges(&self, src: &[u64], dst: &[u64], durable: bool) -> Result<()> {
        let w = self.writer()?;
        let _g = w.serial.lock().unwrap();
        Self::pairs(src, dst, "delete_edges")?;
        self.check_live(src, "delete_edges")?;
        self.check_live(dst, "delete_edges")?;
        let now = self.find_edges(src, dst)?;
        let directed = self.directed();
        let mut seen = FxHashSet::default();
        let mut gone = 0i64;
        for (i, (&s, &d)) in src.iter().zip(dst).enumerate() {
            let key = if directed { (s, d) } else { (s.min(d), s.max(d)) };
            if now[i].is_none() || !seen.insert(key) {
                return Err(StoreError::Invalid(format!("delete_edges: edge {} -> {} does not exist (or is listed twice)", self.user_id(s), self.user_id(d))));
            }
            gone += Self::entries(directed, s, d);
        }
        self.commit(w, Op::DeleteEdges { src: src.to_vec(), dst: dst.to_vec() }, -gone, durable)?;
        Ok(())
    }

    /// Sets the weights of existing edges (labels are kept).
    pub fn update_edge_weights(&self, src: &[u64], dst: &[u64], weights: &[f32], durable: bool) -> Result<()> {
        let w = self.writer()?;
        let _g = w.serial.lock().unwrap();
        Self::pairs(src, dst, "update_edge_weights")?;
        self.check_columns(true, false)?;
        self.check_live(src, "update_edge_weights")?;
        self.check_live(dst, "update_edge_weights")?;
        if weights.len() != src.len() {
            return Err(StoreError::Invalid(format!("update_edge_weights: {} weights for {} edges", weights.len(), src.len())));
        }
        if let Some(x) = weights.iter().find(|x| !x.is_finite()) {
            return Err(StoreError::Invalid(format!("update_edge_weights: weight {x} is not finite")));
        }
        let now = self.find_edges(src, dst)?;
        let mut labels = Vec::with_capacity(src.len());
        for (i, l) in now.iter().enumerate() {
            match l {
                Some(l) => labels.push(*l),
                None => return Err(StoreError::Invalid(format!("update_edge_weights: edge {} -> {} does not exist", self.user_id(src[i]), self.user_id(dst[i])))),
            }
        }
        let op = Op::AddEdges { src: src.to_vec(), dst: dst.to_vec(), weights: Some(weights.to_vec()), labels: self.has_labels().then_some(labels) };
        self.commit(w, op, 0, durable)?;
        Ok(())
    }

    /// Overwrites rows of a tensor (UpdateEmbed).
    pub fn update_tensor(&self, name: &str, ids: &[u64], rows: &[u8], durable: bool) -> Result<()> {
        let w = self.writer()?;
        let _g = w.serial.lock().unwrap();
        let t = self.tensor_meta(name)?;
        if ids.is_empty() {
            return Err(StoreError::Invalid("update_tensor: empty batch".into()));
        }
        if rows.len() as u64 != ids.len() as u64 * t.row_bytes() {
            return Err(StoreError::Invalid(format!(
                "update_tensor: {name:?} rows are {} bytes ({} x {}), got {} bytes for {} rows",
                t.row_bytes(),
                t.dim,
                t.dtype.name(),
                rows.len(),
                ids.len()
            )));
        }
        self.check_live(ids, "update_tensor")?;
        self.commit(w, Op::UpdateTensor { name: name.to_string(), ids: ids.to_vec(), rows: rows.to_vec() }, 0, durable)?;
        Ok(())
    }
}
