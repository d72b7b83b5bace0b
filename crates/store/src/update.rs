//! Batched updates of a writable store: validate the whole batch against the
//! current graph, log it as one WAL record, apply it to the delta, and (by
//! default) return only once the record is durable. A batch that fails
//! validation changes nothing.
//!
//! A record is visible to readers as soon as it is appended (later batches
//! validate against it); it is acknowledged to its writer once durable.
//! Recovery replays the durable records at open.

use std::sync::Arc;

use rustc_hash::FxHashSet;

use solidgraph_io::sync::{MutexExt, RwLockExt};

use crate::base::Direction;
use crate::delta::{Op, Shape};
use crate::error::{Result, StoreError};
use crate::store::Store;
use crate::superblock::MAX_GROWN_NODES;
use crate::writer::{Writer, record};

/// Batches of at least this many items sync the log on a second thread
/// while they are applied.
const SYNC_BESIDE_APPLY: usize = 1024;

impl Store {
    pub(crate) fn writer(&self) -> Result<&Writer> {
        self.writer.as_ref().ok_or(StoreError::ReadOnly)
    }

    /// Logs and applies a validated batch. Over the delta budget, the
    /// batch that crossed it merges (with the batch lock held, so writers
    /// wait and readers do not).
    fn commit(&self, w: &Writer, op: Op, edges_added: i64, durable: bool) -> Result<u64> {
        w.check_usable()?;
        let lsn = w.wal.append(&record(edges_added, &op)).inspect_err(|e| w.set_broken(format!("a log append failed: {e}")))?;
        let shape = Shape::of(&self.base().sb);
        let apply = || {
            let mut guard = self.delta.write_locked();
            let d = Arc::make_mut(&mut guard);
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
        // After a failed fdatasync the kernel may have dropped the record's
        // pages and reports success to the next sync (the error is not
        // sticky): later batches acknowledged as durable could then follow
        // a hole in the log. So no write is taken until reopen.
        synced.inspect_err(|e| w.set_broken(format!("a log sync failed: {e}")))?;
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
        self.delta.read_locked().ops
    }

    /// Makes every appended update durable.
    pub fn flush(&self) -> Result<()> {
        let w = self.writer()?;
        w.wal.sync_to(w.wal.appended_lsn()).inspect_err(|e| w.set_broken(format!("a log sync failed: {e}")))
    }

    fn check_live(&self, ids: &[u64], what: &str) -> Result<()> {
        let n = self.num_nodes();
        let d = self.delta.read_locked();
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
        let _g = w.serial.locked();
        if count == 0 || count > 1 << 32 {
            return Err(StoreError::Invalid(format!("add_vertices: count {count} must be in 1..=2^32")));
        }
        // Replay refuses a record past the limit (`writer::replay`).
        let n = self.num_nodes();
        if n.saturating_add(count) > MAX_GROWN_NODES.max(self.superblock().num_nodes) {
            return Err(StoreError::Invalid(format!(
                "add_vertices: {count} more vertices than the {n} there are pass the {MAX_GROWN_NODES} updates may reach"
            )));
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
        let _g = w.serial.locked();
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
        let _g = w.serial.locked();
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
        let _g = w.serial.locked();
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
        let _g = w.serial.locked();
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
                None => {
                    return Err(StoreError::Invalid(format!("update_edge_weights: edge {} -> {} does not exist", self.user_id(src[i]), self.user_id(dst[i]))));
                }
            }
        }
        let op = Op::AddEdges { src: src.to_vec(), dst: dst.to_vec(), weights: Some(weights.to_vec()), labels: self.has_labels().then_some(labels) };
        self.commit(w, op, 0, durable)?;
        Ok(())
    }

    /// Overwrites rows of a tensor (UpdateEmbed).
    pub fn update_tensor(&self, name: &str, ids: &[u64], rows: &[u8], durable: bool) -> Result<()> {
        let w = self.writer()?;
        let _g = w.serial.locked();
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
