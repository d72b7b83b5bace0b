//! Adding a node tensor to an existing store, copy-on-write like a merge:
//! the rows are streamed into a run of new tensor pages past everything the
//! current superblock names (each page sealed with its CRC and the next
//! epoch), the pages are synced, and then the superblock copy the next epoch
//! owns is written and synced. That write is the commit: until it is durable
//! the old superblock names none of the new pages (they are free at the
//! next open), so a crash at any point leaves the store as it was.
//!
//! The caller's `fill(first_row, buf)` supplies rows in the store's vertex
//! order, a bounded number at a time, so a tensor larger than memory streams
//! through. Pending updates are merged first: the tensor has a row for every
//! vertex of the merged graph.

use std::sync::Arc;

use solidgraph_io::AlignedBuf;
use solidgraph_io::sync::{MutexExt, RwLockExt};

use crate::base::load_base;
use crate::delta::Delta;
use crate::error::StoreError;
use crate::page::{self, HEADER, Header, Kind};
use crate::store::Store;
use crate::superblock::{MAX_TENSOR_NAME, MAX_TENSORS, Superblock, TensorMeta};
use crate::tensor::{self, DType};

/// Tensor pages written per volume write.
const STAGE_PAGES: usize = 1024;
/// Bytes of rows asked of `fill` at a time (at least one row).
const FILL_BYTES: u64 = 4 << 20;

impl Store {
    /// Whether this open may write (it holds the writer lock).
    pub fn writable(&self) -> bool {
        self.writer.is_some()
    }

    /// Adds node tensor `name` of `dim` elements of `dtype` per row, one row
    /// per vertex, durably and atomically (see the module doc). `fill(first,
    /// buf)` writes rows `first ..` (as many as `buf` holds, whole rows, in
    /// the store's vertex order) into `buf`; an error from it leaves the
    /// store unchanged and is returned. Refused on a read-only store, for a
    /// name already in use, and past the superblock's room for tensors.
    pub fn add_tensor<E: From<StoreError>>(
        &self,
        name: &str,
        dtype: DType,
        dim: u64,
        mut fill: impl FnMut(u64, &mut [u8]) -> Result<(), E>,
    ) -> Result<TensorMeta, E> {
        let w = self.writer()?;
        let _g = w.serial.locked();
        w.check_usable()?;
        self.check_new_tensor(name, dim)?;
        if self.delta.read_locked().ops > 0 {
            self.merge_locked(w)?;
        }
        let base = self.base();
        let sb = &base.sb;
        let ps = self.page_size();
        let rows = sb.num_nodes;
        let row_bytes = dim.checked_mul(dtype.size() as u64).filter(|&b| b <= crate::superblock::MAX_ROW_BYTES && b.checked_mul(rows.max(1)).is_some());
        let row_bytes = row_bytes.ok_or_else(|| {
            StoreError::Invalid(format!(
                "tensor {name:?}: {rows} rows of {dim} {} overflow (rows are at most {} bytes)",
                dtype.name(),
                crate::superblock::MAX_ROW_BYTES
            ))
        })?;
        let pages = tensor::pages_for(rows, row_bytes, ps);
        let mut space = w.space.locked();
        let freed = space.reclaim();
        self.cache().invalidate(&freed);
        let first = space.run(pages);
        let meta = TensorMeta { name: name.to_string(), dtype, dim, rows, start_page: first, pages };
        let ti = sb.tensors.len() as u64;
        let epoch = sb.epoch + 1;
        let written = self.write_tensor_pages(&meta, ti, epoch, &mut fill);
        let committed = written.and_then(|()| {
            let mut tensors = sb.tensors.clone();
            tensors.push(meta.clone());
            let new_sb = Superblock { epoch, total_pages: space.end(), tensors, ..sb.clone() };
            self.commit_superblock(new_sb).map_err(|e| {
                // As in merge: the superblock may be on disk (or reach it
                // with the next sync) naming pages the old base calls free,
                // so no later write may reuse them before a reopen.
                w.set_broken(e.to_string());
                E::from(e)
            })
        });
        match committed {
            Ok(new_base) => {
                let new_base = Arc::new(new_base);
                let mut d = self.delta.write_locked();
                let keep = d.keep_filter;
                self.set_base(new_base.clone());
                *d = Arc::new(Delta::new(&new_base, keep));
                log::info!("add_tensor: {name:?} ({rows} x {dim} {}), {pages} pages, epoch {epoch}", dtype.name());
                Ok(meta)
            }
            Err(e) => {
                // Nothing names the pages written: they are free again.
                space.reset(&base);
                Err(e)
            }
        }
    }

    fn check_new_tensor(&self, name: &str, dim: u64) -> Result<(), StoreError> {
        let sb = self.superblock();
        if name.is_empty() || name.len() > MAX_TENSOR_NAME || name.as_bytes().contains(&0) {
            return Err(StoreError::Invalid(format!("tensor name {name:?} must be 1..={MAX_TENSOR_NAME} bytes with no NUL")));
        }
        if sb.tensors.iter().any(|t| t.name == name) {
            return Err(StoreError::Invalid(format!("the store already has a tensor named {name:?}; pick another name")));
        }
        if dim == 0 {
            return Err(StoreError::Invalid(format!("tensor {name:?} has rows of width 0")));
        }
        let n = sb.tensors.len() + 1;
        if n > MAX_TENSORS || Superblock::body_bytes(n) > self.page_size() {
            return Err(StoreError::Invalid(format!("the store holds {} tensors, the most its superblock has room for", n - 1)));
        }
        Ok(())
    }

    /// Streams the rows from `fill` into pages `meta.start_page ..`, sealed
    /// for tensor `ti` at `epoch`, and syncs them.
    fn write_tensor_pages<E: From<StoreError>>(
        &self,
        meta: &TensorMeta,
        ti: u64,
        epoch: u64,
        fill: &mut impl FnMut(u64, &mut [u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let vol = self.volume();
        let ps = self.page_size();
        let pl = tensor::payload(ps) as u64;
        let rb = meta.row_bytes();
        let total = meta.rows * rb;
        let per_fill = (FILL_BYTES / rb.max(1)).max(1);
        let mut pending: Vec<u8> = Vec::new();
        let mut next_row = 0u64;
        // No larger than the tensor: a tensor of a few rows would otherwise
        // fault in and zero a whole stage of STAGE_PAGES pages.
        let stage = (meta.pages.min(STAGE_PAGES as u64) as usize).max(1);
        let mut buf = AlignedBuf::zeroed(stage * ps);
        let mut k = 0u64;
        while k < meta.pages {
            let batch = (meta.pages - k).min(stage as u64);
            let want = (((k + batch) * pl).min(total) - k * pl) as usize;
            while pending.len() < want {
                let n = per_fill.min(meta.rows - next_row);
                assert!(n > 0, "the pages hold no more bytes than the rows");
                let at = pending.len();
                pending.resize(at + (n * rb) as usize, 0);
                fill(next_row, &mut pending[at..])?;
                next_row += n;
            }
            let ids: Vec<u64> = (meta.start_page + k..meta.start_page + k + batch).collect();
            for (i, &no) in ids.iter().enumerate() {
                let pg = &mut buf[i * ps..(i + 1) * ps];
                pg.fill(0);
                let (lo, hi) = (i * pl as usize, ((i + 1) * pl as usize).min(want));
                pg[HEADER..HEADER + hi - lo].copy_from_slice(&pending[lo..hi]);
                page::seal(no, pg, &Header { kind: Kind::Tensor, epoch, key: ti, count: 0, aux: (k + i as u64) as u32 });
            }
            let top = *ids.last().expect("a batch has pages") + 1;
            if top > vol.num_pages() {
                vol.grow_to(top + top / 16).map_err(StoreError::from)?;
            }
            vol.write(&ids, &buf[..ids.len() * ps]).map_err(StoreError::from)?;
            pending.drain(..want);
            k += batch;
        }
        assert!(pending.is_empty() && next_row == meta.rows, "every row was filled and written");
        vol.sync(true).map_err(StoreError::from)?;
        Ok(())
    }

    /// Writes and syncs the superblock copy `sb.epoch` owns (the commit) and
    /// loads the base it describes.
    fn commit_superblock(&self, sb: Superblock) -> Result<crate::base::Base, StoreError> {
        let vol = self.volume();
        let ps = self.page_size();
        let which = sb.epoch % 2;
        let mut sbuf = AlignedBuf::zeroed(ps);
        sb.encode(which, &mut sbuf[..]);
        vol.write(&[which], &sbuf[..])?;
        vol.sync(false)?;
        load_base(vol, sb)
    }
}
