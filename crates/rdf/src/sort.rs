//! External-memory sort and de-duplication of id quads for the bulk load:
//! quads are gathered in a buffer the memory budget bounds, each full
//! buffer is sorted, de-duplicated and written as a run file, and the runs
//! are merged (a heap over one read buffer per run), each distinct quad
//! handed on once, in order. Memory: the buffer, or the merge's read
//! buffers, never the whole load.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use rayon::slice::ParallelSliceMut;

use crate::error::{RdfError, Result, io_err};
use crate::state::Ids;

/// Bytes of one quad in a run file and in the buffer.
const QUAD_BYTES: u64 = 32;
/// Quads per run at least, whatever the budget (8 MiB).
const MIN_RUN: u64 = 1 << 18;
/// Runs one merge reads at once; a load needing more is refused with a
/// clear error (raise the memory budget).
const MAX_RUNS: usize = 4096;

pub struct QuadSorter {
    dir: PathBuf,
    budget: u64,
    buf: Vec<Ids>,
    cap: usize,
    runs: Vec<PathBuf>,
}

impl QuadSorter {
    /// Run files go to `dir`; `memory_budget` bounds the buffer.
    pub fn new(dir: &Path, memory_budget: u64) -> QuadSorter {
        let cap = (memory_budget / QUAD_BYTES).max(MIN_RUN) as usize;
        QuadSorter { dir: dir.to_path_buf(), budget: memory_budget, buf: Vec::new(), cap, runs: Vec::new() }
    }

    pub fn push(&mut self, q: Ids) -> Result<()> {
        self.buf.push(q);
        if self.buf.len() >= self.cap {
            self.spill()?;
        }
        Ok(())
    }

    /// Runs written so far.
    #[cfg(test)]
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    fn spill(&mut self) -> Result<()> {
        if self.runs.len() >= MAX_RUNS {
            return Err(RdfError::Invalid(format!("the load needs more than {MAX_RUNS} sorted runs; raise the memory budget")));
        }
        self.buf.par_sort_unstable();
        self.buf.dedup();
        let path = self.dir.join(format!("quads.run{}.tmp", self.runs.len()));
        let mut w = BufWriter::with_capacity(1 << 20, File::create(&path).map_err(io_err(&path))?);
        for q in &self.buf {
            for x in q {
                w.write_all(&x.to_le_bytes()).map_err(io_err(&path))?;
            }
        }
        w.flush().map_err(io_err(&path))?;
        self.runs.push(path);
        self.buf.clear();
        Ok(())
    }

    /// Hands each distinct quad to `f`, in sorted order; returns how many.
    /// Removes the run files.
    pub fn finish(mut self, f: &mut dyn FnMut(Ids) -> Result<()>) -> Result<u64> {
        self.buf.par_sort_unstable();
        self.buf.dedup();
        if self.runs.is_empty() {
            for &q in &self.buf {
                f(q)?;
            }
            return Ok(self.buf.len() as u64);
        }
        if !self.buf.is_empty() {
            self.spill()?;
        }
        self.buf = Vec::new();
        let n = self.merge(f);
        for r in &self.runs {
            let _ = std::fs::remove_file(r);
        }
        n
    }

    fn merge(&self, f: &mut dyn FnMut(Ids) -> Result<()>) -> Result<u64> {
        let per_run = (self.budget / self.runs.len() as u64).clamp(1 << 16, 1 << 22) as usize;
        let mut readers = Vec::with_capacity(self.runs.len());
        for p in &self.runs {
            readers.push((BufReader::with_capacity(per_run, File::open(p).map_err(io_err(p))?), p));
        }
        let mut heap = BinaryHeap::new();
        for (i, (r, p)) in readers.iter_mut().enumerate() {
            if let Some(q) = read_quad(r, p)? {
                heap.push(Reverse((q, i)));
            }
        }
        let (mut n, mut last) = (0u64, None);
        while let Some(Reverse((q, i))) = heap.pop() {
            if last != Some(q) {
                debug_assert!(last.is_none_or(|l| l < q), "runs merge in order");
                f(q)?;
                n += 1;
                last = Some(q);
            }
            let (r, p) = &mut readers[i];
            if let Some(next) = read_quad(r, p)? {
                heap.push(Reverse((next, i)));
            }
        }
        Ok(n)
    }
}

impl Drop for QuadSorter {
    fn drop(&mut self) {
        for r in &self.runs {
            let _ = std::fs::remove_file(r);
        }
    }
}

/// The next quad of a run, `None` at its end.
fn read_quad(r: &mut impl Read, path: &Path) -> Result<Option<Ids>> {
    let mut b = [0u8; QUAD_BYTES as usize];
    match r.read_exact(&mut b) {
        Ok(()) => Ok(Some(std::array::from_fn(|i| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"))))),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(io_err(path)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_merge_to_the_distinct_sorted_quads() {
        let tmp = tempfile::tempdir().unwrap();
        let mut s = QuadSorter::new(tmp.path(), 0);
        s.cap = 1000; // many small runs
        let mut want = Vec::new();
        let mut x = 7u64;
        for _ in 0..10_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let q = [(x >> 40) % 50, (x >> 20) % 3, (x >> 30) % 40, (x >> 10) % 2];
            want.push(q);
            s.push(q).unwrap();
        }
        assert!(s.runs() >= 9);
        want.sort_unstable();
        want.dedup();
        let mut got = Vec::new();
        let n = s
            .finish(&mut |q| {
                got.push(q);
                Ok(())
            })
            .unwrap();
        assert_eq!(n as usize, want.len());
        assert_eq!(got, want);
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0, "run files removed");
    }
}
