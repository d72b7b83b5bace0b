//! Merge (compaction): folds the pending updates into pages, copy-on-write.
//!
//! Only the pages holding a changed list are rewritten: each changed list's
//! run of translation-table entries (the packed page it shares, or its
//! extent; a new list between pages gets new pages of its own) is laid out
//! again, with the lists it shares a page with, into free pages. Tensor
//! pages holding changed or new rows are copied the same way and recorded
//! in the tensor map. The translation tables, presence bitmaps, tensor map
//! and tombstones are written whole (they are small beside the pages they
//! index), the new pages synced, and then the superblock copy the next
//! epoch owns is written and synced: that write is the commit. Until it is durable the
//! old superblock names only old pages, so a crash at any point recovers
//! the old graph plus the WAL; after it, replay starts past the checkpoint.
//!
//! Writers wait for the merge (it holds the writer's batch lock); readers
//! go on with the old base and switch when the new one is published.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use solidgraph_io::sync::{MutexExt, RwLockExt};
use solidgraph_io::{AlignedBuf, Volume};

use crate::adjacency::{PackedBuilder, packed_entries, write_extent_page};
use crate::base::{Base, Direction, load_base};
use crate::delta::Delta;
use crate::error::{Result, StoreError};
use crate::gather::Gather;
use crate::gtt::Gtt;
use crate::page::{self, HEADER, Header, Kind};
use crate::planner::{Csr, Planned};
use crate::space::Space;
use crate::store::Store;
use crate::superblock::{DirMeta, FORMAT_VERSION, Superblock, Table};
use crate::tensor;
use crate::writer::Writer;

/// Packed pages are filled to this share: a list that changed once is the
/// likeliest to change again, so the pages merge writes keep room for it
/// (an import packs pages full by default).
const FILL: f64 = 0.9;
/// Old pages (translation-table entries) read per batch.
const PAGES_PER_BATCH: usize = 4096;
/// Most old pages one run of neighboring dirty pages may span.
const MAX_RUN: usize = 256;
/// Tensor pages rebuilt per batch.
const TENSOR_PAGES_PER_BATCH: usize = 4096;
/// Pages staged before one volume write.
const STAGE_PAGES: usize = 1024;

/// What a merge did.
#[derive(Debug, Clone, Default)]
pub struct MergeReport {
    /// Update batches folded in (0: there was nothing to merge).
    pub updates: u64,
    /// Lists laid out again (both directions).
    pub lists: u64,
    /// Pages written, superblock included.
    pub pages_written: u64,
    pub bytes_written: u64,
    /// Pages the old base named that the new one does not.
    pub pages_retired: u64,
    /// Pages in the store after the merge, and free among them.
    pub total_pages: u64,
    pub free_pages: u64,
    pub epoch: u64,
    pub seconds: f64,
}

/// Pages on their way to the volume, any page numbers.
struct Staged<'a> {
    vol: &'a Volume,
    buf: AlignedBuf,
    ids: Vec<u64>,
    written: u64,
}

impl Staged<'_> {
    fn page(&mut self, no: u64) -> Result<&mut [u8]> {
        if self.ids.len() == STAGE_PAGES {
            self.flush()?;
        }
        let ps = self.vol.page_size();
        let i = self.ids.len();
        self.ids.push(no);
        Ok(&mut self.buf[i * ps..(i + 1) * ps])
    }

    fn flush(&mut self) -> Result<()> {
        if self.ids.is_empty() {
            return Ok(());
        }
        let vol = self.vol;
        let top = self.ids.iter().max().expect("non-empty") + 1;
        if top > vol.num_pages() {
            // Grow ahead so a merge grows the files a few times, not per batch.
            vol.grow_to(top + top / 16)?;
        }
        let ps = vol.page_size();
        vol.write(&self.ids, &self.buf[..self.ids.len() * ps])?;
        self.written += self.ids.len() as u64;
        self.ids.clear();
        Ok(())
    }
}

/// One run of old translation-table entries `[lo, hi)` rewritten with the
/// changed vertices `dirty` that fall in it (`lo == hi`: new lists between
/// pages).
struct Slot {
    lo: usize,
    hi: usize,
    dirty: Vec<u64>,
}

/// A new translation-table entry.
struct Entry {
    key: u64,
    page: u64,
    extent: bool,
    edges: u64,
}

impl Store {
    /// Folds every pending update into pages now (see the module doc).
    pub fn merge(&self) -> Result<MergeReport> {
        let w = self.writer()?;
        let _g = w.serial.locked();
        self.merge_locked(w)
    }

    /// Merge with the writer's batch lock held.
    pub(crate) fn merge_locked(&self, w: &Writer) -> Result<MergeReport> {
        w.check_usable()?;
        let t0 = Instant::now();
        let lsn = w.wal.appended_lsn();
        // The checkpoint will name every appended record: they must be
        // durable before the pages that contain them are.
        w.wal.sync_to(lsn)?;
        let base = self.base();
        let delta = self.delta.read_locked().clone();
        if delta.ops == 0 {
            return Ok(MergeReport { total_pages: base.sb.total_pages, epoch: base.sb.epoch, ..Default::default() });
        }
        let mut space = w.space.locked();
        let freed = space.reclaim();
        self.cache().invalidate(&freed);
        let staged = Staged { vol: self.volume(), buf: AlignedBuf::zeroed(STAGE_PAGES * self.page_size()), ids: Vec::new(), written: 0 };
        let mut m = Merger {
            base: &base,
            delta: &delta,
            gather: self.gather(),
            epoch: base.sb.epoch + 1,
            space: &mut space,
            staged,
            retired: Vec::new(),
            rep: MergeReport { updates: delta.ops, ..Default::default() },
            committing: false,
        };
        let built = m.build(lsn);
        let (mut rep, written, retired) = (m.rep, m.staged.written, m.retired);
        let new_base = match built {
            Ok(b) => b,
            Err(e) => {
                if m.committing {
                    // The new superblock may be on disk (or reach it with
                    // the next sync) naming pages the old base calls free.
                    w.set_broken(e.to_string());
                }
                space.reset(&base);
                return Err(e);
            }
        };
        let new_base = Arc::new(new_base);
        {
            let mut d = self.delta.write_locked();
            let keep = d.keep_filter;
            self.set_base(new_base.clone());
            *d = Arc::new(Delta::new(&new_base, keep));
        }
        rep.pages_retired = retired.len() as u64;
        space.retire(&base, retired);
        drop(base);
        let freed = space.reclaim();
        self.cache().invalidate(&freed);
        w.wal.reset()?;
        rep.pages_written = written;
        rep.bytes_written = written * self.page_size() as u64;
        rep.total_pages = space.end();
        rep.free_pages = space.free_pages();
        rep.epoch = new_base.sb.epoch;
        rep.seconds = t0.elapsed().as_secs_f64();
        log::info!(
            "merge: {} updates, {} lists, {} pages written, {} retired, epoch {}",
            rep.updates,
            rep.lists,
            rep.pages_written,
            rep.pages_retired,
            rep.epoch
        );
        Ok(rep)
    }
}

/// One merge: the base and delta it folds, where it reads pages and where
/// it writes them.
struct Merger<'a> {
    base: &'a Arc<Base>,
    delta: &'a Delta,
    gather: Gather<'a>,
    /// The new base's.
    epoch: u64,
    space: &'a mut Space,
    staged: Staged<'a>,
    /// Pages only the old base names.
    retired: Vec<u64>,
    rep: MergeReport,
    /// Set once the superblock write is issued: a failure from then on
    /// leaves the commit's outcome unknown.
    committing: bool,
}

impl Merger<'_> {
    /// Writes the merged pages and the superblock; returns the new base.
    fn build(&mut self, lsn: u64) -> Result<Base> {
        let (base, delta, epoch) = (self.base, self.delta, self.epoch);
        let sb = &base.sb;
        let ps = self.staged.vol.page_size();
        let num_nodes = delta.base_nodes + delta.added_nodes;
        let (out, out_edges) = self.merge_dir(Direction::Out)?;
        let inn = match sb.inn {
            Some(_) => {
                let (g, e) = self.merge_dir(Direction::In)?;
                if e != out_edges {
                    return Err(StoreError::Corrupt { page: 0, reason: format!("merge counted {out_edges} out-edges but {e} in-edges") });
                }
                Some(g)
            }
            None => None,
        };
        let mut tensor_map = base.tensor_map.clone();
        let mut tensors = sb.tensors.clone();
        for (ti, t) in tensors.iter_mut().enumerate() {
            self.merge_tensor(ti, num_nodes, &mut tensor_map)?;
            t.rows = num_nodes;
        }
        let mut tombstones: Vec<u64> = delta.deleted.iter().copied().collect();
        tombstones.sort_unstable();
        let mut map_words: Vec<(u64, u64)> = tensor_map.iter().map(|(&(ti, k), &p)| ((ti as u64) << 48 | k, p)).collect();
        map_words.sort_unstable();
        let map_words: Vec<u64> = map_words.into_iter().flat_map(|(k, p)| [k, p]).collect();

        // Runs: translation tables with their bitmaps, then the two tables.
        let mut write_run = |staged: &mut Staged, n: u64, fill: &dyn Fn(u64, &mut [u8])| -> Result<u64> {
            let first = self.space.run(n);
            let mut buf = vec![0u8; n as usize * ps];
            fill(first, &mut buf);
            for i in 0..n as usize {
                staged.page(first + i as u64)?.copy_from_slice(&buf[i * ps..(i + 1) * ps]);
            }
            Ok(first)
        };
        let mut dir_meta = |staged: &mut Staged, g: &Gtt, old: &DirMeta| -> Result<DirMeta> {
            let gtt_pages = g.pages_needed(ps);
            let bitmap_pages = if g.has_presence() { Gtt::bitmap_pages(num_nodes, ps) } else { 0 };
            let start = write_run(staged, gtt_pages + bitmap_pages, &|first, buf: &mut [u8]| {
                let (a, b) = buf.split_at_mut(gtt_pages as usize * ps);
                g.encode(ps, first, epoch, a);
                g.encode_bitmap(num_nodes, ps, first + gtt_pages, epoch, b);
            })?;
            self.retired.extend(old.gtt_start..old.gtt_start + old.gtt_pages + old.bitmap_pages);
            Ok(DirMeta { gtt_start: start, gtt_pages, gtt_entries: g.len() as u64, adj_start: old.adj_start, adj_pages: g.len() as u64, bitmap_pages })
        };
        let out_meta = dir_meta(&mut self.staged, &out, &sb.out)?;
        let in_meta = match (&inn, &sb.inn) {
            (Some(g), Some(old)) => Some(dir_meta(&mut self.staged, g, old)?),
            _ => None,
        };
        // The lower lists are not merged (they would be laid out again from
        // every changed list's lower part): the new base has none, and
        // whole-graph passes read out-lists until the next import.
        if let (Some(l), Some(g)) = (sb.lower, &base.lower) {
            let meta = l.dir;
            self.retired.extend(meta.gtt_start..meta.gtt_start + meta.gtt_pages + meta.bitmap_pages);
            self.retired.extend(l.degrees.start..l.degrees.start + l.degrees.pages);
            self.retired.extend((0..g.len()).map(|i| g.page(i)));
        }
        let mut table = |staged: &mut Staged, words: &[u64], old: &Table| -> Result<Table> {
            let n = page::table_pages(words.len(), ps);
            let start = write_run(staged, n, &|first, buf: &mut [u8]| page::encode_table(words, ps, first, epoch, buf))?;
            self.retired.extend(old.start..old.start + old.pages);
            Ok(Table { start, pages: n, words: words.len() as u64 })
        };
        let tensor_map_t = table(&mut self.staged, &map_words, &sb.tensor_map)?;
        let tombstones_t = table(&mut self.staged, &tombstones, &sb.tombstones)?;

        let new_sb = Superblock {
            version: FORMAT_VERSION,
            epoch,
            num_nodes,
            num_edges: out_edges,
            total_pages: self.space.end(),
            checkpoint_lsn: lsn,
            out: out_meta,
            inn: in_meta,
            lower: None,
            tensor_map: tensor_map_t,
            tombstones: tombstones_t,
            tensors,
            ..sb.clone()
        };
        self.staged.flush()?;
        let vol = self.staged.vol;
        vol.sync(true)?;
        // The commit point: the superblock copy this epoch owns.
        let which = epoch % 2;
        let mut sbuf = AlignedBuf::zeroed(ps);
        new_sb.encode(which, &mut sbuf[..]);
        self.committing = true;
        vol.write(&[which], &sbuf[..])?;
        vol.sync(false)?;
        self.staged.written += 1;
        // Read back what was just committed: the tables are what the next
        // open will see.
        let new_base = load_base(vol, new_sb)?;
        Ok(new_base)
    }

    /// Lists of one direction that change, laid out again; returns the new
    /// translation table and the direction's edge count.
    fn merge_dir(&mut self, dir: Direction) -> Result<(Gtt, u64)> {
        let (base, delta) = (self.base, self.delta);
        let fetch = self.gather.fetch;
        let sb = &base.sb;
        let gtt = base.gtt(dir)?;
        let out_dir = dir == Direction::Out || !sb.directed;
        let dd = if out_dir { &delta.out } else { &delta.inn };
        let mut dirty: BTreeSet<u64> = dd.changed().collect();
        let old_dead: BTreeSet<u64> = base.tombstones.iter().copied().collect();
        let new_dead: Vec<u64> = {
            let mut v: Vec<u64> = delta.deleted.iter().copied().filter(|v| !old_dead.contains(v)).collect();
            v.sort_unstable();
            v
        };
        dirty.extend(new_dead.iter().copied().filter(|&v| v < sb.num_nodes));
        if !delta.keep_filter && !new_dead.is_empty() {
            // The lists that hold a deleted vertex are its lists the other way.
            let rev = if !sb.directed || dir == Direction::In { Direction::Out } else { Direction::In };
            let ids: Vec<u64> = new_dead.iter().copied().filter(|&v| v < sb.num_nodes).collect();
            let g = base.gtt(rev)?;
            let csr = Planned::fetch(fetch, base, g, &ids, false)?.csr(false, false, Csr::default())?;
            dirty.extend(csr.indices);
        }
        let total = sb.num_edges;

        // Group changed vertices into slots of old entries.
        let mut slots: Vec<Slot> = Vec::new();
        for &v in &dirty {
            let up = gtt.upper_bound(v);
            let (lo, hi) = if up > 0 && !gtt.is_extent(up - 1) {
                (up - 1, up)
            } else if up > 0 && gtt.first_vertex(up - 1) == v {
                (gtt.lower_bound(v), up)
            } else {
                (up, up)
            };
            match slots.last_mut() {
                Some(s) if s.lo == lo && s.hi == hi => s.dirty.push(v),
                // Lay neighboring dirty pages (and one clean page between
                // two dirty ones) out as one run: laid out alone, each would
                // end in a part-full page, and the store would fragment.
                Some(s) if lo < s.hi || (lo <= s.hi + 1 && hi - s.lo <= MAX_RUN) => {
                    s.hi = s.hi.max(hi);
                    s.dirty.push(v);
                }
                _ => slots.push(Slot { lo, hi, dirty: vec![v] }),
            }
        }

        let mut new = Gtt::default();
        new.presence_from(gtt);
        let mut edges = 0u64;
        let mut next_old = 0usize;
        let fmt = sb.fmt;
        let copy_old = |new: &mut Gtt, edges: &mut u64, from: usize, to: usize| {
            for i in from..to {
                new.push(gtt.first_vertex(i), gtt.page(i), gtt.is_extent(i), *edges);
                *edges += gtt.entry_edges(i, total);
            }
        };
        let mut from = 0;
        while from < slots.len() {
            // A batch of slots holding at most ~PAGES_PER_BATCH old pages.
            let mut to = from;
            let mut old_pages = 0;
            while to < slots.len() && (to == from || old_pages + slots[to].hi - slots[to].lo <= PAGES_PER_BATCH) {
                old_pages += slots[to].hi - slots[to].lo;
                to += 1;
            }
            let batch = &slots[from..to];
            from = to;
            // Vertices of each slot: what its packed pages list, the owners
            // of its extents, and the changed ones.
            let packed: Vec<u64> = batch.iter().flat_map(|s| (s.lo..s.hi).filter(|&i| !gtt.is_extent(i)).map(|i| gtt.page(i))).collect();
            let fetched = fetch.direct(&packed)?;
            let mut k = 0;
            let mut ids = Vec::new();
            let mut bounds = Vec::with_capacity(batch.len() + 1);
            for s in batch {
                bounds.push(ids.len());
                let mut vs: BTreeSet<u64> = s.dirty.iter().copied().collect();
                for i in s.lo..s.hi {
                    if gtt.is_extent(i) {
                        vs.insert(gtt.first_vertex(i));
                    } else {
                        let (pg, pno) = (fetched.page(k), packed[k]);
                        k += 1;
                        let h = page::open_kind_trusted(pno, pg, Kind::Packed)?;
                        base.check_epoch(pno, h.epoch)?;
                        vs.extend(packed_entries(pg, &h).map(|e| e.vertex));
                    }
                }
                ids.extend(vs);
            }
            bounds.push(ids.len());
            let csr = Planned::fetch(fetch, base, gtt, &ids, false)?.csr(fmt.weights, fmt.labels, Csr::default())?;
            let csr = delta.patch(ids.as_slice(), csr, out_dir);
            for (si, s) in batch.iter().enumerate() {
                copy_old(&mut new, &mut edges, next_old, s.lo);
                for e in self.lay_out(&csr, &ids, bounds[si]..bounds[si + 1], &mut new)? {
                    new.push(e.key, e.page, e.extent, edges);
                    edges += e.edges;
                }
                self.retired.extend((s.lo..s.hi).map(|i| gtt.page(i)));
                next_old = s.hi;
            }
        }
        copy_old(&mut new, &mut edges, next_old, gtt.len());
        Ok((new, edges))
    }

    /// Lays out the lists of `ids[range]` (ascending) into new pages,
    /// marking in `gtt` which of them have a list.
    fn lay_out(&mut self, csr: &Csr, ids: &[u64], range: std::ops::Range<usize>, gtt: &mut Gtt) -> Result<Vec<Entry>> {
        let (fmt, epoch) = (self.base.sb.fmt, self.epoch);
        let (space, staged, rep) = (&mut *self.space, &mut self.staged, &mut self.rep);
        let ps = staged.vol.page_size();
        let mut entries = Vec::new();
        let mut packed = PackedBuilder::new(fmt, ps, FILL);
        let mut cur = vec![0u8; ps];
        let mut packed_edges = 0u64;
        let empty_w: Vec<f32> = Vec::new();
        let empty_l: Vec<u32> = Vec::new();
        let close = |packed: &mut PackedBuilder,
                     cur: &mut Vec<u8>,
                     packed_edges: &mut u64,
                     space: &mut Space,
                     staged: &mut Staged,
                     entries: &mut Vec<Entry>|
         -> Result<()> {
            if packed.is_empty() {
                return Ok(());
            }
            let no = space.page();
            let first = packed.first();
            packed.finish(cur, no, epoch);
            staged.page(no)?.copy_from_slice(cur);
            entries.push(Entry { key: first, page: no, extent: false, edges: *packed_edges });
            *packed_edges = 0;
            cur.fill(0);
            Ok(())
        };
        for i in range {
            let v = ids[i];
            let (a, b) = (csr.indptr[i] as usize, csr.indptr[i + 1] as usize);
            let d = b - a;
            rep.lists += 1;
            if d == 0 {
                gtt.mark_absent(v);
                continue;
            }
            gtt.mark_present(v);
            let list = &csr.indices[a..b];
            let ws = csr.weights.as_ref().map_or(&empty_w[..], |w| &w[a..b]);
            let ls = csr.labels.as_ref().map_or(&empty_l[..], |l| &l[a..b]);
            let bytes = fmt.block_bytes(list);
            if bytes > fmt.packed_room(ps) {
                close(&mut packed, &mut cur, &mut packed_edges, space, staged, &mut entries)?;
                let (mut x, mut j) = (0, 0u32);
                while x < d {
                    let y = x + fmt.fitting(&list[x..], fmt.extent_room(ps));
                    let no = space.page();
                    let pg = staged.page(no)?;
                    let (cw, cl) = (if ws.is_empty() { ws } else { &ws[x..y] }, if ls.is_empty() { ls } else { &ls[x..y] });
                    write_extent_page(&fmt, pg, no, epoch, v, j, &list[x..y], cw, cl);
                    entries.push(Entry { key: v, page: no, extent: true, edges: (y - x) as u64 });
                    (x, j) = (y, j + 1);
                }
                continue;
            }
            if !packed.fits(v, bytes) {
                close(&mut packed, &mut cur, &mut packed_edges, space, staged, &mut entries)?;
            }
            packed.add(&mut cur, v, list, ws, ls);
            packed_edges += d as u64;
        }
        close(&mut packed, &mut cur, &mut packed_edges, space, staged, &mut entries)?;
        Ok(entries)
    }

    /// Copies the pages of tensor `ti` that hold changed or new rows.
    fn merge_tensor(&mut self, ti: usize, num_nodes: u64, map: &mut std::collections::HashMap<(u32, u64), u64>) -> Result<()> {
        let (base, delta, epoch) = (self.base, self.delta, self.epoch);
        let t = &base.sb.tensors[ti];
        let ps = self.staged.vol.page_size();
        let rb = t.row_bytes();
        let pl = tensor::payload(ps) as u64;
        let mut dirty: BTreeSet<u64> = BTreeSet::new();
        if let Some(rows) = delta.rows.get(&t.name) {
            for &r in rows.keys() {
                dirty.extend(tensor::row_pages(r, rb, ps));
            }
        }
        if num_nodes > t.rows && rb > 0 {
            dirty.extend((t.rows * rb) / pl..(num_nodes * rb).div_ceil(pl));
        }
        let dirty: Vec<u64> = dirty.into_iter().collect();
        let empty = BTreeMap::new();
        let rows_delta = delta.rows.get(&t.name).map(|m| m.iter().collect::<BTreeMap<_, _>>()).unwrap_or(empty);
        for batch in dirty.chunks(TENSOR_PAGES_PER_BATCH) {
            // Every row any page of the batch touches, in one gather.
            let mut ids: Vec<u64> = Vec::new();
            for &k in batch {
                let r0 = (k * pl) / rb;
                let r1 = ((k + 1) * pl).div_ceil(rb).min(num_nodes);
                ids.extend(r0..r1);
            }
            ids.dedup();
            let mut data = vec![0u8; ids.len() * rb as usize];
            self.gather.pages_into(base, ti, &ids, &mut data, false)?;
            for (i, r) in ids.iter().enumerate() {
                if let Some(row) = rows_delta.get(r) {
                    data[i * rb as usize..(i + 1) * rb as usize].copy_from_slice(row);
                }
            }
            for &k in batch {
                let (lo, hi) = (k * pl, ((k + 1) * pl).min(num_nodes * rb));
                // The page's rows are consecutive in `ids` from its first row.
                let r0 = lo / rb;
                let at = ids.binary_search(&r0).expect("gathered above") as u64 * rb + (lo - r0 * rb);
                let no = self.space.page();
                let pg = self.staged.page(no)?;
                pg.fill(0);
                let src = &data[at as usize..(at + hi - lo) as usize];
                pg[HEADER..HEADER + src.len()].copy_from_slice(src);
                page::seal(no, pg, &Header { kind: Kind::Tensor, epoch, key: ti as u64, count: 0, aux: k as u32 });
                if let Some(old) = base.tensor_page(ti, k) {
                    self.retired.push(old);
                }
                map.insert((ti as u32, k), no);
            }
        }
        Ok(())
    }
}
