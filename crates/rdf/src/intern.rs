//! Term interning for the bulk load within a memory budget. Ids are dense
//! from 1 in first-occurrence order (a subject's terms get nearby ids, so
//! its star and its result terms share pages), whatever the budget.
//!
//! Terms are interned in an in-memory map until the map reaches three
//! quarters of the budget; the map is then frozen (its terms keep their ids
//! 1..=K). A quad with a term the map lacks goes to a pending file with
//! that slot unknown, and the term to one of P partition files by hash,
//! tagged with its position (pending quad * 4 + slot). A small cache (the
//! last quarter of the budget, emptied when full) turns a repeat of a
//! recent term into a reference to its earlier record. At the end, each
//! partition alone is read into memory and gives each distinct term a
//! local rank in first-occurrence order; a merge of the partitions by
//! first position hands the terms to the dictionary writer (ids K+1.. in
//! first-occurrence order: the ids an unbounded map would give); each
//! partition's (position, id) pairs are written out, and a merge of them by
//! position fills the pending quads in order. Memory: the budget, or one
//! partition's distinct terms, plus one read buffer per partition; at the
//! end the late cache's share goes to the dictionary writer's (hash, id)
//! pairs, sorted in runs beyond it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::hash::BuildHasher;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use rustc_hash::{FxBuildHasher, FxHashMap};

use crate::dict::Dict;
use crate::dictfile::DictWriter;
use crate::error::{RdfError, Result, io_err};
use crate::state::Ids;

/// Partition files at most (each open with a write buffer while parsing).
const MAX_PARTS: usize = 256;
/// Partition files at least, once the map is frozen.
const MIN_PARTS: usize = 4;
/// Bytes a map entry costs beyond its term's bytes (arena offset, key box,
/// id, hash table slot), an estimate that errs high.
const ENTRY: u64 = 64;
/// A slot whose id is not known until the end.
const UNKNOWN: u64 = u64::MAX;
/// Record kinds in a partition file.
const FULL: u8 = 0;
const REF: u8 = 1;

/// Positions (pending quad * 4 + slot) are below this.
const MAX_POS: u64 = 1 << 62;

pub struct Interner {
    dir: PathBuf,
    /// Bytes for the map (three quarters) and the late cache (a quarter).
    budget: u64,
    /// Input bytes: sets the number of partitions.
    input: u64,
    dict: Dict,
    mem: u64,
    spill: Option<Spill>,
}

/// The state once the map is frozen.
struct Spill {
    parts: Vec<BufWriter<File>>,
    part_paths: Vec<PathBuf>,
    pending: BufWriter<File>,
    pending_path: PathBuf,
    /// Pending quads so far.
    n: u64,
    /// Recent terms not in the frozen map: their first record's position.
    late: FxHashMap<Box<[u8]>, u64>,
    late_mem: u64,
}

impl Interner {
    /// Temporary files go to `dir`; `budget` bounds the map's bytes;
    /// `input_bytes` is the size of the input (sets the partitions).
    pub fn new(dir: &Path, budget: u64, input_bytes: u64) -> Interner {
        Interner { dir: dir.to_path_buf(), budget, input: input_bytes, dict: Dict::default(), mem: 0, spill: None }
    }

    /// Interns the four terms of a quad (graph: empty for the default
    /// graph, id 0) in order s, p, o, g; hands the quad to `f` now if
    /// every id is known, else at [`Interner::finish`].
    pub fn push(&mut self, terms: &[&[u8]; 4], f: &mut dyn FnMut(Ids) -> Result<()>) -> Result<()> {
        let mut ids = [0u64; 4];
        for (slot, t) in terms.iter().enumerate() {
            if slot == 3 && t.is_empty() {
                break;
            }
            ids[slot] = self.id(t)?;
        }
        if !ids.contains(&UNKNOWN) {
            return f(ids);
        }
        let s = self.spill.as_mut().expect("an unknown id only after the freeze");
        let at = s.n.checked_mul(4).filter(|&p| p < MAX_POS).ok_or_else(|| RdfError::Invalid("too many quads for one load".into()))?;
        for (slot, t) in terms.iter().enumerate() {
            if ids[slot] == UNKNOWN {
                s.record(at + slot as u64, t, self.budget / 4)?;
            }
        }
        let mut b = [0u8; 32];
        for (i, x) in ids.iter().enumerate() {
            b[i * 8..i * 8 + 8].copy_from_slice(&x.to_le_bytes());
        }
        s.pending.write_all(&b).map_err(io_err(&s.pending_path))?;
        s.n += 1;
        Ok(())
    }

    /// The term's id from the map, adding it while the map has room;
    /// [`UNKNOWN`] once frozen for a term it lacks.
    fn id(&mut self, t: &[u8]) -> Result<u64> {
        if let Some(id) = self.dict.get_mem(t) {
            return Ok(id);
        }
        if self.spill.is_some() {
            return Ok(UNKNOWN);
        }
        let cost = 2 * t.len() as u64 + ENTRY;
        if self.mem + cost > self.budget / 4 * 3 {
            self.freeze()?;
            return Ok(UNKNOWN);
        }
        self.mem += cost;
        Ok(self.dict.intern_mem(t))
    }

    fn freeze(&mut self) -> Result<()> {
        let parts_n = (self.input.saturating_mul(4) / self.budget.max(1)).clamp(MIN_PARTS as u64, MAX_PARTS as u64) as usize;
        let mut parts = Vec::with_capacity(parts_n);
        let mut part_paths = Vec::with_capacity(parts_n);
        let buf = ((self.budget / 4) / parts_n as u64).clamp(4096, 1 << 20) as usize;
        for i in 0..parts_n {
            let p = self.dir.join(format!("terms.part{i}.tmp"));
            parts.push(BufWriter::with_capacity(buf, File::create(&p).map_err(io_err(&p))?));
            part_paths.push(p);
        }
        let pending_path = self.dir.join("quads.pending.tmp");
        let pending = BufWriter::with_capacity(1 << 20, File::create(&pending_path).map_err(io_err(&pending_path))?);
        self.spill = Some(Spill { parts, part_paths, pending, pending_path, n: 0, late: FxHashMap::default(), late_mem: 0 });
        Ok(())
    }

    /// Writes the dictionary to `dict_path` and hands every pending quad
    /// to `f`, in order; returns the number of terms. Removes its files.
    pub fn finish(mut self, dict_path: &Path, f: &mut dyn FnMut(Ids) -> Result<()>) -> Result<u64> {
        // The late cache's share of the budget goes to the writer's
        // (hash, id) pairs, which it sorts in runs beyond that.
        if let Some(s) = self.spill.as_mut() {
            s.late = FxHashMap::default();
            s.late_mem = 0;
        }
        let mut w = DictWriter::with_budget(dict_path, self.budget / 4)?;
        let frozen = self.dict.len();
        self.dict.write_to(&mut w)?;
        drop(self.dict);
        let Some(s) = self.spill else {
            w.finish()?;
            return Ok(frozen);
        };
        let res = s.finish(&mut w, frozen, f);
        cleanup(&self.dir);
        let terms = res?;
        w.finish()?;
        Ok(terms)
    }
}

/// Removes the interner's temporary files from `dir` (also after an error).
fn cleanup(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("terms.") || name.starts_with("quads.pending") {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

impl Spill {
    /// Writes the record of the term at `pos`: a reference to an earlier
    /// record of the same term when the late cache has it.
    fn record(&mut self, pos: u64, t: &[u8], late_budget: u64) -> Result<()> {
        let p = (FxBuildHasher.hash_one(t) % self.parts.len() as u64) as usize;
        let (w, path) = (&mut self.parts[p], &self.part_paths[p]);
        if let Some(&first) = self.late.get(t) {
            let mut b = [0u8; 17];
            b[0] = REF;
            b[1..9].copy_from_slice(&pos.to_le_bytes());
            b[9..17].copy_from_slice(&first.to_le_bytes());
            return w.write_all(&b).map_err(io_err(path));
        }
        let mut b = [0u8; 13];
        b[0] = FULL;
        b[1..9].copy_from_slice(&pos.to_le_bytes());
        b[9..13].copy_from_slice(&(t.len() as u32).to_le_bytes());
        w.write_all(&b).and_then(|()| w.write_all(t)).map_err(io_err(path))?;
        let cost = t.len() as u64 + ENTRY;
        if self.late_mem + cost > late_budget {
            self.late.clear();
            self.late_mem = 0;
        }
        if cost <= late_budget {
            self.late.insert(t.into(), pos);
            self.late_mem += cost;
        }
        Ok(())
    }

    fn finish(mut self, w: &mut DictWriter, frozen: u64, f: &mut dyn FnMut(Ids) -> Result<()>) -> Result<u64> {
        self.late = FxHashMap::default();
        for (p, path) in self.parts.iter_mut().zip(&self.part_paths) {
            p.flush().map_err(io_err(path))?;
        }
        self.pending.flush().map_err(io_err(&self.pending_path))?;
        let parts = std::mem::take(&mut self.parts);
        drop(parts);
        // Each partition: distinct terms by first position, and every
        // record's (position, local rank).
        let mut counts = Vec::with_capacity(self.part_paths.len());
        for path in &self.part_paths {
            counts.push(rank_partition(path)?);
            std::fs::remove_file(path).map_err(io_err(path))?;
        }
        // Ids K+1.. in first-occurrence order over all partitions.
        let mut next = frozen;
        merge_terms(&self.part_paths, &mut |t| {
            next = w.push(t)?;
            Ok(next)
        })?;
        // Each partition's (position, id) pairs, then all of them by position.
        for (path, &n) in self.part_paths.iter().zip(&counts) {
            resolve_partition(path, n)?;
        }
        fill_pending(&self.pending_path, &self.part_paths, self.n, f)?;
        Ok(next)
    }
}

fn with_ext(path: &Path, ext: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(ext);
    PathBuf::from(s)
}

fn read_u64(r: &mut impl Read, path: &Path) -> Result<Option<u64>> {
    let mut b = [0u8; 8];
    match r.read_exact(&mut b) {
        Ok(()) => Ok(Some(u64::from_le_bytes(b))),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(io_err(path)(e)),
    }
}

fn reader(path: &Path) -> Result<BufReader<File>> {
    Ok(BufReader::with_capacity(1 << 16, File::open(path).map_err(io_err(path))?))
}

fn writer(path: &Path) -> Result<BufWriter<File>> {
    Ok(BufWriter::with_capacity(1 << 16, File::create(path).map_err(io_err(path))?))
}

/// Reads partition `path` (records in position order) and writes
/// `<path>.terms` (first position, term) per distinct term in
/// first-occurrence order and `<path>.refs` (position, local rank) per
/// record; returns the distinct terms.
fn rank_partition(path: &Path) -> Result<u64> {
    let mut r = reader(path)?;
    let (terms_path, refs_path) = (with_ext(path, ".terms"), with_ext(path, ".refs"));
    let (mut tw, mut rw) = (writer(&terms_path)?, writer(&refs_path)?);
    let mut ranks: FxHashMap<Box<[u8]>, u64> = FxHashMap::default();
    // A FULL record's position -> its rank, for the REF records after it.
    let mut at_pos: FxHashMap<u64, u64> = FxHashMap::default();
    let bad = |what: &str| RdfError::Invalid(format!("{}: damaged temporary file ({what})", path.display()));
    let mut kind = [0u8; 1];
    loop {
        match r.read_exact(&mut kind) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(io_err(path)(e)),
        }
        let pos = read_u64(&mut r, path)?.ok_or_else(|| bad("cut record"))?;
        let rank = if kind[0] == REF {
            let first = read_u64(&mut r, path)?.ok_or_else(|| bad("cut record"))?;
            *at_pos.get(&first).ok_or_else(|| bad("reference before its term"))?
        } else {
            let mut len = [0u8; 4];
            r.read_exact(&mut len).map_err(io_err(path))?;
            let mut t = vec![0u8; u32::from_le_bytes(len) as usize];
            r.read_exact(&mut t).map_err(io_err(path))?;
            let n = ranks.len() as u64;
            let rank = *ranks.entry(t.clone().into_boxed_slice()).or_insert(n);
            if rank == n {
                tw.write_all(&pos.to_le_bytes()).map_err(io_err(&terms_path))?;
                tw.write_all(&(t.len() as u32).to_le_bytes()).map_err(io_err(&terms_path))?;
                tw.write_all(&t).map_err(io_err(&terms_path))?;
            }
            at_pos.insert(pos, rank);
            rank
        };
        rw.write_all(&pos.to_le_bytes()).and_then(|()| rw.write_all(&rank.to_le_bytes())).map_err(io_err(&refs_path))?;
    }
    tw.flush().map_err(io_err(&terms_path))?;
    rw.flush().map_err(io_err(&refs_path))?;
    Ok(ranks.len() as u64)
}

/// Merges the partitions' `.terms` files by first position, handing each
/// term to `f` in that order; writes `<part>.ids`: the id `f` returns for
/// each of the partition's terms, in local rank order.
fn merge_terms(parts: &[PathBuf], f: &mut dyn FnMut(&[u8]) -> Result<u64>) -> Result<()> {
    let mut readers = Vec::with_capacity(parts.len());
    let mut ids = Vec::with_capacity(parts.len());
    for p in parts {
        readers.push(reader(&with_ext(p, ".terms"))?);
        ids.push(writer(&with_ext(p, ".ids"))?);
    }
    let mut heap = BinaryHeap::new();
    for (i, r) in readers.iter_mut().enumerate() {
        if let Some(pos) = read_u64(r, &parts[i])? {
            heap.push(Reverse((pos, i)));
        }
    }
    let mut t = Vec::new();
    while let Some(Reverse((_, i))) = heap.pop() {
        let path = with_ext(&parts[i], ".terms");
        let r = &mut readers[i];
        let mut len = [0u8; 4];
        r.read_exact(&mut len).map_err(io_err(&path))?;
        t.resize(u32::from_le_bytes(len) as usize, 0);
        r.read_exact(&mut t).map_err(io_err(&path))?;
        let id = f(&t)?;
        ids[i].write_all(&id.to_le_bytes()).map_err(io_err(&parts[i]))?;
        if let Some(pos) = read_u64(r, &path)? {
            heap.push(Reverse((pos, i)));
        }
    }
    for (w, p) in ids.iter_mut().zip(parts) {
        w.flush().map_err(io_err(p))?;
    }
    for p in parts {
        let _ = std::fs::remove_file(with_ext(p, ".terms"));
    }
    Ok(())
}

/// Rewrites `<part>.refs` (position, local rank) as `<part>.pos`
/// (position, id): the partition's `n` ids are read into memory.
fn resolve_partition(part: &Path, n: u64) -> Result<()> {
    let ids_path = with_ext(part, ".ids");
    let mut r = reader(&ids_path)?;
    let mut ids = Vec::with_capacity(n as usize);
    while let Some(x) = read_u64(&mut r, &ids_path)? {
        ids.push(x);
    }
    if ids.len() as u64 != n {
        return Err(RdfError::Invalid(format!("{}: {} ids for {n} terms", ids_path.display(), ids.len())));
    }
    let (refs_path, pos_path) = (with_ext(part, ".refs"), with_ext(part, ".pos"));
    let mut r = reader(&refs_path)?;
    let mut w = writer(&pos_path)?;
    while let Some(pos) = read_u64(&mut r, &refs_path)? {
        let rank = read_u64(&mut r, &refs_path)?.ok_or_else(|| RdfError::Invalid(format!("{}: cut record", refs_path.display())))?;
        let id = *ids.get(rank as usize).ok_or_else(|| RdfError::Invalid(format!("{}: rank {rank} of {n}", refs_path.display())))?;
        w.write_all(&pos.to_le_bytes()).and_then(|()| w.write_all(&id.to_le_bytes())).map_err(io_err(&pos_path))?;
    }
    w.flush().map_err(io_err(&pos_path))?;
    let _ = std::fs::remove_file(&refs_path);
    let _ = std::fs::remove_file(&ids_path);
    Ok(())
}

/// Fills the unknown slots of the `n` pending quads from the partitions'
/// `.pos` files merged by position, handing each quad to `f` in order.
fn fill_pending(pending: &Path, parts: &[PathBuf], n: u64, f: &mut dyn FnMut(Ids) -> Result<()>) -> Result<()> {
    let mut readers = Vec::with_capacity(parts.len());
    for p in parts {
        readers.push((reader(&with_ext(p, ".pos"))?, with_ext(p, ".pos")));
    }
    let mut heap = BinaryHeap::new();
    let next = |r: &mut (BufReader<File>, PathBuf)| -> Result<Option<(u64, u64)>> {
        let Some(pos) = read_u64(&mut r.0, &r.1)? else { return Ok(None) };
        let id = read_u64(&mut r.0, &r.1)?.ok_or_else(|| RdfError::Invalid(format!("{}: cut record", r.1.display())))?;
        Ok(Some((pos, id)))
    };
    for (i, r) in readers.iter_mut().enumerate() {
        if let Some((pos, id)) = next(r)? {
            heap.push(Reverse((pos, id, i)));
        }
    }
    let mut r = reader(pending)?;
    let mut b = [0u8; 32];
    for k in 0..n {
        r.read_exact(&mut b).map_err(io_err(pending))?;
        let mut q: Ids = std::array::from_fn(|i| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes")));
        for (slot, x) in q.iter_mut().enumerate() {
            if *x != UNKNOWN {
                continue;
            }
            let Some(Reverse((pos, id, i))) = heap.pop() else {
                return Err(RdfError::Invalid(format!("{}: quad {k} has no id for slot {slot}", pending.display())));
            };
            if pos != k * 4 + slot as u64 {
                return Err(RdfError::Invalid(format!("{}: quad {k} slot {slot} got position {pos}", pending.display())));
            }
            *x = id;
            if let Some((pos, id)) = next(&mut readers[i])? {
                heap.push(Reverse((pos, id, i)));
            }
        }
        f(q)?;
    }
    if !heap.is_empty() {
        return Err(RdfError::Invalid(format!("{}: ids left over after {n} quads", pending.display())));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Quads of terms with repeats near and far apart, a default and a
    /// named graph.
    fn quads() -> Vec<[Vec<u8>; 4]> {
        let mut x = 99u64;
        let mut next = move |m: u64| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        (0..5000u64)
            .map(|i| {
                let g = if next(3) == 0 { format!("g{}", next(4)).into_bytes() } else { Vec::new() };
                [format!("s{}", i / 4).into_bytes(), format!("p{}", next(9)).into_bytes(), format!("o{}", next(3000)).into_bytes(), g]
            })
            .collect()
    }

    fn run(dir: &Path, budget: u64) -> (Vec<u8>, Vec<Ids>, u64) {
        let mut it = Interner::new(dir, budget, 100_000);
        let mut out = Vec::new();
        for q in quads() {
            it.push(&[&q[0], &q[1], &q[2], &q[3]], &mut |ids| {
                out.push(ids);
                Ok(())
            })
            .unwrap();
        }
        let spilled = it.spill.is_some();
        assert_eq!(spilled, budget < 1 << 20, "budget {budget}");
        let path = dir.join(format!("dict.{budget}"));
        let terms = it
            .finish(&path, &mut |ids| {
                out.push(ids);
                Ok(())
            })
            .unwrap();
        out.sort_unstable();
        (std::fs::read(&path).unwrap(), out, terms)
    }

    #[test]
    fn ids_do_not_depend_on_the_budget() {
        let tmp = tempfile::tempdir().unwrap();
        let (dict, ids, terms) = run(tmp.path(), 1 << 30);
        assert_eq!(ids.len(), 5000);
        for budget in [0, 300, 4096, 64 << 10] {
            let (d, i, t) = run(tmp.path(), budget);
            assert_eq!(t, terms, "budget {budget}");
            assert!(d == dict, "budget {budget}: dictionary files differ");
            assert_eq!(i, ids, "budget {budget}");
        }
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).filter(|n| n.to_string_lossy().ends_with(".tmp")).collect();
        assert!(left.is_empty(), "{left:?}");
    }
}
