//! External sort of edge records: fill a buffer within the memory budget,
//! sort it (both cores), spill it as a run; at the end merge the runs (or
//! stream the buffer when everything fit).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use rayon::slice::ParallelSliceMut;

use crate::error::{Result, file_err};

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

impl Rec {
    fn put(&self, out: &mut [u8; REC_BYTES]) {
        out[0..8].copy_from_slice(&self.src.to_le_bytes());
        out[8..16].copy_from_slice(&self.dst.to_le_bytes());
        out[16..20].copy_from_slice(&self.wbits.to_le_bytes());
        out[20..24].copy_from_slice(&self.label.to_le_bytes());
    }
    fn get(b: &[u8; REC_BYTES]) -> Rec {
        Rec {
            src: u64::from_le_bytes(b[0..8].try_into().expect("8")),
            dst: u64::from_le_bytes(b[8..16].try_into().expect("8")),
            wbits: u32::from_le_bytes(b[16..20].try_into().expect("4")),
            label: u32::from_le_bytes(b[20..24].try_into().expect("4")),
        }
    }
}

pub struct Sorter {
    buf: Vec<Rec>,
    cap: usize,
    dir: PathBuf,
    tag: &'static str,
    runs: Vec<PathBuf>,
    pub count: u64,
}

impl Sorter {
    /// `budget` bytes of records in memory; runs spill into `dir`.
    pub fn new(budget: usize, dir: &Path, tag: &'static str) -> Sorter {
        let cap = (budget / std::mem::size_of::<Rec>()).max(1024);
        Sorter { buf: Vec::new(), cap, dir: dir.to_path_buf(), tag, runs: Vec::new(), count: 0 }
    }

    /// Runs spilled so far.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    pub fn push(&mut self, r: Rec) -> Result<()> {
        if self.buf.len() == self.cap {
            self.spill()?;
        }
        if self.buf.capacity() == 0 {
            self.buf.reserve_exact(self.cap.min(1 << 16));
        }
        self.buf.push(r);
        self.count += 1;
        Ok(())
    }

    fn spill(&mut self) -> Result<()> {
        self.buf.par_sort_unstable();
        let path = self.dir.join(format!("run-{}-{}", self.tag, self.runs.len()));
        let f = std::fs::File::create(&path).map_err(file_err(&path))?;
        let mut w = BufWriter::with_capacity(1 << 20, f);
        let mut b = [0u8; REC_BYTES];
        for r in &self.buf {
            r.put(&mut b);
            w.write_all(&b).map_err(file_err(&path))?;
        }
        w.flush().map_err(file_err(&path))?;
        self.runs.push(path);
        self.buf.clear();
        Ok(())
    }

    /// Sorted stream of every record pushed. `merge_budget` bytes are spread
    /// over the run readers.
    pub fn finish(mut self, merge_budget: usize) -> Result<Merged> {
        if self.runs.is_empty() {
            self.buf.par_sort_unstable();
            return Ok(Merged { mem: self.buf.into_iter(), runs: Vec::new(), heap: BinaryHeap::new(), paths: Vec::new() });
        }
        if !self.buf.is_empty() {
            self.spill()?;
        }
        self.buf = Vec::new();
        let per = (merge_budget / self.runs.len()).clamp(64 << 10, 8 << 20);
        let mut runs = Vec::with_capacity(self.runs.len());
        let mut heap = BinaryHeap::with_capacity(self.runs.len());
        for (i, p) in self.runs.iter().enumerate() {
            let f = std::fs::File::open(p).map_err(file_err(p))?;
            let mut r = RunReader { path: p.clone(), r: BufReader::with_capacity(per, f) };
            if let Some(rec) = r.next()? {
                heap.push(Reverse((rec, i)));
            }
            runs.push(r);
        }
        Ok(Merged { mem: Vec::new().into_iter(), runs, heap, paths: self.runs })
    }
}

struct RunReader {
    path: PathBuf,
    r: BufReader<std::fs::File>,
}

impl RunReader {
    fn next(&mut self) -> Result<Option<Rec>> {
        let mut b = [0u8; REC_BYTES];
        match self.r.read_exact(&mut b) {
            Ok(()) => Ok(Some(Rec::get(&b))),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
            Err(e) => Err(file_err(&self.path)(e)),
        }
    }
}

pub struct Merged {
    mem: std::vec::IntoIter<Rec>,
    runs: Vec<RunReader>,
    heap: BinaryHeap<Reverse<(Rec, usize)>>,
    paths: Vec<PathBuf>,
}

impl Merged {
    pub fn next_record(&mut self) -> Result<Option<Rec>> {
        if self.runs.is_empty() {
            return Ok(self.mem.next());
        }
        let Some(Reverse((rec, i))) = self.heap.pop() else { return Ok(None) };
        if let Some(n) = self.runs[i].next()? {
            self.heap.push(Reverse((n, i)));
        }
        Ok(Some(rec))
    }
}

impl Drop for Merged {
    fn drop(&mut self) {
        for p in &self.paths {
            let _ = std::fs::remove_file(p);
        }
    }
}
