//! The update log `rdf.wal`: one record per update, `magic u32 | length u32
//! | lsn u64 | crc32c u32 | payload`, the CRC over length, LSN and payload.
//! A payload is the update's changes in order, each an op byte (insert or
//! delete) and four terms (subject, predicate, object, graph) as
//! length-prefixed term bytes (graph length 0: the default graph). Terms
//! are logged whole, not as ids, so replay needs no dictionary state. An
//! update is acknowledged once its record is synced; at open, a torn or
//! damaged record ends the log (it was never acknowledged) and is cut off.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::{Result, io_err};

const MAGIC: u32 = 0x5244_4657; // "WFDR"
pub const FILE: &str = "rdf.wal";
/// One update's record is at most this big (a limit on everything).
pub const MAX_RECORD: usize = 1 << 30;

/// A logged change: insert (true) or delete, and the quad's term bytes.
pub type Change = (bool, [Vec<u8>; 4]);

pub struct Wal {
    file: File,
    path: PathBuf,
    next_lsn: u64,
    end: u64,
}

impl Wal {
    /// Opens (creating) the log and returns it with every record's changes.
    pub fn open(dir: &Path, writable: bool) -> Result<(Option<Wal>, Vec<Vec<Change>>)> {
        let path = dir.join(FILE);
        let mut data = Vec::new();
        match File::open(&path) {
            Ok(mut f) => {
                f.read_to_end(&mut data).map_err(io_err(&path))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&path)(e)),
        }
        let (records, end, next_lsn) = parse(&data);
        if !writable {
            return Ok((None, records));
        }
        let file = OpenOptions::new().create(true).truncate(false).read(true).write(true).open(&path).map_err(io_err(&path))?;
        if (end as usize) < data.len() {
            file.set_len(end).map_err(io_err(&path))?;
            file.sync_all().map_err(io_err(&path))?;
        }
        Ok((Some(Wal { file, path, next_lsn, end }), records))
    }

    /// Appends one update's changes and syncs: durable when it returns.
    pub fn append(&mut self, changes: &[Change]) -> Result<()> {
        let mut payload = Vec::new();
        for (ins, terms) in changes {
            payload.push(if *ins { 1 } else { 2 });
            for t in terms {
                payload.extend_from_slice(&(t.len() as u32).to_le_bytes());
                payload.extend_from_slice(t);
            }
        }
        if payload.len() > MAX_RECORD {
            return Err(crate::RdfError::Invalid(format!("an update of {} bytes exceeds the log's record limit of {MAX_RECORD}", payload.len())));
        }
        let mut rec = Vec::with_capacity(payload.len() + 20);
        rec.extend_from_slice(&MAGIC.to_le_bytes());
        let mut body = Vec::with_capacity(12);
        body.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        body.extend_from_slice(&self.next_lsn.to_le_bytes());
        let crc = crc32c::crc32c_append(crc32c::crc32c(&body), &payload);
        rec.extend_from_slice(&body);
        rec.extend_from_slice(&crc.to_le_bytes());
        rec.extend_from_slice(&payload);
        let path = &self.path;
        self.file.seek(SeekFrom::Start(self.end)).map_err(io_err(path))?;
        if let Err(e) = self.file.write_all(&rec).and_then(|_| self.file.sync_data()) {
            // Cut what may have been written so a later record does not follow garbage.
            let _ = self.file.set_len(self.end);
            return Err(io_err(path)(e));
        }
        self.end += rec.len() as u64;
        self.next_lsn += 1;
        Ok(())
    }

    /// Empties the log once its changes are in the pages (after the meta commit).
    pub fn reset(&mut self) -> Result<()> {
        self.file.set_len(0).and_then(|_| self.file.sync_all()).map_err(io_err(&self.path))?;
        self.end = 0;
        Ok(())
    }
}

/// The records of `data` up to the first bad one: changes, end offset, next LSN.
fn parse(data: &[u8]) -> (Vec<Vec<Change>>, u64, u64) {
    let mut out = Vec::new();
    let mut pos = 0usize;
    let mut lsn = 1u64;
    while data.len() >= pos + 20 {
        let word = |i: usize| u32::from_le_bytes(data[i..i + 4].try_into().expect("4"));
        if word(pos) != MAGIC {
            break;
        }
        let len = word(pos + 4) as usize;
        let rec_lsn = u64::from_le_bytes(data[pos + 8..pos + 16].try_into().expect("8"));
        let end = pos + 20 + len;
        if len > MAX_RECORD || data.len() < end || (!out.is_empty() && rec_lsn != lsn) {
            break;
        }
        let crc = crc32c::crc32c_append(crc32c::crc32c(&data[pos + 4..pos + 16]), &data[pos + 20..end]);
        if crc != word(pos + 16) {
            break;
        }
        let Some(changes) = decode(&data[pos + 20..end]) else { break };
        out.push(changes);
        lsn = rec_lsn + 1;
        pos = end;
    }
    (out, pos as u64, lsn)
}

fn decode(mut p: &[u8]) -> Option<Vec<Change>> {
    let mut out = Vec::new();
    while let Some((&op, rest)) = p.split_first() {
        p = rest;
        let mut terms: [Vec<u8>; 4] = Default::default();
        for t in &mut terms {
            let n = u32::from_le_bytes(p.get(..4)?.try_into().ok()?) as usize;
            *t = p.get(4..4 + n)?.to_vec();
            p = &p[4 + n..];
        }
        out.push((op == 1, terms));
    }
    Some(out)
}
