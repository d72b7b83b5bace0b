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
    /// Every vertex's degree, when asked for: the vertex ranges' in order
    /// (their concatenation is the table; not joined, to hold it once).
    pub degrees: Option<Vec<Vec<u32>>>,
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
    /// Degrees of the vertices from `lo`, when asked for.
    degrees: Option<Vec<u32>>,
    /// This builder's vertex range: `lo` up to `hi` (exclusive).
    lo: u64,
    hi: u64,
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
            let n = self.hi;
            let x = d.get_mut((self.v - self.lo) as usize).ok_or_else(|| StoreError::Invalid(format!("vertex {} past the {n} vertices", self.v)))?;
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
    /// A builder of the lists of vertices `lo..hi` (records outside it are
    /// the caller's error).
    fn new(w: PageWriter<'a>, o: &'a LayoutOptions, (lo, hi): (u64, u64)) -> Builder<'a> {
        assert!(lo <= hi && hi <= o.num_nodes.max(lo), "vertex range {lo}..{hi} of {}", o.num_nodes);
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
            v: lo,
            ids: Vec::new(),
            ws: Vec::new(),
            ls: Vec::new(),
            gap_bytes: 0,
            has_self: false,
            packed_base: 0,
            extent_pages: 0,
            v_first_edge: 0,
            top: TopDegrees { k: o.hot, heap: BinaryHeap::with_capacity(o.hot.min(1 << 20)) },
            degrees: o.degrees.then(|| vec![0; (hi - lo) as usize]),
            lo,
            hi,
        }
    }

    /// Takes the next record of the sorted stream.
    fn record(&mut self, r: &Rec) -> Result<()> {
        if r.src < self.v || r.src >= self.hi {
            return Err(StoreError::Invalid(format!("record of vertex {} out of order or outside {}..{} (at {})", r.src, self.lo, self.hi, self.v)));
        }
        while self.v < r.src {
            // Vertices without records get only their self-loop (if asked).
            let next = if self.o.self_loops { self.v + 1 } else { r.src };
            self.end_vertex(next)?;
        }
        self.push_edge(r.dst, f32::from_bits(r.wbits), r.label)
    }

    /// Ends the stream: the last vertices, the last page.
    fn finish(mut self) -> Result<Piece> {
        let last = if self.o.self_loops { self.hi } else { self.v + 1 };
        while self.v < last {
            let next = if self.o.self_loops { self.v + 1 } else { last };
            self.end_vertex(next)?;
        }
        self.close_packed()?;
        let pages = self.w.finish()?;
        Ok(Piece { gtt: self.gtt, edges: self.edges, pages, top: self.top, degrees: self.degrees })
    }
}

/// One vertex range laid out: its pages numbered from where its writer
/// began, its edges counted from 0.
struct Piece {
    gtt: Gtt,
    edges: u64,
    /// The page after its last.
    pages: u64,
    top: TopDegrees,
    degrees: Option<Vec<u32>>,
}

/// Joins pieces laid out one after the other: piece k's pages move by
/// `shift[k]` and its edges by the edges before it.
fn join(pieces: Vec<Piece>, shift: &[u64], o: &LayoutOptions, first_page: u64, next_page: u64) -> Laid {
    let mut gtt = Gtt::default();
    gtt.reserve_exact(pieces.iter().map(|p| p.gtt.len()).sum());
    let mut top = TopDegrees { k: o.hot, heap: BinaryHeap::with_capacity(o.hot.min(1 << 20)) };
    let mut degrees = o.degrees.then(|| Vec::with_capacity(pieces.len()));
    let mut edges = 0;
    let mut present: Option<Gtt> = None;
    for (p, &d) in pieces.into_iter().zip(shift) {
        for i in 0..p.gtt.len() {
            gtt.push(p.gtt.first_vertex(i), p.gtt.page(i) + d, p.gtt.is_extent(i), p.gtt.edges_before(i) + edges);
        }
        edges += p.edges;
        match present.as_mut() {
            None => present = Some(p.gtt),
            Some(g) => g.presence_or(&p.gtt),
        }
        for Reverse((degree, Reverse(v))) in p.top.heap {
            top.push(v, degree);
        }
        if let (Some(all), Some(part)) = (degrees.as_mut(), p.degrees) {
            all.push(part);
        }
    }
    if let Some(g) = &present {
        gtt.presence_from(g);
    }
    Laid { gtt, edges, next_page, adj_pages: next_page - first_page, hot: top.ranked(), degrees }
}

/// Runs the k-way merge on its own thread (beside the page layout), in
/// batches of `LOWER_BATCH` records; `each` gets every batch in order.
/// Batches come back through a second channel to be refilled.
fn merge_beside(merged: &mut Merged, mut each: impl FnMut(&[Rec]) -> Result<bool>) -> Result<()> {
    use std::sync::mpsc::sync_channel;
    std::thread::scope(|scope| {
        let (tx, rx) = sync_channel::<Vec<Rec>>(4);
        let (back_tx, back_rx) = sync_channel::<Vec<Rec>>(6);
        let merger = super::spawn_named(scope, "sg-merge".into(), move || -> Result<()> {
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

/// Lays out one direction's lists from `parts`, the sorted record streams of
/// the vertex ranges `bounds[k]..bounds[k + 1]` (`Sorter::finish_parts`),
/// each on a thread of its own. Part 0 writes into `vol` from `first_page`;
/// the others into scratch files in `dir`, copied behind it in order once
/// their sizes are known, each page checked and sealed for its new number.
/// With `lower` (undirected stores), each part also lays out its records
/// with `dst <= src` as lower lists (each edge once, in the order a sort of
/// their own gives) on one more thread, into scratch files (`Aside`) for
/// the caller to move behind whatever comes after the out-lists.
pub fn lay_out(
    vol: &Volume,
    first_page: u64,
    (bounds, parts): (Vec<u64>, Vec<Merged>),
    (o, lower): (&LayoutOptions, Option<&LayoutOptions>),
    dir: &std::path::Path,
    total: u64,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<(Laid, Option<Aside>)> {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    assert_eq!(parts.len() + 1, bounds.len(), "a part per vertex range");
    let n = parts.len();
    let seen = AtomicU64::new(0);
    let out_path = |k: usize| dir.join(format!("out-part-{k}.tmp"));
    let lower_path = |k: usize| dir.join(format!("lower-part-{k}.tmp"));
    let ps = vol.page_size();
    let done: Vec<Result<(Piece, Option<Piece>)>> = std::thread::scope(|scope| {
        let threads: Vec<_> = parts
            .into_iter()
            .enumerate()
            .map(|(k, mut merged)| {
                // The last part runs to the last vertex (its self-loops).
                let range = (bounds[k], if k + 1 == n { o.num_nodes.max(bounds[k + 1]) } else { bounds[k + 1] });
                let (seen, out_path, lower_path) = (&seen, out_path(k), lower_path(k));
                super::spawn_named(scope, format!("sg-layout-{k}"), move || -> Result<(Piece, Option<Piece>)> {
                    let w = if k == 0 { PageWriter::new(vol, first_page) } else { PageWriter::to_file(&out_path, ps)? };
                    let lower_w = lower.map(|l| PageWriter::to_file(&lower_path, ps).map(|w| (w, l))).transpose()?;
                    lay_out_part(&mut merged, Builder::new(w, o, range), lower_w.map(|(w, l)| Builder::new(w, l, range)), &|m| {
                        progress(seen.fetch_add(m, Relaxed) + m, total);
                    })
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap_or_else(|_| Err(StoreError::Invalid("layout thread panicked".into())))).collect()
    });
    let done = done.into_iter().collect::<Result<Vec<_>>>()?;
    progress(total, total);
    let (outs, lowers): (Vec<Piece>, Vec<Option<Piece>>) = done.into_iter().unzip();
    // Part 0 is in place; each later part goes behind the one before.
    let mut shift = vec![0u64; n];
    let mut at = outs[0].pages;
    for k in 1..n {
        shift[k] = at;
        at = copy_pages(vol, &out_path(k), outs[k].pages, at)?;
        let _ = std::fs::remove_file(out_path(k));
    }
    let laid = join(outs, &shift, o, first_page, at);
    let aside = match lower {
        None => None,
        Some(l) => {
            let lowers: Vec<Piece> = lowers.into_iter().map(|p| p.expect("a lower piece per part")).collect();
            let files: Vec<_> = lowers.iter().enumerate().map(|(k, p)| (lower_path(k), p.pages)).collect();
            let mut shift = vec![0u64; n];
            for k in 1..n {
                shift[k] = shift[k - 1] + lowers[k - 1].pages;
            }
            let pages = shift[n - 1] + lowers[n - 1].pages;
            Some(Aside { files, laid: join(lowers, &shift, l, 0, pages) })
        }
    };
    Ok((laid, aside))
}

/// Lists laid out into scratch files: `files` (path, pages) in order, and
/// the lists with pages numbered from 0 across the files' concatenation.
pub struct Aside {
    pub files: Vec<(std::path::PathBuf, u64)>,
    pub laid: Laid,
}

impl Aside {
    /// Moves the pages into `vol` from page `at` (see `copy_pages`) and
    /// removes the files; returns the page after them.
    pub fn copy_into(&self, vol: &Volume, mut at: u64) -> Result<u64> {
        for (path, pages) in &self.files {
            at = copy_pages(vol, path, *pages, at)?;
            let _ = std::fs::remove_file(path);
        }
        Ok(at)
    }
}

/// Records handed to the lower lists' thread at a time.
const LOWER_BATCH: usize = 1 << 16;

/// Lays out one part: its merge on one thread, its out-lists here, its
/// lower lists (records with `dst <= src`) on a third; `seen` gets the
/// count of each batch of records taken.
fn lay_out_part(merged: &mut Merged, mut b: Builder, lower: Option<Builder>, seen: &(dyn Fn(u64) + Sync)) -> Result<(Piece, Option<Piece>)> {
    use std::sync::mpsc::sync_channel;
    let Some(mut lb) = lower else {
        merge_beside(merged, |batch| {
            for r in batch {
                b.record(r)?;
            }
            seen(batch.len() as u64);
            Ok(true)
        })?;
        return Ok((b.finish()?, None));
    };
    std::thread::scope(|scope| {
        let (tx, rx) = sync_channel::<Vec<Rec>>(4);
        let (back_tx, back_rx) = sync_channel::<Vec<Rec>>(6);
        let thread = super::spawn_named(scope, "sg-lower".into(), move || -> Result<Piece> {
            for mut batch in rx {
                for r in &batch {
                    lb.record(r)?;
                }
                batch.clear();
                let _ = back_tx.try_send(batch);
            }
            lb.finish()
        });
        let mut batch = Vec::with_capacity(LOWER_BATCH);
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
            seen(records.len() as u64);
            Ok(true)
        })
        .map(|()| {
            let _ = tx.send(std::mem::take(&mut batch));
        });
        drop(tx);
        let lower = thread.join().map_err(|_| StoreError::Invalid("lower-list thread panicked".into()))?;
        ran?;
        let out = b.finish()?;
        Ok((out, Some(lower?)))
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
