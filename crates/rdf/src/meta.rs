//! `rdf.meta`: what names the current generation of an RDF store: its
//! dictionary file `dict.<gen>` and quad store `quads.<gen>/`, their
//! counts, and the label table (label i of an edge = the (graph,
//! predicate) pair `pairs[i]`). Replaced whole by an atomic rename, which
//! is how a compaction commits.

use std::path::{Path, PathBuf};

use crate::error::{Result, corrupt, io_err};

const MAGIC: &[u8; 8] = b"SGRDFMET";
const VERSION: u32 = 1;
pub const FILE: &str = "rdf.meta";
/// Labels are u32 in the page store.
pub const MAX_PAIRS: usize = u32::MAX as usize;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Meta {
    pub generation: u64,
    /// Terms in `dict.<gen>`.
    pub terms: u64,
    /// Distinct quads in `quads.<gen>`.
    pub quads: u64,
    /// (graph id, predicate id) per label; graph 0 is the default graph.
    pub pairs: Vec<(u64, u64)>,
}

impl Meta {
    pub fn dict_path(&self, dir: &Path) -> PathBuf {
        dir.join(format!("dict.{}", self.generation))
    }

    pub fn quads_path(&self, dir: &Path) -> PathBuf {
        dir.join(format!("quads.{}", self.generation))
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(48 + self.pairs.len() * 16);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&VERSION.to_le_bytes());
        for x in [self.generation, self.terms, self.quads, self.pairs.len() as u64] {
            b.extend_from_slice(&x.to_le_bytes());
        }
        for &(g, p) in &self.pairs {
            b.extend_from_slice(&g.to_le_bytes());
            b.extend_from_slice(&p.to_le_bytes());
        }
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// Writes `dir/rdf.meta` atomically (temporary file, sync, rename, sync the directory).
    pub fn write(&self, dir: &Path) -> Result<()> {
        let tmp = dir.join("rdf.meta.tmp");
        let f = std::fs::File::create(&tmp).map_err(io_err(&tmp))?;
        std::io::Write::write_all(&mut &f, &self.encode()).map_err(io_err(&tmp))?;
        f.sync_all().map_err(io_err(&tmp))?;
        let path = dir.join(FILE);
        std::fs::rename(&tmp, &path).map_err(io_err(&path))?;
        sync_dir(dir)
    }

    pub fn read(dir: &Path) -> Result<Meta> {
        let path = dir.join(FILE);
        let b = std::fs::read(&path).map_err(io_err(&path))?;
        let bad = |why: &str| corrupt(&path, why.to_string());
        if b.len() < 48 || &b[..8] != MAGIC {
            return Err(bad("not an RDF store's meta file"));
        }
        let (body, crc) = b.split_at(b.len() - 4);
        if crc32c::crc32c(body) != u32::from_le_bytes(crc.try_into().expect("4")) {
            return Err(bad("checksum mismatch"));
        }
        let version = u32::from_le_bytes(b[8..12].try_into().expect("4"));
        if version != VERSION {
            return Err(bad(&format!("version {version}, this build reads {VERSION}")));
        }
        let word = |i: usize| u64::from_le_bytes(body[i..i + 8].try_into().expect("8"));
        let n = word(36) as usize;
        // Checked: a damaged count whose 16 bytes a pair wrap around could
        // match the length and then size the pairs' vector.
        if n.checked_mul(16).and_then(|b| b.checked_add(44)) != Some(body.len()) {
            return Err(bad("length does not match its label count"));
        }
        let pairs = (0..n).map(|i| (word(44 + 16 * i), word(52 + 16 * i))).collect();
        Ok(Meta { generation: word(12), terms: word(20), quads: word(28), pairs })
    }
}

pub fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir).and_then(|f| f.sync_all()).map_err(io_err(dir))
}
