//! What a writable open holds besides the graph: the writer lock (one
//! writer process per store), the WAL, the batch lock and the free space;
//! and the WAL's record format, which replay at open reads back.

use std::fs::File;
use std::path::Path;
use std::sync::Mutex;

use solidgraph_io::sync::MutexExt;

use crate::base::Base;
use crate::delta::{Delta, Op, Shape};
use crate::error::{Result, StoreError, file_err};
use crate::space::Space;
use crate::superblock::{MAX_GROWN_NODES, Superblock, TensorMeta};
use crate::wal::{self, Record, Wal};

pub(crate) struct Writer {
    pub wal: Wal,
    /// Validation and append of one batch (or one merge) at a time.
    pub serial: Mutex<()>,
    pub space: Mutex<Space>,
    /// Pending-update bytes that trigger a merge (0: never by itself).
    pub delta_budget: u64,
    /// Why the writer refuses work: a merge failed at or after writing its
    /// superblock, so which superblock is on disk is unknown, and the next
    /// merge could overwrite pages a durable superblock names. Reopening
    /// reads whichever copy is there and replays the log.
    broken: Mutex<Option<String>>,
    /// Held for the life of the store: one writer process.
    _lock: File,
}

impl Writer {
    /// Takes the writer lock of the store in `dir` and opens its log;
    /// returns the records past `base`'s checkpoint, to replay.
    pub fn open(dir: &Path, base: &Base, delta_budget: u64) -> Result<(Writer, Vec<Record>)> {
        let lock = lock(&dir.join("writer.lock"))?;
        let (wal, records) = Wal::open(&dir.join("wal.log"), base.sb.checkpoint_lsn)?;
        let space = Mutex::new(Space::new(base));
        Ok((Writer { wal, serial: Mutex::new(()), space, delta_budget, broken: Mutex::new(None), _lock: lock }, records))
    }

    /// An error once a merge's or tensor add's commit failed (see `broken`).
    pub fn check_usable(&self) -> Result<()> {
        match &*self.broken.locked() {
            None => Ok(()),
            Some(why) => Err(StoreError::Io(solidgraph_io::IoError::Os {
                path: self.wal.path().parent().unwrap_or(self.wal.path()).to_path_buf(),
                source: std::io::Error::other(format!(
                    "a write failed while committing ({why}); the store takes no more updates or merges until it is reopened (reopening recovers every acknowledged update)"
                )),
            })),
        }
    }

    /// Refuses all later writes: a merge or tensor add failed at its commit
    /// with `why`.
    pub fn set_broken(&self, why: String) {
        self.broken.locked().get_or_insert(why);
    }
}

fn lock(path: &Path) -> Result<File> {
    use std::os::fd::AsRawFd;
    let f = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(path).map_err(file_err(path))?;
    // SAFETY: flock on an fd we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(StoreError::Locked { path: path.parent().unwrap_or(path).to_path_buf() });
    }
    Ok(f)
}

/// The records of the log in `dir` past `base`'s checkpoint, read without
/// taking the writer lock (a read-only open).
pub(crate) fn read_log(dir: &Path, base: &Base) -> Result<Vec<Record>> {
    let path = dir.join("wal.log");
    if !path.exists() {
        return Ok(Vec::new());
    }
    let bytes = std::fs::read(&path).map_err(file_err(&path))?;
    wal::past_checkpoint(wal::recover(&bytes, &path)?.records, base.sb.checkpoint_lsn, &path)
}

/// A WAL record: the change in edge count (computed at validation, so replay
/// needs no reads), then the operation.
pub(crate) fn record(edges_added: i64, op: &Op) -> Vec<u8> {
    let mut b = edges_added.to_le_bytes().to_vec();
    b.extend_from_slice(&op.encode());
    b
}

/// Applies logged records to `delta`; `dir` names the log in errors.
pub(crate) fn replay(delta: &mut Delta, records: Vec<Record>, sb: &Superblock, dir: &Path) -> Result<()> {
    let wal_path = dir.join("wal.log");
    let shape = Shape::of(sb);
    for (lsn, payload) in records {
        let bad = |why: String| StoreError::BadInput { path: wal_path.clone(), reason: format!("record {lsn}: {why}") };
        if payload.len() < 8 {
            return Err(bad("too short".into()));
        }
        let edges = i64::from_le_bytes(payload[..8].try_into().expect("8"));
        let op = Op::decode(&payload[8..]).map_err(|e| bad(e.to_string()))?;
        // A writer checks ids before logging; a record naming a vertex
        // that does not exist is damage, and reads index arrays by id.
        let n = delta.base_nodes + delta.added_nodes;
        let ids: &[&[u64]] = match &op {
            Op::AddEdges { src, dst, .. } | Op::DeleteEdges { src, dst } => &[src, dst],
            Op::DeleteVertices { ids } | Op::UpdateTensor { ids, .. } => &[ids],
            _ => &[],
        };
        if let Some(&v) = ids.iter().flat_map(|l| l.iter()).find(|&&v| v >= n) {
            return Err(bad(format!("vertex {v} is out of range (the graph has {n} vertices)")));
        }
        check_rows(&op, &sb.tensors).map_err(bad)?;
        if let &Op::AddVertices { count, .. } = &op
            && n.saturating_add(count) > MAX_GROWN_NODES.max(delta.base_nodes)
        {
            return Err(bad(format!("adds {count} vertices to {n}, past the {MAX_GROWN_NODES} vertices updates may reach")));
        }
        delta.apply(&op, shape);
        delta.edges_added += edges;
    }
    Ok(())
}

/// Rows in a record fit their tensor as the writer checked them (the
/// delta cuts them into rows of the tensor's width and reads copy them
/// whole): a record that does not is damage.
fn check_rows(op: &Op, tensors: &[TensorMeta]) -> std::result::Result<(), String> {
    let (count, rows): (u64, Vec<(&str, usize)>) = match op {
        Op::AddVertices { count, tensors } => {
            if *count == 0 || *count > 1 << 32 {
                return Err(format!("adds {count} vertices (1..=2^32 per batch)"));
            }
            (*count, tensors.iter().map(|(n, b)| (n.as_str(), b.len())).collect())
        }
        Op::UpdateTensor { name, ids, rows } => (ids.len() as u64, vec![(name.as_str(), rows.len())]),
        _ => return Ok(()),
    };
    for (name, bytes) in rows {
        let t = tensors.iter().find(|t| t.name == name).ok_or_else(|| format!("names no tensor {name:?}"))?;
        if count == 0 || Some(bytes as u64) != count.checked_mul(t.row_bytes()) {
            return Err(format!("{bytes} bytes of tensor {name:?} for {count} rows of {} bytes", t.row_bytes()));
        }
    }
    Ok(())
}
