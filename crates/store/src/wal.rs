//! Write-ahead log: every update batch is one record, appended and made
//! durable before the batch is acknowledged.
//!
//! Record: `magic u32 | payload length u32 | lsn u64 | crc32c u32 | payload`,
//! the CRC over length, LSN and payload. LSNs are consecutive from 1.
//!
//! Group commit: a writer appends its record under the lock and then waits
//! for durability; the first waiter fdatasyncs for everyone appended so far,
//! the others find their LSN already durable.
//!
//! A merge checkpoints the log: once the superblock naming the merged pages
//! (and the checkpoint LSN) is durable, the log is cut to empty and reused;
//! LSNs go on from the checkpoint. Replay skips records at or below the
//! checkpoint, so a crash between the two steps loses nothing.
//!
//! Recovery reads records in order. The log ends at the first record that is
//! incomplete or all zeros (a torn append); a record that fails its checksum
//! with nothing valid after it is also a torn tail. A bad record followed by
//! valid data is corruption: an error naming the file and offset.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use solidgraph_io::SimDisk;
use solidgraph_io::sync::MutexExt;

use crate::error::{Result, StoreError, file_err};

const MAGIC: u32 = 0x4C57_4753; // "SGWL"
pub const HEADER: usize = 20;
/// Largest record accepted (a limit on one update batch).
pub const MAX_RECORD: usize = 256 << 20;

fn crc(len: u32, lsn: u64, payload: &[u8]) -> u32 {
    let mut h = [0u8; 12];
    h[..4].copy_from_slice(&len.to_le_bytes());
    h[4..].copy_from_slice(&lsn.to_le_bytes());
    crc32c::crc32c_append(crc32c::crc32c(&h), payload)
}

pub fn encode(lsn: u64, payload: &[u8], out: &mut Vec<u8>) {
    let len = payload.len() as u32;
    out.extend_from_slice(&MAGIC.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&lsn.to_le_bytes());
    out.extend_from_slice(&crc(len, lsn, payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// A record as read back: (lsn, payload).
pub type Record = (u64, Vec<u8>);

/// Records recovered from a log image, and the length of the valid prefix.
pub struct Recovered {
    pub records: Vec<Record>,
    pub valid_len: u64,
}

/// Parses a log image. `path` names the file in errors.
pub fn recover(bytes: &[u8], path: &Path) -> Result<Recovered> {
    let mut at = 0usize;
    let mut records = Vec::new();
    let mut expect_lsn: Option<u64> = None;
    let corrupt = |at: usize, why: &str| StoreError::BadInput { path: path.to_path_buf(), reason: format!("WAL record at offset {at}: {why}") };
    while at < bytes.len() {
        let rest = &bytes[at..];
        if rest.iter().all(|&b| b == 0) {
            break; // never-written space after a torn append
        }
        if rest.len() < HEADER {
            break; // torn header
        }
        let magic = u32::from_le_bytes(rest[0..4].try_into().expect("4"));
        let len = u32::from_le_bytes(rest[4..8].try_into().expect("4")) as usize;
        let lsn = u64::from_le_bytes(rest[8..16].try_into().expect("8"));
        let sum = u32::from_le_bytes(rest[16..20].try_into().expect("4"));
        let whole = magic == MAGIC && len <= MAX_RECORD && rest.len() >= HEADER + len;
        if whole && sum == crc(len as u32, lsn, &rest[HEADER..HEADER + len]) {
            if expect_lsn.is_some_and(|e| e != lsn) {
                return Err(corrupt(at, &format!("LSN {lsn} where {} was expected", expect_lsn.unwrap_or(0))));
            }
            records.push((lsn, rest[HEADER..HEADER + len].to_vec()));
            expect_lsn = Some(lsn + 1);
            at += HEADER + len;
            continue;
        }
        // Damaged here. A torn tail has nothing valid after it; anything
        // valid later means the damage is in the middle of the log, even
        // when the header claims more bytes than the file holds (a damaged
        // length is no torn append).
        if !valid_record_after(bytes, at + 1) {
            break;
        }
        return Err(corrupt(at, "checksum mismatch in the middle of the log; run `solidgraph verify` and restore from a copy"));
    }
    Ok(Recovered { records, valid_len: at as u64 })
}

/// The records past `checkpoint`, which must follow it without a gap: the
/// log is emptied only once a superblock names its records, so a first
/// record past `checkpoint + 1` means the superblock is older than the log
/// (its newer copy lost) and the updates between are gone; an error, not
/// an older graph.
pub fn past_checkpoint(records: Vec<Record>, checkpoint: u64, path: &Path) -> Result<Vec<Record>> {
    let pending: Vec<Record> = records.into_iter().filter(|r| r.0 > checkpoint).collect();
    if let Some(first) = pending.first()
        && first.0 != checkpoint + 1
    {
        return Err(StoreError::BadInput {
            path: path.to_path_buf(),
            reason: format!(
                "the log starts at LSN {} but the superblock's checkpoint is {checkpoint}: updates in between are lost (a damaged superblock copy?); run `solidgraph verify` and restore from a copy",
                first.0
            ),
        });
    }
    Ok(pending)
}

/// Whether a complete, checksummed record starts anywhere at or after `from`.
fn valid_record_after(bytes: &[u8], from: usize) -> bool {
    let magic = MAGIC.to_le_bytes();
    let mut i = from;
    while i + HEADER <= bytes.len() {
        if bytes[i..i + 4] == magic {
            let len = u32::from_le_bytes(bytes[i + 4..i + 8].try_into().expect("4")) as usize;
            let lsn = u64::from_le_bytes(bytes[i + 8..i + 16].try_into().expect("8"));
            let sum = u32::from_le_bytes(bytes[i + 16..i + 20].try_into().expect("4"));
            if len <= MAX_RECORD && i + HEADER + len <= bytes.len() && sum == crc(len as u32, lsn, &bytes[i + HEADER..i + HEADER + len]) {
                return true;
            }
        }
        i += 1;
    }
    false
}

struct Tail {
    file: File,
    /// Bytes appended but maybe not yet durable.
    end: u64,
    next_lsn: u64,
    appended_lsn: u64,
}

/// The open log of a writable store.
pub struct Wal {
    path: PathBuf,
    tail: Mutex<Tail>,
    durable: Mutex<u64>,
    /// One fdatasync at a time; waiters behind it share the next one.
    syncing: Mutex<()>,
    /// Syncs of the log file since open (group commit makes this fewer
    /// than the durable batches).
    syncs: AtomicU64,
    /// A simulated disk whose faults this file's appends and syncs take,
    /// when the store is on one and its faults name the log (tests).
    pub(crate) sim: Option<Arc<SimDisk>>,
}

impl Wal {
    /// Opens (or creates) the log, returns it with the records after
    /// `checkpoint` to replay.
    pub fn open(path: &Path, checkpoint: u64) -> Result<(Wal, Vec<Record>)> {
        let mut file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path).map_err(file_err(path))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(file_err(path))?;
        let rec = recover(&bytes, path)?;
        // Cut a torn tail so new records follow the valid prefix.
        if rec.valid_len < bytes.len() as u64 {
            log::warn!("{}: dropping {} bytes of torn log tail", path.display(), bytes.len() as u64 - rec.valid_len);
            file.set_len(rec.valid_len).map_err(file_err(path))?;
            file.sync_all().map_err(file_err(path))?;
        }
        file.seek(SeekFrom::Start(rec.valid_len)).map_err(file_err(path))?;
        let last = rec.records.last().map_or(0, |r| r.0).max(checkpoint);
        let wal = Wal {
            path: path.to_path_buf(),
            tail: Mutex::new(Tail { file, end: rec.valid_len, next_lsn: last + 1, appended_lsn: last }),
            durable: Mutex::new(last),
            syncing: Mutex::new(()),
            syncs: AtomicU64::new(0),
            sim: None,
        };
        let pending = past_checkpoint(rec.records, checkpoint, path)?;
        Ok((wal, pending))
    }

    /// Empties the log after a checkpoint covering every appended record
    /// (the caller holds off appends). LSNs continue.
    pub fn reset(&self) -> Result<()> {
        let mut t = self.tail.locked();
        t.file.set_len(0).map_err(file_err(&self.path))?;
        t.file.seek(SeekFrom::Start(0)).map_err(file_err(&self.path))?;
        t.file.sync_all().map_err(file_err(&self.path))?;
        self.syncs.fetch_add(1, Ordering::Relaxed);
        t.end = 0;
        Ok(())
    }

    /// Appends one record; returns its LSN. Not durable until `sync_to`.
    pub fn append(&self, payload: &[u8]) -> Result<u64> {
        if payload.len() > MAX_RECORD {
            return Err(StoreError::Invalid(format!("update batch of {} bytes exceeds the {} byte limit; split it", payload.len(), MAX_RECORD)));
        }
        let mut t = self.tail.locked();
        let lsn = t.next_lsn;
        let mut buf = Vec::with_capacity(HEADER + payload.len());
        encode(lsn, payload, &mut buf);
        if let Err(e) = self.injected(true).and_then(|()| t.file.write_all(&buf)) {
            // Leave no partial record behind for later appends to follow.
            let end = t.end;
            let _ = t.file.set_len(end);
            let _ = t.file.seek(SeekFrom::Start(end));
            return Err(file_err(&self.path)(e));
        }
        t.end += buf.len() as u64;
        t.next_lsn += 1;
        t.appended_lsn = lsn;
        Ok(lsn)
    }

    /// Returns once every record up to `lsn` is on stable storage.
    pub fn sync_to(&self, lsn: u64) -> Result<()> {
        loop {
            if *self.durable.locked() >= lsn {
                return Ok(());
            }
            // Whoever gets here first syncs for all records appended so far.
            let _one = self.syncing.locked();
            if *self.durable.locked() >= lsn {
                return Ok(());
            }
            let (file, upto) = {
                let t = self.tail.locked();
                (t.file.try_clone().map_err(file_err(&self.path))?, t.appended_lsn)
            };
            self.injected(false).and_then(|()| file.sync_data()).map_err(file_err(&self.path))?;
            self.syncs.fetch_add(1, Ordering::Relaxed);
            let mut d = self.durable.locked();
            *d = (*d).max(upto);
        }
    }

    /// The simulated disk's fault for this append (or sync), if any.
    fn injected(&self, write: bool) -> std::io::Result<()> {
        match &self.sim {
            Some(d) if d.faults_log_file() => d.file_op(write),
            _ => Ok(()),
        }
    }

    pub fn appended_lsn(&self) -> u64 {
        self.tail.locked().appended_lsn
    }

    /// Syncs of the log file since open.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    pub fn durable_lsn(&self) -> u64 {
        *self.durable.locked()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(n: u64) -> (Vec<u8>, Vec<usize>) {
        let mut out = Vec::new();
        let mut ends = Vec::new();
        for lsn in 1..=n {
            let payload: Vec<u8> = (0..(lsn * 7 % 23 + 1)).map(|i| (i * lsn) as u8).collect();
            encode(lsn, &payload, &mut out);
            ends.push(out.len());
        }
        (out, ends)
    }

    #[test]
    fn every_cut_recovers_exactly_the_valid_prefix() {
        let (img, ends) = image(12);
        let p = Path::new("wal");
        for cut in 0..=img.len() {
            let r = recover(&img[..cut], p).unwrap();
            let whole = ends.iter().filter(|&&e| e <= cut).count();
            assert_eq!(r.records.len(), whole, "cut at {cut}");
            assert_eq!(r.valid_len as usize, if whole == 0 { 0 } else { ends[whole - 1] });
        }
    }

    #[test]
    fn every_bit_flip_is_detected() {
        let (img, ends) = image(12);
        let p = Path::new("wal");
        let clean = recover(&img, p).unwrap().records;
        for byte in 0..img.len() {
            for bit in [0u8, 3, 7] {
                let mut bad = img.clone();
                bad[byte] ^= 1 << bit;
                match recover(&bad, p) {
                    // Either an error, or, for damage to the last record
                    // (a torn append looks the same), the records before
                    // it: never a damaged record, never a record dropped
                    // that has an intact one after it.
                    Err(_) => {}
                    Ok(r) => {
                        let damaged = ends.iter().position(|&e| e > byte).unwrap();
                        assert_eq!(damaged, ends.len() - 1, "flip at {byte} in record {} dropped the records after it", damaged + 1);
                        assert_eq!(&r.records[..], &clean[..damaged]);
                    }
                }
            }
        }
    }

    #[test]
    fn a_gap_after_the_checkpoint_is_an_error() {
        let (img, _) = image(8);
        let p = Path::new("wal");
        let recs = recover(&img, p).unwrap().records;
        assert_eq!(past_checkpoint(recs.clone(), 0, p).unwrap().len(), 8);
        assert_eq!(past_checkpoint(recs.clone(), 5, p).unwrap().len(), 3);
        assert!(past_checkpoint(recs.clone(), 8, p).unwrap().is_empty());
        // Records 3..=8 after a checkpoint at 1: 2 is missing.
        assert!(past_checkpoint(recs[2..].to_vec(), 1, p).is_err());
    }

    #[test]
    fn group_commit_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.log");
        {
            let (w, recs) = Wal::open(&path, 0).unwrap();
            assert!(recs.is_empty());
            let w = std::sync::Arc::new(w);
            let threads: Vec<_> = (0..8)
                .map(|t| {
                    let w = w.clone();
                    std::thread::spawn(move || {
                        for i in 0..50u32 {
                            let lsn = w.append(&[t as u8; 16][..(i % 16) as usize + 1]).unwrap();
                            w.sync_to(lsn).unwrap();
                            assert!(w.durable_lsn() >= lsn);
                        }
                    })
                })
                .collect();
            threads.into_iter().for_each(|t| t.join().unwrap());
            // Every batch was made durable by some sync, at most one each.
            assert!((1..=400).contains(&w.syncs()), "{} syncs", w.syncs());
            let before = w.syncs();
            w.sync_to(w.appended_lsn()).unwrap();
            assert_eq!(w.syncs(), before, "a durable LSN needs no sync");
        }
        // A torn tail: half a record appended after the valid ones.
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        let mut half = Vec::new();
        encode(401, &[9; 40], &mut half);
        f.write_all(&half[..30]).unwrap();
        drop(f);
        let (w, recs) = Wal::open(&path, 0).unwrap();
        assert_eq!(recs.len(), 400);
        assert!(recs.iter().enumerate().all(|(i, r)| r.0 == i as u64 + 1));
        assert_eq!(w.append(b"next").unwrap(), 401);
        w.sync_to(401).unwrap();
        // A checkpoint at 390: replay skips what it covers; after a reset
        // the log is empty and LSNs go on.
        drop(w);
        let (w, recs) = Wal::open(&path, 390).unwrap();
        assert_eq!(recs.iter().map(|r| r.0).collect::<Vec<_>>(), (391..=401).collect::<Vec<_>>());
        w.reset().unwrap();
        assert_eq!(w.append(b"after").unwrap(), 402);
        drop(w);
        let (_, recs) = Wal::open(&path, 401).unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), (HEADER + 5) as u64);
    }
}
