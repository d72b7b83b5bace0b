//! External sort of edge records: fill a buffer within the memory budget,
//! sort it (both cores), spill it as a run; at the end merge the runs (or
//! stream the buffer when everything fit).
//!
//! Records without weights or labels whose ids fit in 32 bits (every degree
//! ordered import, and any graph below 2^32 vertices) are packed into one
//! u64 key `src << 32 | dst`, whose order is the record order: a third of
//! the bytes to sort, spill and merge, and integer comparisons. A sorter
//! that meets a larger id spills what it holds and goes on with 24-byte
//! records; each run file keeps its own form.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use rayon::slice::ParallelSliceMut;

use crate::error::{Result, StoreError, file_err};

/// One directed edge as sorted: by source, destination, then weight bits and
/// label so that equal inputs always sort the same way (deterministic bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rec {
    pub src: u64,
    pub dst: u64,
    pub wbits: u32,
    pub label: u32,
}

const REC_BYTES: usize = 24;
const KEY_BYTES: usize = 8;
/// Largest id a packed key holds.
pub const PACKED_MAX: u64 = u32::MAX as u64;

/// The packed key of an edge whose ids are at most `PACKED_MAX`.
#[inline]
pub fn pack(src: u64, dst: u64) -> u64 {
    debug_assert!(src <= PACKED_MAX && dst <= PACKED_MAX);
    src << 32 | dst
}

#[inline]
fn unpack(k: u64) -> Rec {
    Rec { src: k >> 32, dst: k & PACKED_MAX, wbits: 0, label: 0 }
}

impl Rec {
    fn put(&self, out: &mut [u8]) {
        out[0..8].copy_from_slice(&self.src.to_le_bytes());
        out[8..16].copy_from_slice(&self.dst.to_le_bytes());
        out[16..20].copy_from_slice(&self.wbits.to_le_bytes());
        out[20..24].copy_from_slice(&self.label.to_le_bytes());
    }
    fn get(b: &[u8]) -> Rec {
        Rec {
            src: u64::from_le_bytes(b[0..8].try_into().expect("8")),
            dst: u64::from_le_bytes(b[8..16].try_into().expect("8")),
            wbits: u32::from_le_bytes(b[16..20].try_into().expect("4")),
            label: u32::from_le_bytes(b[20..24].try_into().expect("4")),
        }
    }
}

/// How a run file stores its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Packed,
    Wide,
}

impl Form {
    fn bytes(self) -> usize {
        match self {
            Form::Packed => KEY_BYTES,
            Form::Wide => REC_BYTES,
        }
    }
}

/// Sorts `keys` on all of rayon's threads: LSD radix over only the bits
/// that vary between keys, `RADIX_BITS` at a time (a graph below 2^22
/// vertices takes 4 passes), through `scratch`, which ends up holding
/// garbage of the same length.
pub fn radix_sort(keys: &mut Vec<u64>, scratch: &mut Vec<u64>) {
    use rayon::prelude::*;
    const RADIX_BITS: u32 = 11;
    const BUCKETS: usize = 1 << RADIX_BITS;
    let n = keys.len();
    if n < 1 << 16 {
        keys.sort_unstable();
        return;
    }
    let first = keys[0];
    let varying = keys.par_chunks(1 << 16).map(|c| c.iter().fold(0, |m, &k| m | (k ^ first))).reduce(|| 0, |a, b| a | b);
    if varying == 0 {
        return;
    }
    scratch.clear();
    scratch.resize(n, 0);
    let chunk = n.div_ceil(rayon::current_num_threads().max(1) * 4);
    let mut shift = varying.trailing_zeros();
    let mut swapped = false;
    loop {
        let (src, dst) = if swapped { (&scratch[..], &mut keys[..]) } else { (&keys[..], &mut scratch[..]) };
        let digit = |k: u64| ((k >> shift) as usize) & (BUCKETS - 1);
        let counts: Vec<Vec<usize>> = src
            .par_chunks(chunk)
            .map(|c| {
                let mut h = vec![0usize; BUCKETS];
                for &k in c {
                    h[digit(k)] += 1;
                }
                h
            })
            .collect();
        // Chunk j's keys of digit b go after every smaller digit's and
        // after earlier chunks' keys of digit b: the pass is stable.
        let mut offsets = vec![vec![0usize; BUCKETS]; counts.len()];
        let mut at = 0;
        for b in 0..BUCKETS {
            for (o, c) in offsets.iter_mut().zip(&counts) {
                o[b] = at;
                at += c[b];
            }
        }
        assert_eq!(at, n);
        let out = OutPtr(dst.as_mut_ptr());
        src.par_chunks(chunk).zip(offsets.into_par_iter()).for_each(|(c, mut o)| {
            for &k in c {
                let d = digit(k);
                // SAFETY: the offsets give each (chunk, digit) its own
                // range of `dst`, as long as the chunk's keys of that digit.
                unsafe { *out.at(o[d]) = k };
                o[d] += 1;
            }
        });
        swapped = !swapped;
        shift += RADIX_BITS;
        if shift >= 64 || varying >> shift == 0 {
            break;
        }
        shift += (varying >> shift).trailing_zeros();
    }
    if swapped {
        std::mem::swap(keys, scratch);
    }
}

/// `dst` of a radix pass, written by several threads at disjoint indices.
struct OutPtr(*mut u64);
// SAFETY: each thread writes only its own indices (see `radix_sort`).
unsafe impl Sync for OutPtr {}

impl OutPtr {
    /// # Safety
    /// `i` is in bounds and no other thread touches it.
    unsafe fn at(&self, i: usize) -> *mut u64 {
        unsafe { self.0.add(i) }
    }
}

pub struct Sorter {
    keys: Vec<u64>,
    /// The radix sort's second buffer, as long as `keys`.
    scratch: Vec<u64>,
    recs: Vec<Rec>,
    form: Form,
    budget: usize,
    dir: PathBuf,
    tag: &'static str,
    runs: Vec<(PathBuf, Form)>,
    /// Spill staging, reused.
    bytes: Vec<u8>,
    /// A packed run being written on a thread of its own while the buffer
    /// fills again; the thread hands its keys back as the next scratch.
    writing: Option<std::thread::JoinHandle<Result<Vec<u64>>>>,
    pub count: u64,
}

impl Sorter {
    /// `budget` bytes of records in memory; runs spill into `dir`. `packed`:
    /// the records carry no weights or labels (see the module comment).
    pub fn new(budget: usize, dir: &Path, tag: &'static str, packed: bool) -> Sorter {
        let form = if packed { Form::Packed } else { Form::Wide };
        Sorter {
            keys: Vec::new(),
            scratch: Vec::new(),
            recs: Vec::new(),
            form,
            budget,
            dir: dir.to_path_buf(),
            tag,
            runs: Vec::new(),
            bytes: Vec::new(),
            writing: None,
            count: 0,
        }
    }

    /// Runs spilled so far.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Whether records go in as packed keys (`push_keys`).
    pub fn packed(&self) -> bool {
        self.form == Form::Packed
    }

    fn cap(&self) -> usize {
        match self.form {
            // Keys and the radix sort's scratch.
            Form::Packed => (self.budget / (2 * KEY_BYTES)).max(1024),
            Form::Wide => (self.budget / REC_BYTES).max(1024),
        }
    }

    /// Appends packed keys (only while `packed()`).
    pub fn push_keys(&mut self, mut keys: &[u64]) -> Result<()> {
        assert!(self.packed(), "packed keys pushed into a sorter of wide records");
        let cap = self.cap();
        while !keys.is_empty() {
            if self.keys.len() == cap {
                self.spill()?;
            }
            if self.keys.capacity() < cap {
                // Grow in steps so a small input costs little memory.
                let want = (self.keys.len() + keys.len()).max(self.keys.capacity() * 2).min(cap);
                self.keys.reserve_exact(want - self.keys.len());
            }
            let n = keys.len().min(cap - self.keys.len());
            self.keys.extend_from_slice(&keys[..n]);
            self.count += n as u64;
            keys = &keys[n..];
        }
        Ok(())
    }

    /// Appends `n` packed keys that `fill` writes into the slice it is
    /// given (on any threads; every slot is written, in the order the
    /// keys come). `n` must not exceed `max_keys()`: the buffer spills
    /// first when they do not fit.
    pub fn push_keys_with(&mut self, n: usize, fill: impl FnOnce(&mut [u64])) -> Result<()> {
        assert!(self.packed(), "packed keys pushed into a sorter of wide records");
        let cap = self.cap();
        assert!(n <= cap, "{n} keys at once into a buffer of {cap}");
        if self.keys.len() + n > cap {
            self.spill()?;
        }
        if self.keys.capacity() < self.keys.len() + n {
            // Grow in steps so a small input costs little memory.
            let want = (self.keys.len() + n).max(self.keys.capacity() * 2).min(cap);
            self.keys.reserve_exact(want - self.keys.len());
        }
        let from = self.keys.len();
        self.keys.resize(from + n, 0);
        fill(&mut self.keys[from..]);
        self.count += n as u64;
        Ok(())
    }

    /// Most keys one `push_keys_with` takes.
    pub fn max_keys(&self) -> usize {
        self.cap()
    }

    /// Appends one record; a packed sorter meeting an id past 32 bits or a
    /// weight or label first spills its keys and goes on wide.
    pub fn push(&mut self, r: Rec) -> Result<()> {
        if self.packed() {
            if r.src <= PACKED_MAX && r.dst <= PACKED_MAX && r.wbits == 0 && r.label == 0 {
                return self.push_keys(&[pack(r.src, r.dst)]);
            }
            if !self.keys.is_empty() {
                self.spill()?;
            }
            self.wait_written()?;
            self.keys = Vec::new();
            self.scratch = Vec::new();
            self.form = Form::Wide;
        }
        if self.recs.len() == self.cap() {
            self.spill()?;
        }
        if self.recs.capacity() == 0 {
            self.recs.reserve_exact(self.cap().min(1 << 16));
        }
        self.recs.push(r);
        self.count += 1;
        Ok(())
    }

    fn sort_buffer(&mut self) {
        match self.form {
            Form::Packed => radix_sort(&mut self.keys, &mut self.scratch),
            Form::Wide => self.recs.par_sort_unstable(),
        }
    }

    /// Waits for the run being written, if any; its keys' buffer becomes
    /// the scratch again.
    fn wait_written(&mut self) -> Result<()> {
        if let Some(t) = self.writing.take() {
            let mut buf = t.join().map_err(|_| StoreError::Invalid("run writer thread panicked".into()))??;
            buf.clear();
            self.scratch = buf;
        }
        Ok(())
    }

    fn spill(&mut self) -> Result<()> {
        self.wait_written()?;
        if self.form == Form::Packed {
            return self.spill_packed();
        }
        self.sort_buffer();
        let path = self.dir.join(format!("run-{}-{}", self.tag, self.runs.len()));
        let f = std::fs::File::create(&path).map_err(file_err(&path))?;
        let mut w = BufWriter::with_capacity(1 << 20, f);
        const BLOCK: usize = 1 << 16;
        let form = self.form;
        let n = if form == Form::Packed { self.keys.len() } else { self.recs.len() };
        for start in (0..n).step_by(BLOCK) {
            let end = (start + BLOCK).min(n);
            self.bytes.clear();
            match form {
                Form::Packed => self.bytes.extend(self.keys[start..end].iter().flat_map(|k| k.to_le_bytes())),
                Form::Wide => {
                    self.bytes.resize((end - start) * REC_BYTES, 0);
                    for (r, b) in self.recs[start..end].iter().zip(self.bytes.chunks_exact_mut(REC_BYTES)) {
                        r.put(b);
                    }
                }
            }
            w.write_all(&self.bytes).map_err(file_err(&path))?;
        }
        w.flush().map_err(file_err(&path))?;
        self.runs.push((path, form));
        self.keys.clear();
        self.recs.clear();
        Ok(())
    }

    /// Sorts the keys and writes them as a run on a thread of its own; the
    /// radix sort's scratch (as long as the keys) takes the next keys
    /// meanwhile, so the memory stays the same.
    fn spill_packed(&mut self) -> Result<()> {
        radix_sort(&mut self.keys, &mut self.scratch);
        let path = self.dir.join(format!("run-{}-{}", self.tag, self.runs.len()));
        let f = std::fs::File::create(&path).map_err(file_err(&path))?;
        self.runs.push((path.clone(), Form::Packed));
        let mut next = std::mem::take(&mut self.scratch);
        next.clear();
        let keys = std::mem::replace(&mut self.keys, next);
        let t = std::thread::Builder::new().name("sg-run-write".into()).spawn(move || write_keys(f, &path, keys));
        self.writing = Some(t.map_err(|e| StoreError::Invalid(format!("cannot start a run writer thread: {e}")))?);
        Ok(())
    }

    /// Sorted stream of every record pushed. `merge_budget` bytes are spread
    /// over the run readers.
    pub fn finish(self, merge_budget: usize) -> Result<Merged> {
        let (_, mut parts) = self.finish_parts(merge_budget, 1)?;
        Ok(parts.pop().expect("one part"))
    }

    /// The sorted records as `parts` streams over consecutive source ranges:
    /// part k holds the records with `bounds[k] <= src < bounds[k + 1]`
    /// (`bounds` has `parts + 1` entries, the last past every source). The
    /// cuts are the smallest sources at which k/parts of the records come
    /// before, so they depend on the records alone, not on how they were
    /// split into runs. `merge_budget` bytes are spread over the readers.
    pub fn finish_parts(mut self, merge_budget: usize, parts: usize) -> Result<(Vec<u64>, Vec<Merged>)> {
        assert!((1..=MAX_PARTS).contains(&parts), "{parts} parts");
        self.wait_written()?;
        if self.runs.is_empty() {
            self.sort_buffer();
            self.scratch = Vec::new();
            let whole = match self.form {
                Form::Packed => Whole::Keys(std::sync::Arc::new(std::mem::take(&mut self.keys))),
                Form::Wide => Whole::Recs(std::sync::Arc::new(std::mem::take(&mut self.recs))),
            };
            let bounds = cut(parts, |v| Ok(whole.below(v) as u64), whole.len() as u64, whole.end())?;
            let merged = bounds
                .windows(2)
                .map(|b| {
                    let (at, end) = (whole.below(b[0]), whole.below(b[1]));
                    Merged { src: Src::Slice { whole: whole.clone(), at, end }, _files: None }
                })
                .collect();
            return Ok((bounds, merged));
        }
        if !self.keys.is_empty() || !self.recs.is_empty() {
            self.spill()?;
            self.wait_written()?;
        }
        self.keys = Vec::new();
        self.scratch = Vec::new();
        self.recs = Vec::new();
        self.bytes = Vec::new();
        let files = self.runs.iter().map(|(p, form)| RunFile::open(p, *form)).collect::<Result<Vec<_>>>()?;
        let total = files.iter().map(|f| f.len).sum();
        let end = files.iter().map(|f| f.end()).collect::<Result<Vec<_>>>()?.into_iter().max().unwrap_or(0);
        let below = |v: u64| files.iter().try_fold(0u64, |n, f| Ok(n + f.below(v)?));
        let bounds = cut(parts, below, total, end)?;
        let guard = std::sync::Arc::new(RunFiles(self.runs.iter().map(|(p, _)| p.clone()).collect()));
        // A multiple of both record sizes, so a refill never splits one.
        let per = (merge_budget / (self.runs.len() * parts)).clamp(64 << 10, 8 << 20) / REC_BYTES * REC_BYTES;
        let all_packed = self.runs.iter().all(|(_, f)| *f == Form::Packed);
        let mut merged = Vec::with_capacity(parts);
        for b in bounds.windows(2) {
            let mut runs = Vec::with_capacity(files.len());
            for f in &files {
                let (from, to) = (f.below(b[0])?, f.below(b[1])?);
                let file = std::fs::File::open(&f.path).map_err(file_err(&f.path))?;
                let n = f.form.bytes() as u64;
                runs.push(RunReader { path: f.path.clone(), f: file, form: f.form, buf: vec![0; per], at: 0, len: 0, pos: from * n, end: to * n });
            }
            let src = if all_packed {
                let mut heap = BinaryHeap::with_capacity(runs.len());
                for (i, r) in runs.iter_mut().enumerate() {
                    if let Some(k) = r.next_key()? {
                        heap.push(Reverse((k, i)));
                    }
                }
                Src::KeyRuns { runs, heap }
            } else {
                let mut heap = BinaryHeap::with_capacity(runs.len());
                for (i, r) in runs.iter_mut().enumerate() {
                    if let Some(rec) = r.next_rec()? {
                        heap.push(Reverse((rec, i)));
                    }
                }
                Src::RecRuns { runs, heap }
            };
            merged.push(Merged { src, _files: Some(guard.clone()) });
        }
        Ok((bounds, merged))
    }
}

/// Writes sorted keys as a run file (little-endian u64s); returns the
/// buffer for reuse.
fn write_keys(f: std::fs::File, path: &Path, keys: Vec<u64>) -> Result<Vec<u64>> {
    let mut w = BufWriter::with_capacity(1 << 20, f);
    let mut bytes = Vec::with_capacity(1 << 19);
    for block in keys.chunks(1 << 16) {
        bytes.clear();
        bytes.extend(block.iter().flat_map(|k| k.to_le_bytes()));
        w.write_all(&bytes).map_err(file_err(path))?;
    }
    w.flush().map_err(file_err(path))?;
    Ok(keys)
}

impl Drop for Sorter {
    /// A sorter dropped early (a failed import) still waits for its run
    /// writer, so no thread outlives the build directory.
    fn drop(&mut self) {
        if let Some(t) = self.writing.take() {
            let _ = t.join();
        }
    }
}

/// Most parts a sorted stream splits into.
pub const MAX_PARTS: usize = 64;

/// Cut sources for `parts` parts of `total` records: `below(v)` counts the
/// records with source < v (nondecreasing in v), and every source is below
/// `end`. Part k starts at the smallest v with k * total / parts records
/// before it; the last bound is `end`.
fn cut(parts: usize, below: impl Fn(u64) -> Result<u64>, total: u64, end: u64) -> Result<Vec<u64>> {
    let mut bounds = vec![0u64; parts + 1];
    for k in 1..parts {
        let target = (total as u128 * k as u128 / parts as u128) as u64;
        let (mut lo, mut hi) = (bounds[k - 1], end);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if below(mid)? >= target {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        bounds[k] = lo;
    }
    bounds[parts] = end;
    Ok(bounds)
}

/// The sorted in-memory buffer, shared by the parts that stream ranges of it.
#[derive(Clone)]
enum Whole {
    Keys(std::sync::Arc<Vec<u64>>),
    Recs(std::sync::Arc<Vec<Rec>>),
}

impl Whole {
    fn len(&self) -> usize {
        match self {
            Whole::Keys(k) => k.len(),
            Whole::Recs(r) => r.len(),
        }
    }

    /// Records with source below `v`.
    fn below(&self, v: u64) -> usize {
        match self {
            Whole::Keys(k) => k.partition_point(|&k| k >> 32 < v),
            Whole::Recs(r) => r.partition_point(|r| r.src < v),
        }
    }

    /// Past the largest source.
    fn end(&self) -> u64 {
        match self {
            Whole::Keys(k) => k.last().map_or(0, |&k| (k >> 32) + 1),
            Whole::Recs(r) => r.last().map_or(0, |r| r.src + 1),
        }
    }

    fn get(&self, i: usize) -> Rec {
        match self {
            Whole::Keys(k) => unpack(k[i]),
            Whole::Recs(r) => r[i],
        }
    }
}

/// A spilled run, for locating sources in it (one positioned read per probe).
struct RunFile {
    path: PathBuf,
    f: std::fs::File,
    form: Form,
    /// Records in it.
    len: u64,
}

impl RunFile {
    fn open(path: &Path, form: Form) -> Result<RunFile> {
        let f = std::fs::File::open(path).map_err(file_err(path))?;
        let bytes = f.metadata().map_err(file_err(path))?.len();
        let n = form.bytes() as u64;
        if !bytes.is_multiple_of(n) {
            return Err(StoreError::BadInput { path: path.to_path_buf(), reason: "sorted run ends inside a record".into() });
        }
        Ok(RunFile { path: path.to_path_buf(), f, form, len: bytes / n })
    }

    fn src_at(&self, i: u64) -> Result<u64> {
        use std::os::unix::fs::FileExt;
        let n = self.form.bytes();
        let mut b = [0u8; 8];
        // A packed key's source is its high half; a record's its first word.
        let off = i * n as u64 + if self.form == Form::Packed { 4 } else { 0 };
        let want = if self.form == Form::Packed { 4 } else { 8 };
        self.f.read_exact_at(&mut b[..want], off).map_err(file_err(&self.path))?;
        Ok(u64::from_le_bytes(b))
    }

    /// Records with source below `v`.
    fn below(&self, v: u64) -> Result<u64> {
        let (mut lo, mut hi) = (0, self.len);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.src_at(mid)? < v {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }

    /// Past the largest source.
    fn end(&self) -> Result<u64> {
        if self.len == 0 {
            return Ok(0);
        }
        Ok(self.src_at(self.len - 1)? + 1)
    }
}

/// Removes the run files once every part reading them is dropped.
struct RunFiles(Vec<PathBuf>);

impl Drop for RunFiles {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// One spilled run, read a large block at a time.
struct RunReader {
    path: PathBuf,
    f: std::fs::File,
    form: Form,
    buf: Vec<u8>,
    at: usize,
    len: usize,
    /// Next byte to read, and the end of this reader's range of the file.
    pos: u64,
    end: u64,
}

impl RunReader {
    /// The next record's bytes, refilling the block when it is used up.
    fn next_bytes(&mut self) -> Result<Option<&[u8]>> {
        use std::os::unix::fs::FileExt;
        let n = self.form.bytes();
        if self.at == self.len {
            self.len = 0;
            self.at = 0;
            let want = (self.buf.len() as u64).min(self.end - self.pos) as usize;
            while self.len < want {
                let got = self.f.read_at(&mut self.buf[self.len..want], self.pos).map_err(file_err(&self.path))?;
                if got == 0 {
                    break;
                }
                self.len += got;
                self.pos += got as u64;
            }
            if self.len == 0 {
                return Ok(None);
            }
            if !self.len.is_multiple_of(n) {
                return Err(StoreError::BadInput { path: self.path.clone(), reason: "sorted run ends inside a record".into() });
            }
        }
        let b = &self.buf[self.at..self.at + n];
        self.at += n;
        Ok(Some(b))
    }

    fn next_key(&mut self) -> Result<Option<u64>> {
        Ok(self.next_bytes()?.map(|b| u64::from_le_bytes(b.try_into().expect("8"))))
    }

    fn next_rec(&mut self) -> Result<Option<Rec>> {
        let form = self.form;
        Ok(self.next_bytes()?.map(|b| if form == Form::Packed { unpack(u64::from_le_bytes(b.try_into().expect("8"))) } else { Rec::get(b) }))
    }
}

enum Src {
    Slice { whole: Whole, at: usize, end: usize },
    KeyRuns { runs: Vec<RunReader>, heap: BinaryHeap<Reverse<(u64, usize)>> },
    RecRuns { runs: Vec<RunReader>, heap: BinaryHeap<Reverse<(Rec, usize)>> },
}

pub struct Merged {
    src: Src,
    /// The run files, removed when the last part is dropped.
    _files: Option<std::sync::Arc<RunFiles>>,
}

impl Merged {
    pub fn next_record(&mut self) -> Result<Option<Rec>> {
        match &mut self.src {
            Src::Slice { whole, at, end } => {
                if *at == *end {
                    return Ok(None);
                }
                *at += 1;
                Ok(Some(whole.get(*at - 1)))
            }
            Src::KeyRuns { runs, heap } => {
                let Some(mut top) = heap.peek_mut() else { return Ok(None) };
                let Reverse((k, i)) = *top;
                match runs[i].next_key()? {
                    // Replacing the root sifts once instead of a pop and a push.
                    Some(n) => *top = Reverse((n, i)),
                    None => drop(std::collections::binary_heap::PeekMut::pop(top)),
                }
                Ok(Some(unpack(k)))
            }
            Src::RecRuns { runs, heap } => {
                let Some(mut top) = heap.peek_mut() else { return Ok(None) };
                let Reverse((rec, i)) = *top;
                match runs[i].next_rec()? {
                    Some(n) => *top = Reverse((n, i)),
                    None => drop(std::collections::binary_heap::PeekMut::pop(top)),
                }
                Ok(Some(rec))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn radix_sort_equals_a_comparison_sort() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut scratch = Vec::new();
        // Full 64-bit keys, graph-shaped keys (22-bit ids, few distinct
        // high bits), all equal, and a sizes around the cut to sort_unstable.
        type Shape = (usize, fn(u64) -> u64);
        let shapes: [Shape; 4] = [(200_000, |r| r), (300_001, |r| pack(r >> 42, r & 0x3f_ffff)), (70_000, |_| 42), ((1 << 16) + 3, |r| r & 0xff0f_0000_f00f)];
        for (n, shape) in shapes {
            let mut keys: Vec<u64> = (0..n).map(|_| shape(next())).collect();
            let mut want = keys.clone();
            want.sort_unstable();
            radix_sort(&mut keys, &mut scratch);
            assert_eq!(keys, want);
        }
    }
}
