//! EIO from real files: the log's replay at open and the import, failed at
//! each of their file system calls in turn. This test binary defines the
//! C library's I/O entry points itself (`read`, `pwrite`, `fdatasync`, ...;
//! the executable's definitions take precedence over libc's), so every
//! call the store makes through the standard library or libc passes here
//! and goes on to the kernel as a raw system call, unless a fault plan is
//! armed for the file's path. The stores use the POSIX backend (io_uring's
//! I/O bypasses these calls; the simulated disk covers the store's pages in
//! `eio.rs`).
//!
//! Each fault must be an error to the caller naming the file; nothing
//! acknowledged is lost: once the fault is gone the store opens with every
//! acknowledged batch and verifies, and a failed import leaves no output
//! and no partial directory (a store imported before it still opens).

mod common;

use std::ffi::{c_int, c_void};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use common::*;
use solidgraph_io::{BackendChoice, BackendKind};
use solidgraph_store::*;

/// The kinds of call a plan fails.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Call {
    Read,
    Write,
    Sync,
    Size,
}

/// Which call fails: the `nth` (from 0) call of `kinds` on a file whose
/// path contains `under`; `sticky`: that one and every later one.
struct Plan {
    under: String,
    kinds: &'static [Call],
    nth: u64,
    sticky: bool,
    /// Matching calls seen so far.
    seen: u64,
    /// Calls failed so far.
    failed: u64,
}

static ARMED: AtomicBool = AtomicBool::new(false);
static PLAN: Mutex<Option<Plan>> = Mutex::new(None);
/// Tests of this binary run one at a time (the plan is process-wide).
static SERIAL: Mutex<()> = Mutex::new(());

fn arm(p: Plan) {
    *PLAN.lock().unwrap_or_else(|e| e.into_inner()) = Some(p);
    ARMED.store(true, Ordering::SeqCst);
}

/// Disarms; returns (matching calls seen, calls failed).
fn disarm() -> (u64, u64) {
    ARMED.store(false, Ordering::SeqCst);
    let p = PLAN.lock().unwrap_or_else(|e| e.into_inner()).take();
    p.map_or((0, 0), |p| (p.seen, p.failed))
}

/// The path of open descriptor `fd` (empty when unknown).
fn fd_path(fd: c_int) -> String {
    let link = format!("/proc/self/fd/{fd}\0");
    let mut buf = [0u8; 4096];
    // SAFETY: link is NUL-terminated; buf is writable for its length.
    let n = unsafe { libc::readlink(link.as_ptr().cast(), buf.as_mut_ptr().cast(), buf.len()) };
    if n <= 0 { String::new() } else { String::from_utf8_lossy(&buf[..n as usize]).into_owned() }
}

/// Whether this call fails (sets errno to EIO if so).
fn inject(fd: c_int, call: Call) -> bool {
    if !ARMED.load(Ordering::Relaxed) {
        return false;
    }
    let path = fd_path(fd);
    let mut g = PLAN.lock().unwrap_or_else(|e| e.into_inner());
    let Some(p) = g.as_mut() else { return false };
    if !p.kinds.contains(&call) || !path.contains(&p.under) {
        return false;
    }
    let k = p.seen;
    p.seen += 1;
    if k == p.nth || (p.sticky && k > p.nth) {
        p.failed += 1;
        // SAFETY: errno is thread-local and always valid.
        unsafe { *libc::__errno_location() = libc::EIO };
        return true;
    }
    false
}

// The interposed calls: an injected EIO, else the system call itself.
macro_rules! interpose {
    ($name:ident, $call:expr, $sys:expr, ($fd:ident: c_int $(, $a:ident: $t:ty)*) -> $ret:ty) => {
        /// # Safety
        /// The C library's contract for this call: the pointers are
        /// valid for the lengths given.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($fd: c_int $(, $a: $t)*) -> $ret {
            if inject($fd, $call) {
                return -1;
            }
            // SAFETY: the caller's arguments, passed on unchanged.
            unsafe { libc::syscall($sys, $fd $(, $a)*) as $ret }
        }
    };
}

interpose!(read, Call::Read, libc::SYS_read, (fd: c_int, buf: *mut c_void, n: usize) -> isize);
interpose!(readv, Call::Read, libc::SYS_readv, (fd: c_int, iov: *const libc::iovec, n: c_int) -> isize);
interpose!(pread, Call::Read, libc::SYS_pread64, (fd: c_int, buf: *mut c_void, n: usize, off: i64) -> isize);
interpose!(pread64, Call::Read, libc::SYS_pread64, (fd: c_int, buf: *mut c_void, n: usize, off: i64) -> isize);
interpose!(write, Call::Write, libc::SYS_write, (fd: c_int, buf: *const c_void, n: usize) -> isize);
interpose!(writev, Call::Write, libc::SYS_writev, (fd: c_int, iov: *const libc::iovec, n: c_int) -> isize);
interpose!(pwrite, Call::Write, libc::SYS_pwrite64, (fd: c_int, buf: *const c_void, n: usize, off: i64) -> isize);
interpose!(pwrite64, Call::Write, libc::SYS_pwrite64, (fd: c_int, buf: *const c_void, n: usize, off: i64) -> isize);
interpose!(fsync, Call::Sync, libc::SYS_fsync, (fd: c_int) -> c_int);
interpose!(fdatasync, Call::Sync, libc::SYS_fdatasync, (fd: c_int) -> c_int);
interpose!(ftruncate, Call::Size, libc::SYS_ftruncate, (fd: c_int, len: i64) -> c_int);
interpose!(ftruncate64, Call::Size, libc::SYS_ftruncate, (fd: c_int, len: i64) -> c_int);
interpose!(fallocate, Call::Size, libc::SYS_fallocate, (fd: c_int, mode: c_int, off: i64, len: i64) -> c_int);

const ALL: &[Call] = &[Call::Read, Call::Write, Call::Sync, Call::Size];

fn posix() -> BackendChoice {
    BackendChoice::Force(BackendKind::Posix)
}

fn open(path: &Path, writable: bool) -> Result<Store> {
    Store::open(path, &OpenOptions { writable, cache_bytes: 1 << 20, delta_budget: 0, backend: posix(), ..Default::default() })
}

/// Whether `e` says EIO and names a file under `dir`.
fn names_eio_under(e: &StoreError, dir: &Path) -> bool {
    let text = e.to_string();
    text.contains("Input/output error") && text.contains(&*dir.to_string_lossy())
}

/// A store with every page kind and pending log records past its
/// checkpoint (merges in between), and the model of what was acknowledged.
fn store_with_log(path: &Path) -> Model {
    let mut m = import_base(path, 17);
    let s = open(path, true).unwrap();
    let mut rng = 3u64;
    for i in 0..30 {
        let b = m.next(&mut rng, i);
        apply_store(&s, &b).unwrap();
        m.apply(&b);
    }
    assert!(s.pending_updates() > 0, "the store keeps updates in its log");
    m
}

/// Appends a torn record (a header promising more bytes than follow) to
/// the log: a writable open cuts it, a read-only open ignores it.
fn tear_log(path: &Path) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path.join("wal.log")).unwrap();
    f.write_all(&[0x55; 11]).unwrap();
}

/// Opens with a fault at each file call under `path` in turn (the member
/// and the log), until an open finishes without meeting one; after each,
/// the store opens without faults with every acknowledged batch and
/// verifies. Returns (open attempts that failed, calls in a clean open).
fn open_at_each_call(path: &Path, m: &Model, writable: bool) -> (u64, u64) {
    let mut failed = 0;
    for k in 0.. {
        tear_log(path);
        arm(Plan { under: path.to_string_lossy().into_owned(), kinds: ALL, nth: k, sticky: false, seen: 0, failed: 0 });
        let got = open(path, writable);
        let (seen, hit) = disarm();
        match got {
            Err(e) => {
                assert_eq!(hit, 1, "call {k}: {e}");
                assert!(names_eio_under(&e, path), "open (writable {writable}), EIO at file call {k}: {e}");
                failed += 1;
            }
            Ok(s) => {
                // Calls after open (the warm-up thread, a cache fill) may
                // still meet the fault; open itself did not.
                if let Some(d) = diff(&s, m) {
                    panic!("open (writable {writable}), EIO at file call {k} after open returned: {d}");
                }
                if hit == 0 {
                    return (failed, seen);
                }
            }
        }
        let s = open(path, writable).unwrap_or_else(|e| panic!("reopen after EIO at file call {k}: {e}"));
        if let Some(d) = diff(&s, m) {
            panic!("after EIO at file call {k} of an open (writable {writable}): {d}");
        }
        s.verify(&mut |_, _| {}).unwrap_or_else(|e| panic!("verify after EIO at call {k}: {e}"));
    }
    unreachable!()
}

#[test]
fn log_replay_at_open_fails_cleanly_at_each_file_call() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g");
    let m = store_with_log(&path);
    let (ro_failed, ro_calls) = open_at_each_call(&path, &m, false);
    let (rw_failed, rw_calls) = open_at_each_call(&path, &m, true);
    assert!(ro_failed > 2 && rw_failed > 2, "the opens should read the member and the log ({ro_failed}, {rw_failed})");
    // A writable open after all that still takes updates and merges.
    let s = open(&path, true).unwrap();
    let mut m = m;
    let mut rng = 8u64;
    for i in 0..13 {
        let b = m.next(&mut rng, i);
        apply_store(&s, &b).unwrap();
        m.apply(&b);
    }
    assert!(diff(&s, &m).is_none());
    s.verify(&mut |_, _| {}).unwrap();
    eprintln!(
        "open with log replay: EIO at each of {ro_calls} file calls of a read-only open ({ro_failed} failed it) and {rw_calls} of a writable one ({rw_failed}); every acknowledged batch recovered after each"
    );
}

/// The import's input in `dir`: a text edge list, and a tensor in memory
/// or (`npy`) in a .npy file.
fn inputs(dir: &Path, npy: bool) -> (Vec<EdgeInput>, Vec<TensorInput>) {
    let mut text = String::new();
    let mut x = 99u64;
    for _ in 0..20_000 {
        let (a, b) = (rnd(&mut x) % 3000, rnd(&mut x) % 3000);
        text += &format!("{a} {b}\n");
    }
    let edges = dir.join("edges.txt");
    std::fs::write(&edges, text).unwrap();
    let rows: Vec<u8> = (0..3000 * 4).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let data = if npy {
        let mut file = b"\x93NUMPY\x01\x00".to_vec();
        let mut header = "{'descr': '<f4', 'fortran_order': False, 'shape': (3000, 4), }".to_string();
        while !(10 + header.len() + 1).is_multiple_of(64) {
            header.push(' ');
        }
        header.push('\n');
        file.extend_from_slice(&(header.len() as u16).to_le_bytes());
        file.extend_from_slice(header.as_bytes());
        file.extend_from_slice(&rows);
        let t = dir.join("x.npy");
        std::fs::write(&t, file).unwrap();
        TensorData::Npy(t)
    } else {
        TensorData::Memory { dtype: DType::F32, rows: 3000, dim: 4, bytes: rows }
    };
    (vec![EdgeInput::File(edges)], vec![TensorInput { name: "x".into(), data }])
}

fn import_options() -> ImportOptions {
    ImportOptions { in_edges: true, dedup: true, page_size: 4096, memory_budget: 16 << 20, backend: posix(), ..Default::default() }
}

/// Everything in `dir` (names), to see that a failed import leaves nothing.
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

fn member_bytes(path: &Path) -> Vec<u8> {
    std::fs::read(member_path(path, 0)).unwrap()
}

#[test]
fn import_fails_cleanly_at_each_file_call() {
    import_at_each_call(false);
}

/// Found here: a failed read of a .npy header (EIO) was reported as "not
/// a .npy file (too short)"; `read_header` now keeps bad files (the file
/// ends early) apart from I/O errors, which name the file.
#[test]
fn import_from_npy_fails_cleanly_at_each_file_call() {
    import_at_each_call(true);
}

/// EIO from the sync of the output's directory, the import's last file
/// call (it makes the rename durable): the import fails naming the
/// directory, and takes the renamed store away again.
#[test]
fn import_fails_when_its_directory_sync_fails() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (edges, tensors) = inputs(dir.path(), false);
    let o = import_options();
    let listed = listing(dir.path());
    let out = dir.path().join("g");
    let under = dir.path().to_string_lossy().into_owned();
    arm(Plan { under: under.clone(), kinds: &[Call::Sync], nth: u64::MAX, sticky: false, seen: 0, failed: 0 });
    import(&out, &edges, &tensors, &o, &|_, _, _| {}).unwrap();
    let (syncs, _) = disarm();
    std::fs::remove_dir_all(&out).unwrap();
    arm(Plan { under, kinds: &[Call::Sync], nth: syncs - 1, sticky: false, seen: 0, failed: 0 });
    let got = import(&out, &edges, &tensors, &o, &|_, _, _| {});
    let (_, hit) = disarm();
    assert_eq!(hit, 1, "the last sync fails");
    let e = got.expect_err("an import whose directory sync fails");
    assert!(names_eio_under(&e, dir.path()), "{e}");
    match &e {
        StoreError::File { path, .. } => assert_eq!(path, dir.path(), "the error names the directory"),
        other => panic!("not a file error: {other}"),
    }
    assert_eq!(listing(dir.path()), listed, "the failed import left files behind");
    import(&out, &edges, &tensors, &o, &|_, _, _| {}).unwrap();
    open(&out, false).unwrap().verify(&mut |_, _| {}).unwrap();
}

/// EIO from the sync of the directory a partition's output is renamed
/// into, its last file call: the partition fails naming the directory and
/// takes the renamed shards away again; once the fault is gone it
/// succeeds and every shard verifies.
#[test]
fn partition_fails_when_its_directory_sync_fails() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (edges, tensors) = inputs(dir.path(), false);
    let src_path = dir.path().join("src");
    import(&src_path, &edges, &tensors, &import_options(), &|_, _, _| {}).unwrap();
    let src = open(&src_path, false).unwrap();
    let o = partition::PartitionOptions { parts: 2, method: partition::Method::Hash, memory_budget: 16 << 20 };
    let listed = listing(dir.path());
    let out = dir.path().join("shards");
    let under = dir.path().to_string_lossy().into_owned();
    arm(Plan { under: under.clone(), kinds: &[Call::Sync], nth: u64::MAX, sticky: false, seen: 0, failed: 0 });
    partition::partition(&src, &out, &o, &|_, _, _| {}).unwrap();
    let (syncs, _) = disarm();
    std::fs::remove_dir_all(&out).unwrap();
    arm(Plan { under, kinds: &[Call::Sync], nth: syncs - 1, sticky: false, seen: 0, failed: 0 });
    let got = partition::partition(&src, &out, &o, &|_, _, _| {});
    let (_, hit) = disarm();
    assert_eq!(hit, 1, "the last sync fails");
    let e = got.expect_err("a partition whose directory sync fails");
    assert!(names_eio_under(&e, dir.path()), "{e}");
    match &e {
        StoreError::File { path, .. } => assert_eq!(path, dir.path(), "the error names the directory"),
        other => panic!("not a file error: {other}"),
    }
    assert_eq!(listing(dir.path()), listed, "the failed partition left files behind");
    let r = partition::partition(&src, &out, &o, &|_, _, _| {}).unwrap();
    assert_eq!(r.shard_nodes.iter().sum::<u64>(), src.num_nodes());
    for k in 0..o.parts {
        let stores: Vec<_> = std::fs::read_dir(out.join(format!("shard-{k}"))).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
        assert!(stores.len() >= 2, "shard {k}: {stores:?}");
        for p in stores {
            open(&p, false).unwrap().verify(&mut |_, _| {}).unwrap();
        }
    }
}

/// Imports with a fault at each file call of the import (the inputs'
/// reads, the member's writes, syncs and size changes) in turn.
fn import_at_each_call(npy: bool) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (edges, tensors) = inputs(dir.path(), npy);
    let o = import_options();
    // A store imported before, beside the failing imports.
    let before = dir.path().join("before");
    import(&before, &edges, &tensors, &o, &|_, _, _| {}).unwrap();
    let want = member_bytes(&before);
    let listed = listing(dir.path());
    let out = dir.path().join("g");
    let under = dir.path().to_string_lossy().into_owned();
    // The calls of a clean import, by kind.
    arm(Plan { under: under.clone(), kinds: ALL, nth: u64::MAX, sticky: false, seen: 0, failed: 0 });
    import(&out, &edges, &tensors, &o, &|_, _, _| {}).unwrap();
    let (calls, _) = disarm();
    assert_eq!(member_bytes(&out), want, "the same input imports to the same bytes");
    std::fs::remove_dir_all(&out).unwrap();
    assert!(calls >= 10, "the import should read and write files ({calls} calls)");
    // Each of the first calls, then points spread over the rest; one-off
    // and sticky (a device gone bad) faults alternate.
    let step = (calls / 150).max(1);
    let points: Vec<u64> = (0..calls.min(50)).chain((50..calls).step_by(step as usize)).collect();
    let mut failed = 0;
    for (i, &k) in points.iter().enumerate() {
        let sticky = i % 2 == 1;
        arm(Plan { under: under.clone(), kinds: ALL, nth: k, sticky, seen: 0, failed: 0 });
        let got = import(&out, &edges, &tensors, &o, &|_, _, _| {});
        let (_, hit) = disarm();
        match got {
            Err(e) => {
                assert!(hit > 0 && names_eio_under(&e, dir.path()), "import, EIO at file call {k} (sticky {sticky}): {e}");
                assert_eq!(listing(dir.path()), listed, "import, EIO at file call {k}: left files behind");
                failed += 1;
            }
            // A call whose fault does not matter may pass: the store is
            // then whole.
            Ok(_) => {
                assert_eq!(member_bytes(&out), want, "import, EIO at file call {k} (sticky {sticky}): succeeded with different bytes");
                std::fs::remove_dir_all(&out).unwrap();
            }
        }
        let s = open(&before, false).unwrap();
        s.verify(&mut |_, _| {}).unwrap();
    }
    assert!(failed as usize > points.len() * 9 / 10, "most faults should fail the import ({failed} of {})", points.len());
    import(&out, &edges, &tensors, &o, &|_, _, _| {}).unwrap();
    assert_eq!(member_bytes(&out), want, "an import after the faults writes the same store");
    eprintln!(
        "import: {calls} file calls; EIO at {} of them (one-off and sticky): {failed} failed the import with an error naming the file and left nothing",
        points.len()
    );
}
