//! The term dictionary: dense ids from 1 (0 is "no term": the default
//! graph), bytes of each term in an arena, a hash map back. On disk
//! (`dict.<generation>`): a header, then blocks of terms, each block
//! checksummed; terms added by updates since the last compaction live only
//! in memory (the update log holds them) and take the next ids.

use std::io::{BufWriter, Read, Write};
use std::path::Path;

use rustc_hash::FxHashMap;

use crate::error::{Result, corrupt, io_err};

const MAGIC: &[u8; 8] = b"SGRDFDIC";
const VERSION: u32 = 1;
/// Terms are written in blocks of about this many bytes, each with its CRC.
const BLOCK: usize = 64 << 10;
/// A term longer than this is refused: a limit on everything.
pub const MAX_TERM: usize = 1 << 26;

#[derive(Default, Clone)]
pub struct Dict {
    arena: Vec<u8>,
    /// `ends[i]`: end of term `i + 1` in the arena.
    ends: Vec<u64>,
    map: FxHashMap<Box<[u8]>, u64>,
    /// Terms up to this id are in the dictionary file.
    pub on_disk: u64,
}

impl Dict {
    pub fn len(&self) -> u64 {
        self.ends.len() as u64
    }

    pub fn get(&self, bytes: &[u8]) -> Option<u64> {
        self.map.get(bytes).copied()
    }

    /// The id of `bytes`, added if new.
    pub fn intern(&mut self, bytes: &[u8]) -> u64 {
        if let Some(&id) = self.map.get(bytes) {
            return id;
        }
        self.arena.extend_from_slice(bytes);
        self.ends.push(self.arena.len() as u64);
        let id = self.ends.len() as u64;
        self.map.insert(bytes.into(), id);
        id
    }

    /// The bytes of term `id` (1-based).
    pub fn bytes(&self, id: u64) -> Option<&[u8]> {
        let i = usize::try_from(id.checked_sub(1)?).ok()?;
        let end = *self.ends.get(i)? as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        Some(&self.arena[start..end])
    }

    /// Writes every term to `path`, synced.
    pub fn write(&self, path: &Path) -> Result<()> {
        let f = std::fs::File::create(path).map_err(io_err(path))?;
        let mut w = BufWriter::with_capacity(1 << 20, f);
        let mut head = Vec::with_capacity(32);
        head.extend_from_slice(MAGIC);
        head.extend_from_slice(&VERSION.to_le_bytes());
        head.extend_from_slice(&self.len().to_le_bytes());
        let crc = crc32c::crc32c(&head);
        head.extend_from_slice(&crc.to_le_bytes());
        w.write_all(&head).map_err(io_err(path))?;
        let mut block = Vec::with_capacity(BLOCK + 64);
        let mut n = 0u32;
        for id in 1..=self.len() {
            let b = self.bytes(id).expect("id in range");
            block.extend_from_slice(&(b.len() as u32).to_le_bytes());
            block.extend_from_slice(b);
            n += 1;
            if block.len() >= BLOCK || id == self.len() {
                write_block(&mut w, &block, n).map_err(io_err(path))?;
                block.clear();
                n = 0;
            }
        }
        let f = w.into_inner().map_err(|e| io_err(path)(e.into_error()))?;
        f.sync_all().map_err(io_err(path))
    }

    /// Reads a dictionary file, checking every block.
    pub fn read(path: &Path) -> Result<Dict> {
        let mut data = Vec::new();
        std::fs::File::open(path).map_err(io_err(path))?.read_to_end(&mut data).map_err(io_err(path))?;
        if data.len() < 24 || &data[..8] != MAGIC {
            return Err(corrupt(path, "not a dictionary file"));
        }
        let crc = u32::from_le_bytes(data[20..24].try_into().expect("4"));
        if crc32c::crc32c(&data[..20]) != crc {
            return Err(corrupt(path, "header checksum mismatch"));
        }
        let version = u32::from_le_bytes(data[8..12].try_into().expect("4"));
        if version != VERSION {
            return Err(corrupt(path, format!("dictionary version {version}, this build reads {VERSION}")));
        }
        let count = u64::from_le_bytes(data[12..20].try_into().expect("8"));
        let mut d = Dict::default();
        d.ends.reserve(count as usize);
        let mut pos = 24;
        while (d.len()) < count {
            if data.len() < pos + 12 {
                return Err(corrupt(path, format!("truncated at byte {pos}")));
            }
            let crc = u32::from_le_bytes(data[pos..pos + 4].try_into().expect("4"));
            let len = u32::from_le_bytes(data[pos + 4..pos + 8].try_into().expect("4")) as usize;
            let n = u32::from_le_bytes(data[pos + 8..pos + 12].try_into().expect("4"));
            let end = pos + 12 + len;
            if data.len() < end || crc32c::crc32c(&data[pos + 4..end]) != crc {
                return Err(corrupt(path, format!("block at byte {pos} fails its checksum")));
            }
            let mut p = pos + 12;
            for _ in 0..n {
                if p + 4 > end {
                    return Err(corrupt(path, format!("block at byte {pos} is malformed")));
                }
                let l = u32::from_le_bytes(data[p..p + 4].try_into().expect("4")) as usize;
                if p + 4 + l > end {
                    return Err(corrupt(path, format!("block at byte {pos} is malformed")));
                }
                let before = d.len();
                if d.intern(&data[p + 4..p + 4 + l]) != before + 1 {
                    return Err(corrupt(path, format!("term repeated in block at byte {pos}")));
                }
                p += 4 + l;
            }
            pos = end;
        }
        d.on_disk = count;
        Ok(d)
    }
}

fn write_block(w: &mut impl Write, payload: &[u8], n: u32) -> std::io::Result<()> {
    let mut h = Vec::with_capacity(8);
    h.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    h.extend_from_slice(&n.to_le_bytes());
    let mut c = crc32c::crc32c(&h);
    c = crc32c::crc32c_append(c, payload);
    w.write_all(&c.to_le_bytes())?;
    w.write_all(&h)?;
    w.write_all(payload)
}
