//! Lays sorted edge records out as adjacency pages, and tensor rows as tensor
//! pages, writing consecutive pages in large batches.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use solidgraph_io::{AlignedBuf, Volume};

use super::sort::{Merged, Rec};
use crate::adjacency::{EdgeFormat, PackedBuilder, write_extent_page};
use crate::error::{Result, StoreError};
use crate::gtt::Gtt;
use crate::page::{HEADER, Header, Kind, seal};

/// Pages staged before one volume write (merged into large I/Os).
const STAGE_BYTES: usize = 4 << 20;
/// The volume grows ahead of the writer by this many bytes at a time.
const GROW_BYTES: u64 = 64 << 20;

/// Where a `PageWriter`'s pages go.
enum Sink<'a> {
    Volume(&'a Volume),
    /// A scratch file, page k at offset k * page size (pages laid out
    /// before their place in the store is known; `copy_pages` moves them).
    File {
        f: std::fs::File,
        path: std::path::PathBuf,
    },
}

/// Writes consecutive pages from `first`, staging them in memory.
pub struct PageWriter<'a> {
    sink: Sink<'a>,
    ps: usize,
    stage: AlignedBuf,
    ids: Vec<u64>,
    next: u64,
}

impl<'a> PageWriter<'a> {
    pub fn new(vol: &'a Volume, first: u64) -> PageWriter<'a> {
        let ps = vol.page_size();
        let n = (STAGE_BYTES / ps).max(1);
        PageWriter { sink: Sink::Volume(vol), ps, stage: AlignedBuf::zeroed(n * ps), ids: Vec::with_capacity(n), next: first }
    }

    /// Pages numbered from 0 into a new scratch file at `path`.
    pub fn to_file(path: &std::path::Path, ps: usize) -> Result<PageWriter<'a>> {
        let f = std::fs::File::create(path).map_err(crate::error::file_err(path))?;
        let n = (STAGE_BYTES / ps).max(1);
        Ok(PageWriter { sink: Sink::File { f, path: path.to_path_buf() }, ps, stage: AlignedBuf::zeroed(n * ps), ids: Vec::with_capacity(n), next: 0 })
    }

    /// Number of the page `page()` is building.
    pub fn page_no(&self) -> u64 {
        self.next + self.ids.len() as u64
    }

    pub fn page(&mut self) -> &mut [u8] {
        let i = self.ids.len();
        &mut self.stage[i * self.ps..(i + 1) * self.ps]
    }

    /// The page is built: stage it, flushing when the stage is full.
    pub fn done(&mut self) -> Result<()> {
        let no = self.page_no();
        self.ids.push(no);
        if self.ids.len() * self.ps == self.stage.len() {
            self.flush()?;
        }
        Ok(())
    }

    pub fn flush(&mut self) -> Result<()> {
        if self.ids.is_empty() {
            return Ok(());
        }
        let end = self.next + self.ids.len() as u64;
        let bytes = &self.stage[..self.ids.len() * self.ps];
        match &mut self.sink {
            Sink::Volume(vol) => {
                if end > vol.num_pages() {
                    vol.grow_to(end + GROW_BYTES / self.ps as u64)?;
                }
                vol.write(&self.ids, bytes)?;
            }
            Sink::File { f, path } => std::io::Write::write_all(f, bytes).map_err(crate::error::file_err(path))?,
        }
        self.next = end;
        self.ids.clear();
        Ok(())
    }

    /// Flushes and returns the next free page number.
    pub fn finish(mut self) -> Result<u64> {
        self.flush()?;
        Ok(self.next)
    }
}

pub struct LayoutOptions {
    pub fmt: EdgeFormat,
    pub fill: f64,
    pub dedup: bool,
    pub self_loops: bool,
    pub num_nodes: u64,
    pub epoch: u64,
    /// Keep a presence bitmap (see `Gtt`).
    pub presence: bool,
    /// Rank this many vertices of highest degree (`Laid::hot`); 0: none.
    pub hot: usize,
    /// Keep every vertex's degree (`Laid::degrees`).
    pub degrees: bool,
}

pub struct Laid {
    pub gtt: Gtt,
    pub edges: u64,
    pub next_page: u64,
    pub adj_pages: u64,
    /// Up to `LayoutOptions::hot` vertices with edges, highest degree
    /// first, ties by id.
    pub hot: Vec<u64>,
    /// Every vertex's degree, when asked for.
    pub degrees: Option<Vec<u32>>,
}

/// The `k` vertices of highest degree seen so far: a min-heap of k entries,
/// so ranking a billion vertices needs memory for k, not for all of them.
struct TopDegrees {
    k: usize,
    /// Ordered by (degree, Reverse(id)): the root is the first to go, the
    /// lowest degree and, among equals, the highest id.
    heap: BinaryHeap<Reverse<(u64, Reverse<u64>)>>,
}

impl TopDegrees {
    fn push(&mut self, v: u64, degree: u64) {
        if self.k == 0 || degree == 0 {
            return;
        }
        let e = Reverse((degree, Reverse(v)));
        if self.heap.len() < self.k {
            self.heap.push(e);
        } else if self.heap.peek().is_some_and(|min| e < *min) {
            self.heap.pop();
            self.heap.push(e);
        }
    }

    fn ranked(self) -> Vec<u64> {
        // Ascending Reverse order is descending (degree, Reverse(id)).
        self.heap.into_sorted_vec().into_iter().map(|Reverse((_, Reverse(v)))| v).collect()
    }
}

/// Builds the adjacency of one direction from a sorted record stream.
struct Builder<'a> {
    w: PageWriter<'a>,
    o: &'a LayoutOptions,
    ps: usize,
    packed: PackedBuilder,
    gtt: Gtt,
    edges: u64,
    // The vertex being collected.
    v: u64,
    ids: Vec<u64>,
    ws: Vec<f32>,
    ls: Vec<u32>,
    /// Varint bytes of `ids`' gaps (the first id counted whole).
    gap_bytes: usize,
    has_self: bool,
    /// Edges written before the packed page being built.
    packed_base: u64,
    /// Extent pages already written for `v` (0: not an extent yet).
    extent_pages: u32,
    /// `edges` when `v` began.
    v_first_edge: u64,
    top: TopDegrees,
    degrees: Option<Vec<u32>>,
}

impl Builder<'_> {
    fn push_edge(&mut self, dst: u64, w: f32, l: u32) -> Result<()> {
        if self.o.self_loops && !self.has_self && dst >= self.v {
            self.has_self = true;
            if dst > self.v {
                self.append(self.v, 1.0, 0)?;
            }
        }
        if self.o.dedup && self.ids.last() == Some(&dst) {
            return Ok(());
        }
        self.append(dst, w, l)
    }

    fn append(&mut self, dst: u64, w: f32, l: u32) -> Result<()> {
        let prev = self.ids.last().copied().unwrap_or(0);
        self.gap_bytes += EdgeFormat::gap_bytes(dst - prev);
        self.ids.push(dst);
        self.ws.push(w);
        self.ls.push(l);
        let fmt = self.o.fmt;
        if self.extent_pages > 0 || fmt.sized(self.ids.len(), self.gap_bytes) > fmt.packed_room(self.ps) {
            // Too long for a packed page: the vertex owns whole pages, written
            // as they fill so a huge list never sits in memory. A page is
            // written only once the list overflows it, so the final page is
            // never empty.
            let room = fmt.extent_room(self.ps);
            while fmt.sized(self.ids.len(), self.gap_bytes) > room {
                self.write_extent(fmt.fitting(&self.ids, room))?;
            }
        }
        Ok(())
    }

    fn write_extent(&mut self, n: usize) -> Result<()> {
        if self.extent_pages == 0 {
            self.close_packed()?;
            self.gtt.mark_present(self.v);
        }
        let (v, idx, no) = (self.v, self.extent_pages, self.w.page_no());
        let fmt = self.o.fmt;
        write_extent_page(&fmt, self.w.page(), no, self.o.epoch, v, idx, &self.ids[..n], &self.ws[..n], &self.ls[..n]);
        self.w.done()?;
        self.gtt.push(v, no, true, self.edges);
        self.extent_pages += 1;
        self.edges += n as u64;
        self.ids.drain(..n);
        self.ws.drain(..n);
        self.ls.drain(..n);
        self.gap_bytes = EdgeFormat::id_bytes(&self.ids);
        Ok(())
    }

    fn close_packed(&mut self) -> Result<()> {
        if self.packed.is_empty() {
            return Ok(());
        }
        let no = self.w.page_no();
        let first = self.packed.first();
        self.packed.finish(self.w.page(), no, self.o.epoch);
        self.w.done()?;
        self.gtt.push(first, no, false, self.packed_base);
        Ok(())
    }

    /// Ends the current vertex and starts `next`.
    fn end_vertex(&mut self, next: u64) -> Result<()> {
        if self.o.self_loops && !self.has_self {
            self.has_self = true;
            self.append(self.v, 1.0, 0)?;
        }
        let d = self.ids.len();
        let bytes = self.o.fmt.sized(d, self.gap_bytes);
        if self.extent_pages > 0 || bytes > self.o.fmt.packed_room(self.ps) {
            if d > 0 {
                self.write_extent(d)?;
            }
        } else if d > 0 {
            if !self.packed.fits(self.v, bytes) {
                self.close_packed()?;
            }
            if self.packed.is_empty() {
                self.packed_base = self.edges;
            }
            self.gtt.mark_present(self.v);
            let (v, ids, ws, ls) = (self.v, &self.ids, &self.ws, &self.ls);
            self.packed.add(self.w.page(), v, ids, ws, ls);
            self.edges += d as u64;
            self.ids.clear();
            self.ws.clear();
            self.ls.clear();
            self.gap_bytes = 0;
        }
        let degree = self.edges - self.v_first_edge;
        self.top.push(self.v, degree);
        if let Some(d) = self.degrees.as_mut() {
            let n = d.len();
            let x = d.get_mut(self.v as usize).ok_or_else(|| StoreError::Invalid(format!("vertex {} past the {n} vertices", self.v)))?;
            *x = u32::try_from(degree)
                .map_err(|_| StoreError::Invalid(format!("vertex {} has {degree} edges: lower lists record degrees below 2^32", self.v)))?;
        }
        self.v = next;
        self.v_first_edge = self.edges;
        self.has_self = false;
        self.extent_pages = 0;
        Ok(())
    }
}

impl<'a> Builder<'a> {
    fn new(w: PageWriter<'a>, o: &'a LayoutOptions) -> Builder<'a> {
        let mut gtt = Gtt::default();
        if o.presence {
            gtt.enable_presence();
        }
        let ps = w.ps;
        Builder {
            ps,
            w,
            o,
            packed: PackedBuilder::new(o.fmt, ps, o.fill),
            gtt,
            edges: 0,
            v: 0,
            ids: Vec::new(),
            ws: Vec::new(),
            ls: Vec::new(),
            gap_bytes: 0,
            has_self: false,
            packed_base: 0,
            extent_pages: 0,
            v_first_edge: 0,
            top: TopDegrees { k: o.hot, heap: BinaryHeap::with_capacity(o.hot.min(1 << 20)) },
            degrees: o.degrees.then(|| vec![0; o.num_nodes as usize]),
        }
    }

    /// Takes the next record of the sorted stream.
    fn record(&mut self, r: &Rec) -> Result<()> {
        while self.v < r.src {
            // Vertices without records get only their self-loop (if asked).
            let next = if self.o.self_loops { self.v + 1 } else { r.src };
            self.end_vertex(next)?;
        }
        self.push_edge(r.dst, f32::from_bits(r.wbits), r.label)
    }

    /// Ends the stream: the last vertices, the last page.
    fn finish(mut self, first_page: u64) -> Result<Laid> {
        let last = if self.o.self_loops { self.o.num_nodes } else { self.v + 1 };
        while self.v < last {
            let next = if self.o.self_loops { self.v + 1 } else { last };
            self.end_vertex(next)?;
        }
        self.close_packed()?;
        let edges = self.edges;
        let next = self.w.finish()?;
        Ok(Laid { gtt: self.gtt, edges, next_page: next, adj_pages: next - first_page, hot: self.top.ranked(), degrees: self.degrees })
    }
}

/// Runs the k-way merge on its own thread (beside the page layout), in
/// batches of `LOWER_BATCH` records; `each` gets every batch in order.
/// Batches come back through a second channel to be refilled.
fn merge_beside(merged: &mut Merged, mut each: impl FnMut(&[Rec]) -> Result<bool>) -> Result<()> {
    use std::sync::mpsc::sync_channel;
    std::thread::scope(|scope| {
        let (tx, rx) = sync_channel::<Vec<Rec>>(4);
        let (back_tx, back_rx) = sync_channel::<Vec<Rec>>(6);
        let merger = scope.spawn(move || -> Result<()> {
            loop {
                let mut batch = back_rx.try_recv().unwrap_or_else(|_| Vec::with_capacity(LOWER_BATCH));
                batch.clear();
                while batch.len() < LOWER_BATCH {
                    match merged.next_record()? {
                        Some(r) => batch.push(r),
                        None => break,
                    }
                }
                let last = batch.len() < LOWER_BATCH;
                // A closed channel: the consumer stopped (its error wins).
                if tx.send(batch).is_err() || last {
                    return Ok(());
                }
            }
        });
        let mut consumed = Ok(());
        for batch in &rx {
            match each(&batch) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    consumed = Err(e);
                    break;
                }
            }
            let _ = back_tx.try_send(batch);
        }
        drop(rx);
        let merged = merger.join().map_err(|_| StoreError::Invalid("merge thread panicked".into()))?;
        consumed?;
        merged
    })
}

pub fn lay_out(vol: &Volume, first_page: u64, merged: &mut Merged, o: &LayoutOptions, total: u64, progress: &(dyn Fn(u64, u64) + Sync)) -> Result<Laid> {
    let mut b = Builder::new(PageWriter::new(vol, first_page), o);
    let mut seen = 0u64;
    merge_beside(merged, |batch| {
        for r in batch {
            b.record(r)?;
        }
        seen += batch.len() as u64;
        progress(seen, total);
        Ok(true)
    })?;
    progress(total, total);
    b.finish(first_page)
}

/// Records handed to the lower lists' thread at a time.
const LOWER_BATCH: usize = 1 << 16;

/// Lays out an undirected store's out-lists from `merged` into `vol`, and
/// on a second thread its lower lists (the same stream's records with
/// `dst <= src`: each edge once, in the same order as a sort of its own
/// would give), laid out by `lower`, into the scratch file `aside`, numbered from page 0, for
/// `copy_pages` to move behind the out-lists once their size is known.
pub fn lay_out_with_lower(
    vol: &Volume,
    first_page: u64,
    merged: &mut Merged,
    o: &LayoutOptions,
    (lower, aside): (&LayoutOptions, &std::path::Path),
    total: u64,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<(Laid, Laid)> {
    use std::sync::mpsc::sync_channel;
    let lower_w = PageWriter::to_file(aside, vol.page_size())?;
    std::thread::scope(|scope| {
        let (tx, rx) = sync_channel::<Vec<Rec>>(4);
        let (back_tx, back_rx) = sync_channel::<Vec<Rec>>(6);
        let thread = scope.spawn(move || -> Result<Laid> {
            let mut b = Builder::new(lower_w, lower);
            for mut batch in rx {
                for r in &batch {
                    b.record(r)?;
                }
                batch.clear();
                let _ = back_tx.try_send(batch);
            }
            b.finish(0)
        });
        let mut b = Builder::new(PageWriter::new(vol, first_page), o);
        let mut batch = Vec::with_capacity(LOWER_BATCH);
        let mut seen = 0u64;
        let ran = merge_beside(merged, |records| {
            for r in records {
                b.record(r)?;
                if r.dst <= r.src {
                    batch.push(*r);
                    if batch.len() == LOWER_BATCH {
                        let next = back_rx.try_recv().unwrap_or_else(|_| Vec::with_capacity(LOWER_BATCH));
                        // A closed channel: the thread failed; its error
                        // comes from join.
                        if tx.send(std::mem::replace(&mut batch, next)).is_err() {
                            return Ok(false);
                        }
                    }
                }
            }
            seen += records.len() as u64;
            progress(seen, total);
            Ok(true)
        })
        .map(|()| {
            let _ = tx.send(std::mem::take(&mut batch));
        });
        drop(tx);
        let lower_laid = thread.join().map_err(|_| StoreError::Invalid("lower-list thread panicked".into()))?;
        ran?;
        let out_laid = b.finish(first_page)?;
        progress(total, total);
        Ok((out_laid, lower_laid?))
    })
}

/// Moves `pages` pages from the scratch file `aside` (numbered from 0,
/// each checked) into `vol` from page `at`, each sealed again for its new
/// number; returns the page after them.
pub fn copy_pages(vol: &Volume, aside: &std::path::Path, pages: u64, at: u64) -> Result<u64> {
    use std::io::Read;
    let f = std::fs::File::open(aside).map_err(crate::error::file_err(aside))?;
    let mut r = std::io::BufReader::with_capacity(STAGE_BYTES, f);
    let mut w = PageWriter::new(vol, at);
    for k in 0..pages {
        let no = w.page_no();
        let page = w.page();
        r.read_exact(page).map_err(crate::error::file_err(aside))?;
        crate::page::open(k, page)?;
        let crc = crate::page::checksum(no, page);
        page[0..4].copy_from_slice(&crc.to_le_bytes());
        w.done()?;
    }
    w.finish()
}

/// Writes one tensor's rows (a byte stream) as tensor pages from
/// `first_page`; `fill` supplies the next bytes into the given buffer and
/// returns how many it wrote (0 at the end).
pub fn write_tensor(vol: &Volume, first_page: u64, index: u32, epoch: u64, mut fill: impl FnMut(&mut [u8]) -> Result<usize>) -> Result<u64> {
    let mut w = PageWriter::new(vol, first_page);
    let ps = vol.page_size();
    let mut k = 0u32;
    loop {
        let page = w.page();
        let mut got = 0;
        while got < ps - HEADER {
            let n = fill(&mut page[HEADER + got..])?;
            if n == 0 {
                break;
            }
            got += n;
        }
        if got == 0 {
            break;
        }
        page[HEADER + got..].fill(0);
        let no = w.page_no();
        seal(no, w.page(), &Header { kind: Kind::Tensor, epoch, key: index as u64, count: 0, aux: k });
        w.done()?;
        k += 1;
        if got < ps - HEADER {
            break;
        }
    }
    w.finish()
}
