//! The term dictionary: dense ids from 1 (0 is "no term": the default
//! graph). The terms of the last compaction (or bulk load) are in the
//! paged file `dict.<generation>` ([`DictFile`], read on demand through a
//! cache); terms added by updates since live in memory (the update log
//! holds them) and take the next ids. A bulk load builds the whole
//! dictionary in memory and writes it with [`DictWriter`].

use std::path::Path;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::dictfile::{self, DictFile, DictWriter};
use crate::error::{RdfError, Result};

/// A term longer than this is refused: a limit on everything.
pub const MAX_TERM: usize = 1 << 26;

#[derive(Default, Clone)]
pub struct Dict {
    file: Option<Arc<DictFile>>,
    /// Terms in the file: ids 1..=on_disk.
    pub on_disk: u64,
    /// Terms added since, ids from `on_disk + 1`.
    arena: Vec<u8>,
    /// `ends[i]`: end of term `on_disk + i + 1` in the arena.
    ends: Vec<u64>,
    map: FxHashMap<Box<[u8]>, u64>,
}

impl Dict {
    /// Opens `dict.<gen>` with a page cache of `cache_bytes`.
    pub fn open(path: &Path, cache_bytes: u64) -> Result<Dict> {
        let f = DictFile::open(path, cache_bytes)?;
        Ok(Dict { on_disk: f.len(), file: Some(Arc::new(f)), ..Dict::default() })
    }

    pub fn len(&self) -> u64 {
        self.on_disk + self.ends.len() as u64
    }

    /// The id of each term, `None` for terms not in the dictionary; the
    /// file's pages for all of them are read in one batch.
    pub fn get_many(&self, terms: &[&[u8]]) -> Result<Vec<Option<u64>>> {
        let mut out: Vec<Option<u64>> = terms.iter().map(|t| self.map.get(*t).copied()).collect();
        if let Some(f) = &self.file {
            let ask: Vec<usize> = (0..terms.len()).filter(|&i| out[i].is_none()).collect();
            if !ask.is_empty() {
                let q: Vec<&[u8]> = ask.iter().map(|&i| terms[i]).collect();
                for (i, id) in ask.into_iter().zip(f.lookup(&q)?) {
                    out[i] = id;
                }
            }
        }
        Ok(out)
    }

    pub fn get(&self, bytes: &[u8]) -> Result<Option<u64>> {
        Ok(self.get_many(&[bytes])?[0])
    }

    /// The ids of `terms`, adding the new ones (in memory), in one lookup.
    pub fn intern_many(&mut self, terms: &[&[u8]]) -> Result<Vec<u64>> {
        let found = self.get_many(terms)?;
        Ok(terms.iter().zip(found).map(|(t, id)| id.unwrap_or_else(|| self.add(t))).collect())
    }

    /// Adds a term known to be new (or repeated within a batch: the map catches that).
    fn add(&mut self, bytes: &[u8]) -> u64 {
        if let Some(&id) = self.map.get(bytes) {
            return id;
        }
        self.arena.extend_from_slice(bytes);
        self.ends.push(self.arena.len() as u64);
        let id = self.len();
        self.map.insert(bytes.into(), id);
        id
    }

    /// In a dictionary with no file (a bulk load's): the id of `bytes`, added if new.
    pub fn intern_mem(&mut self, bytes: &[u8]) -> u64 {
        debug_assert!(self.file.is_none());
        self.add(bytes)
    }

    fn mem_bytes(&self, id: u64) -> Option<&[u8]> {
        let i = usize::try_from(id.checked_sub(self.on_disk + 1)?).ok()?;
        let end = *self.ends.get(i)? as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        Some(&self.arena[start..end])
    }

    /// Calls `f(i, bytes)` with the term of each `ids[i]`; the file's blocks
    /// for all of them are read in one batch.
    pub fn terms(&self, ids: &[u64], f: &mut dyn FnMut(usize, &[u8]) -> Result<()>) -> Result<()> {
        let mut disk: Vec<u64> = Vec::new();
        let mut at: Vec<usize> = Vec::new();
        for (i, &id) in ids.iter().enumerate() {
            if id > self.on_disk {
                let b = self.mem_bytes(id).ok_or_else(|| RdfError::Evaluation(format!("no term with id {id} in the dictionary")))?;
                f(i, b)?;
            } else {
                disk.push(id);
                at.push(i);
            }
        }
        if disk.is_empty() {
            return Ok(());
        }
        let file = self.file.as_ref().ok_or_else(|| RdfError::Evaluation(format!("no term with id {} in the dictionary", disk[0])))?;
        file.terms(&disk, &mut |k, b| f(at[k], b))
    }

    /// Writes every term to `path` (a new file, synced).
    pub fn write(&self, path: &Path) -> Result<()> {
        let mut w = DictWriter::create(path)?;
        self.write_to(&mut w)?;
        w.finish()
    }

    /// Pushes every term, in id order, to `w`.
    pub fn write_to(&self, w: &mut DictWriter) -> Result<()> {
        if let Some(f) = &self.file {
            f.scan(&mut |t| w.push(t).map(|_| ()))?;
        }
        for i in 0..self.ends.len() {
            let id = self.on_disk + 1 + i as u64;
            w.push(self.mem_bytes(id).expect("id in range"))?;
        }
        Ok(())
    }

    /// The id of `bytes` among the terms in memory.
    pub fn get_mem(&self, bytes: &[u8]) -> Option<u64> {
        self.map.get(bytes).copied()
    }
}

/// Converts a version 1 dictionary file (terms in blocks, read whole) to
/// the paged format, in place: the new file is written beside it and
/// renamed over it. Returns whether it converted anything.
pub fn upgrade(path: &Path) -> Result<bool> {
    if dictfile::version(path)? == dictfile::VERSION {
        return Ok(false);
    }
    let tmp = path.with_extension("v2.tmp");
    let mut w = DictWriter::create(&tmp)?;
    read_v1(path, &mut |t| w.push(t).map(|_| ()))?;
    w.finish()?;
    std::fs::rename(&tmp, path).map_err(crate::error::io_err(path))?;
    Ok(true)
}

/// Reads a version 1 file (`magic | version u32 | count u64 | crc u32`, then
/// blocks `crc u32 | len u32 | n u32 | (len u32, bytes)*`), checking every block.
fn read_v1(path: &Path, f: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()> {
    use crate::error::{corrupt, io_err};
    let data = std::fs::read(path).map_err(io_err(path))?;
    if data.len() < 24 || &data[..8] != dictfile::MAGIC {
        return Err(corrupt(path, "not a dictionary file"));
    }
    let word = |a: usize| u32::from_le_bytes(data[a..a + 4].try_into().expect("4"));
    if crc32c::crc32c(&data[..20]) != word(20) || word(8) != 1 {
        return Err(corrupt(path, "version 1 header fails its checksum"));
    }
    let count = u64::from_le_bytes(data[12..20].try_into().expect("8"));
    let (mut seen, mut pos) = (0u64, 24);
    while seen < count {
        if data.len() < pos + 12 {
            return Err(corrupt(path, format!("truncated at byte {pos}")));
        }
        let (crc, len, n) = (word(pos), word(pos + 4) as usize, word(pos + 8));
        let end = pos + 12 + len;
        if data.len() < end || crc32c::crc32c(&data[pos + 4..end]) != crc {
            return Err(corrupt(path, format!("block at byte {pos} fails its checksum")));
        }
        let mut p = pos + 12;
        for _ in 0..n {
            if p + 4 > end || word(p) as usize > end - p - 4 {
                return Err(corrupt(path, format!("block at byte {pos} is malformed")));
            }
            let l = word(p) as usize;
            f(&data[p + 4..p + 4 + l])?;
            p += 4 + l;
            seen += 1;
        }
        pos = end;
    }
    Ok(())
}
