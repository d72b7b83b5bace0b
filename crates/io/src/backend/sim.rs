//! Simulated disk in memory, for crash and fault tests.
//!
//! It keeps, per member, the bytes a reader sees now and the bytes that
//! survived the last fsync, plus every write since then. Faults: EIO on the
//! Nth operation, on every operation from the Nth on (a failing device), or
//! on each operation with a seeded probability, limited to reads, writes or
//! syncs if asked, and a failed write may still land (a device that wrote
//! and then reported an error); a bit flip in the Nth operation's read
//! data; a power cut after the Nth operation (every later operation fails
//! until `crash` builds the post-crash image: unsynced writes lost, applied,
//! or torn to a prefix of their sectors). Ops of a batch complete in a
//! seeded random order with at most `cap` per member in flight, like a real
//! device queue.

use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{Backend, BackendKind, ExecCtx, IoOp};
use crate::error::{IoError, Result};
use crate::sync::MutexExt;

/// Sector size a torn write is cut at.
pub const SECTOR: usize = 512;

/// What happens to writes that were not fsynced when the power goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// Every unsynced write is lost.
    LoseUnsynced,
    /// Each unsynced write, independently: lost, kept, or a prefix of its
    /// sectors kept; chosen by the seed.
    Torn { seed: u64 },
}

/// Which operations an EIO fault may hit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OpKinds {
    #[default]
    All,
    Reads,
    Writes,
    Syncs,
}

impl OpKinds {
    fn has(self, kind: OpKind) -> bool {
        match self {
            OpKinds::All => true,
            OpKinds::Reads => kind == OpKind::Read,
            OpKinds::Writes => kind == OpKind::Write,
            OpKinds::Syncs => kind == OpKind::Sync,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpKind {
    Read,
    Write,
    Sync,
}

#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// The operation with this number (counting from 0) fails with EIO.
    pub eio_at: Option<u64>,
    /// Operations with this number and later fail with EIO (a device gone
    /// bad), until the faults are cleared.
    pub eio_from: Option<u64>,
    /// Each operation fails with EIO with this probability in parts per
    /// million, drawn from `eio_seed`.
    pub eio_ppm: u32,
    pub eio_seed: u64,
    /// The operations the three EIO faults above may hit.
    pub eio_kinds: OpKinds,
    /// A write that fails with EIO still lands (unsynced), so the caller
    /// cannot tell whether it did.
    pub eio_write_lands: bool,
    /// The read operation with this number returns data with one bit flipped
    /// at (byte, bit) within the op.
    pub flip_at: Option<(u64, usize, u8)>,
    /// Operations with this number and later fail: the power is cut.
    pub power_cut_at: Option<u64>,
    /// The store's log file (a real file beside the simulated members)
    /// counts its appends and syncs as operations of this disk and takes
    /// its faults (see `SimDisk::file_op`).
    pub log_file: bool,
}

struct Member {
    now: Vec<u8>,
    /// What a power cut leaves, when it differs from `now`: None while no
    /// write landed since the last sync (or load), so loading and syncing
    /// a member copy nothing, and a write copies the image once.
    durable: Option<Vec<u8>>,
}

impl Member {
    /// Keeps the durable image apart before `now` first changes.
    fn before_write(&mut self) {
        if self.durable.is_none() {
            self.durable = Some(self.now.clone());
        }
    }
}

struct State {
    members: Vec<Member>,
    unsynced: Vec<(usize, u64, Vec<u8>)>,
    ops: u64,
    /// Operations failed with an injected EIO since the faults were set.
    eios: u64,
    faults: Faults,
    rng: u64,
    /// Draws of the random EIO fault.
    eio_rng: u64,
}

/// A set of simulated member disks, shared between the test and the volumes
/// opened on it (a volume reopened after `crash` sees the post-crash image).
pub struct SimDisk {
    state: Mutex<State>,
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

impl SimDisk {
    pub fn new(members: usize, seed: u64) -> Arc<SimDisk> {
        Arc::new(SimDisk {
            state: Mutex::new(State {
                members: (0..members).map(|_| Member { now: Vec::new(), durable: None }).collect(),
                unsynced: Vec::new(),
                ops: 0,
                eios: 0,
                faults: Faults::default(),
                rng: seed | 1,
                eio_rng: 1,
            }),
        })
    }

    pub fn members(&self) -> usize {
        self.state.locked().members.len()
    }

    /// Replaces the faults (`Faults::default()` clears them); resets the
    /// count of injected EIOs.
    pub fn set_faults(&self, faults: Faults) {
        let mut s = self.state.locked();
        s.eio_rng = faults.eio_seed | 1;
        s.eios = 0;
        s.faults = faults;
    }

    /// Operations failed with an injected EIO since the faults were set.
    pub fn eios(&self) -> u64 {
        self.state.locked().eios
    }

    /// Sets member `m`'s image, current and durable (say, a store built on
    /// real files and loaded here to be crashed).
    pub fn load(&self, member: usize, bytes: Vec<u8>) {
        let mut s = self.state.locked();
        s.members[member].durable = None;
        s.members[member].now = bytes;
    }

    /// Bytes [offset, offset + len) of member `m` as a reader sees them now
    /// (fewer at the end of the image); not counted as an operation.
    pub fn peek(&self, member: usize, offset: u64, len: usize) -> Vec<u8> {
        let s = self.state.locked();
        let now = &s.members[member].now;
        let a = (offset as usize).min(now.len());
        now[a..(a + len).min(now.len())].to_vec()
    }

    /// Operations run so far (reads, writes and syncs each count one).
    pub fn ops(&self) -> u64 {
        self.state.locked().ops
    }

    /// Cuts the power now: builds the image a restart would find, clears the
    /// faults and the op counter.
    pub fn crash(&self, mode: CrashMode) {
        let mut s = self.state.locked();
        let st = &mut *s;
        for m in st.members.iter_mut() {
            if let Some(d) = m.durable.take() {
                m.now = d;
            }
        }
        let mut rng = match mode {
            CrashMode::LoseUnsynced => 0,
            CrashMode::Torn { seed } => seed | 1,
        };
        for (member, offset, data) in std::mem::take(&mut st.unsynced) {
            if rng == 0 {
                break;
            }
            let sectors = data.len().div_ceil(SECTOR);
            // 0 = lost, sectors = whole write, in between = torn.
            let keep = (xorshift(&mut rng) % (sectors as u64 + 1)) as usize;
            let bytes = (keep * SECTOR).min(data.len());
            let m = &mut st.members[member];
            m.now[offset as usize..offset as usize + bytes].copy_from_slice(&data[..bytes]);
        }
        st.ops = 0;
        st.faults = Faults::default();
    }

    /// Flips one bit of the stored image (both current and durable), as media
    /// corruption would.
    pub fn corrupt(&self, member: usize, byte: u64, bit: u8) {
        let mut s = self.state.locked();
        let m = &mut s.members[member];
        m.now[byte as usize] ^= 1 << (bit % 8);
        if let Some(d) = m.durable.as_mut() {
            d[byte as usize] ^= 1 << (bit % 8);
        }
    }

    /// Whether the log file's operations take this disk's faults.
    pub fn faults_log_file(&self) -> bool {
        self.state.locked().faults.log_file
    }

    /// One operation (a write, else a sync) on a real file that shares
    /// this disk's operation count and faults (the store's log): the
    /// injected error, if any; the caller does the real I/O only on Ok. A
    /// failed file write never lands.
    pub fn file_op(&self, write: bool) -> std::io::Result<()> {
        let mut st = self.state.locked();
        Self::begin(&mut st, if write { OpKind::Write } else { OpKind::Sync }).map(|_| ()).map_err(Fault::io_error)
    }

    /// Starts an operation: counts it and applies the op-numbered faults.
    fn begin(st: &mut State, kind: OpKind) -> std::result::Result<u64, Fault> {
        let n = st.ops;
        st.ops += 1;
        if st.faults.power_cut_at.is_some_and(|c| n >= c) {
            return Err(Fault::PowerCut);
        }
        if st.faults.eio_at == Some(n) || Self::eio_here(st, n, kind) {
            st.eios += 1;
            return Err(Fault::Eio);
        }
        Ok(n)
    }

    /// Whether the sticky or random EIO fault hits operation `n`.
    fn eio_here(st: &mut State, n: u64, kind: OpKind) -> bool {
        let f = &st.faults;
        if !f.eio_kinds.has(kind) {
            return false;
        }
        if f.eio_from.is_some_and(|from| n >= from) {
            return true;
        }
        f.eio_ppm > 0 && xorshift(&mut st.eio_rng) % 1_000_000 < u64::from(f.eio_ppm)
    }

    fn run_op(st: &mut State, op: &IoOp, path: &Path) -> std::result::Result<(), IoError> {
        let kind = if op.write { OpKind::Write } else { OpKind::Read };
        let begun = Self::begin(st, kind);
        let m = op.member as usize;
        let (off, len) = (op.offset as usize, op.len as usize);
        let lands = op.write && begun == Err(Fault::Eio) && st.faults.eio_write_lands;
        let n = match begun {
            Ok(n) => n,
            Err(_) if lands => u64::MAX,
            Err(f) => return Err(sim_err(op, path, f)),
        };
        if off + len > st.members[m].now.len() {
            return Err(IoError::ShortRead { path: path.to_path_buf(), offset: op.offset });
        }
        // SAFETY: op.buf is valid for op.len bytes for the life of the batch.
        let buf = unsafe { std::slice::from_raw_parts_mut(op.buf, len) };
        if op.write {
            st.members[m].before_write();
            st.members[m].now[off..off + len].copy_from_slice(buf);
            st.unsynced.push((m, op.offset, buf.to_vec()));
            if lands {
                return Err(sim_err(op, path, Fault::Eio));
            }
        } else {
            buf.copy_from_slice(&st.members[m].now[off..off + len]);
            if let Some((at, byte, bit)) = st.faults.flip_at
                && at == n
            {
                buf[byte % len] ^= 1 << (bit % 8);
            }
        }
        Ok(())
    }
}

/// An injected failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Eio,
    PowerCut,
}

impl Fault {
    fn io_error(self) -> std::io::Error {
        match self {
            Fault::Eio => std::io::Error::from_raw_os_error(libc::EIO),
            Fault::PowerCut => std::io::Error::other("simulated power cut"),
        }
    }
}

fn sim_err(op: &IoOp, path: &Path, f: Fault) -> IoError {
    IoError::Device { path: path.to_path_buf(), offset: op.offset, len: op.len as u64, source: f.io_error() }
}

/// The member's path as the volume names it (sim<m> when it names none).
fn member_path(ctx: &ExecCtx, m: usize) -> std::path::PathBuf {
    ctx.paths.get(m).cloned().unwrap_or_else(|| format!("sim{m}").into())
}

pub(crate) struct SimBackend {
    pub(crate) disk: Arc<SimDisk>,
}

impl Backend for SimBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Sim
    }

    fn execute(&self, ops: &[IoOp], by_member: &[Range<usize>], ctx: &ExecCtx) -> Result<()> {
        let mut st = self.disk.state.locked();
        let mut next: Vec<usize> = by_member.iter().map(|r| r.start).collect();
        let mut inflight: Vec<(usize, usize)> = Vec::new();
        let mut per_member = vec![0usize; by_member.len()];
        let mut first_err = None;
        loop {
            if first_err.is_none() {
                for (m, range) in by_member.iter().enumerate() {
                    while per_member[m] < ctx.cap && next[m] < range.end {
                        inflight.push((m, next[m]));
                        next[m] += 1;
                        per_member[m] += 1;
                    }
                    ctx.counters[m].record_inflight(per_member[m]);
                }
            }
            if inflight.is_empty() {
                break;
            }
            // Complete a random in-flight op: devices reorder.
            let pick = (xorshift(&mut st.rng) % inflight.len() as u64) as usize;
            let (m, i) = inflight.swap_remove(pick);
            per_member[m] -= 1;
            match SimDisk::run_op(&mut st, &ops[i], &member_path(ctx, m)) {
                Ok(()) => ctx.counters[m].record_io(ops[i].write, ops[i].len as u64, Duration::from_micros(1)),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    fn files(&self) -> &[std::fs::File] {
        &[]
    }

    fn sync(&self, member: usize, _metadata: bool, path: &Path) -> Result<()> {
        let mut st = self.disk.state.locked();
        if let Err(f) = SimDisk::begin(&mut st, OpKind::Sync) {
            return Err(IoError::Os { path: path.to_path_buf(), source: f.io_error() });
        }
        let st = &mut *st;
        st.unsynced.retain(|(m, _, _)| *m != member);
        st.members[member].durable = None;
        Ok(())
    }

    fn member_len(&self, member: usize, _path: &Path) -> Result<u64> {
        Ok(self.disk.state.locked().members[member].now.len() as u64)
    }

    fn extend_member(&self, member: usize, len: u64, path: &Path) -> Result<()> {
        self.grow_member(member, len, path)
    }

    fn grow_member(&self, member: usize, len: u64, _path: &Path) -> Result<()> {
        let mut st = self.disk.state.locked();
        let m = &mut st.members[member];
        if (len as usize) > m.now.len() {
            m.now.resize(len as usize, 0);
            if let Some(d) = m.durable.as_mut() {
                d.resize(len as usize, 0);
            }
        }
        Ok(())
    }
}
