//! The term dictionary: dense ids from 1 (0 is "no term": the default
//! graph). The terms of the last compaction (or bulk load) are in the
//! paged file `dict.<generation>` ([`DictFile`], read on demand through a
//! cache); terms added by updates since live in memory (the update log
//! holds them) and take the next ids. A bulk load builds the whole
//! dictionary in memory and writes it with [`DictWriter`].

use std::path::Path;
use std::sync::Arc;

use rustc_hash::FxHashMap;
use solidgraph_io::BackendChoice;

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
    /// The inlined values among the terms in memory, both ways (the
    /// file's are in its inline pages).
    inline_of: FxHashMap<u64, u64>,
    id_of: FxHashMap<u64, u64>,
}

impl Dict {
    /// Opens `dict.<gen>` with a page cache of `cache_bytes`.
    pub fn open(path: &Path, cache_bytes: u64) -> Result<Dict> {
        Dict::open_on(path, cache_bytes, BackendChoice::Auto)
    }

    /// [`Dict::open`] with the file's pages read through `backend`.
    pub fn open_on(path: &Path, cache_bytes: u64, backend: BackendChoice) -> Result<Dict> {
        let f = DictFile::open_on(path, cache_bytes, backend)?;
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
        Ok(terms.iter().zip(found).map(|(t, id)| id.unwrap_or_else(|| self.add(t, true))).collect())
    }

    /// Adds a term known to be new (or repeated within a batch: the map
    /// catches that); `inline`: records it if it is an inlined value (a
    /// bulk load's dictionary does not: its writer does).
    fn add(&mut self, bytes: &[u8], inline: bool) -> u64 {
        if let Some(&id) = self.map.get(bytes) {
            return id;
        }
        self.arena.extend_from_slice(bytes);
        self.ends.push(self.arena.len() as u64);
        let id = self.len();
        assert!(id < crate::inline::INLINE, "term ids stay below the inlined ids' tag bit");
        self.map.insert(bytes.into(), id);
        if let Some(v) = crate::inline::encode_bytes(bytes).filter(|_| inline) {
            self.inline_of.insert(id, v);
            self.id_of.insert(v, id);
        }
        id
    }

    /// In a dictionary with no file (a bulk load's): the id of `bytes`, added if new.
    pub fn intern_mem(&mut self, bytes: &[u8]) -> u64 {
        debug_assert!(self.file.is_none());
        self.add(bytes, false)
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
        file.count_reads(disk.len());
        file.terms(&disk, &mut |k, b| f(at[k], b))
    }

    /// Replaces each term id in `ids` that is an inlined value by its
    /// inlined id (see inline.rs), with no term read (the file's inline
    /// pages for all of them in one batch); other ids stay.
    pub fn to_query_ids(&self, ids: &mut [u64]) -> Result<()> {
        if let Some(f) = &self.file {
            // Ids past the file's (terms added since) are left alone.
            f.to_inline(ids)?;
        }
        if !self.inline_of.is_empty() {
            for id in ids.iter_mut().filter(|id| **id > self.on_disk) {
                if let Some(&v) = self.inline_of.get(id) {
                    *id = v;
                }
            }
        }
        Ok(())
    }

    /// The term id of each inlined value of `vs`, `None` where no term has
    /// it; the file's pages for all of them are read in one batch.
    pub fn ids_of_inline(&self, vs: &[u64]) -> Result<Vec<Option<u64>>> {
        let mut out: Vec<Option<u64>> = vs.iter().map(|v| self.id_of.get(v).copied()).collect();
        if let Some(f) = self.file.as_ref().filter(|f| f.has_inline()) {
            let ask: Vec<usize> = (0..vs.len()).filter(|&i| out[i].is_none()).collect();
            if !ask.is_empty() {
                let found = f.ids_of_inline(&ask.iter().map(|&i| vs[i]).collect::<Vec<_>>())?;
                for (i, id) in ask.into_iter().zip(found) {
                    out[i] = id;
                }
            }
        }
        Ok(out)
    }

    /// Terms decoded (id -> term) from the file since it was opened.
    pub fn term_reads(&self) -> u64 {
        self.file.as_ref().map_or(0, |f| f.term_reads())
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

/// Converts a version 1 dictionary file (terms in blocks, read whole), a
/// version 2 one (paged, no inline pages) or a version 3 one (inline pages
/// not in the directory) to the current format, in place: the new file is
/// written beside it and renamed over it. Returns whether it converted anything.
pub fn upgrade(path: &Path) -> Result<bool> {
    let v = dictfile::version(path)?;
    if v == dictfile::VERSION {
        return Ok(false);
    }
    let tmp = path.with_extension("up.tmp");
    let mut w = DictWriter::create(&tmp)?;
    if v == dictfile::VERSION_INLINE_UNLISTED {
        DictFile::open(path, 8 << 20)?.scan(&mut |t| w.push(t).map(|_| ()))?;
    } else if v == dictfile::VERSION_NO_INLINE {
        DictFile::open_old(path, 8 << 20)?.scan(&mut |t| w.push(t).map(|_| ()))?;
    } else {
        read_v1(path, &mut |t| w.push(t).map(|_| ()))?;
    }
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
