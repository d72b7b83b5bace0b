use std::path::PathBuf;

use proptest::prelude::*;
use solidgraph_io::*;

const PS: usize = 4096;

fn paths(dir: &tempfile::TempDir, n: usize) -> Vec<PathBuf> {
    (0..n).map(|i| dir.path().join(format!("m{i}"))).collect()
}

fn opts(backend: BackendChoice, stripe: u64, cap: usize, max_io: usize) -> VolumeOptions {
    VolumeOptions {
        page_size: PS,
        stripe_pages: stripe,
        backend,
        inflight_per_member: cap,
        max_io_bytes: max_io,
        writable: true,
        posix_threads: 8,
        ..Default::default()
    }
}

/// Content of a page: its number and version stamped everywhere.
fn fill(page: u64, version: u64, out: &mut [u8]) {
    for (k, w) in out.chunks_mut(8).enumerate() {
        w.copy_from_slice(&(page.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ version ^ k as u64).to_le_bytes());
    }
}

fn write_all(v: &Volume, n: u64, version: u64) {
    let pages: Vec<u64> = (0..n).collect();
    let mut data = AlignedBuf::zeroed(n as usize * PS);
    for p in 0..n as usize {
        fill(p as u64, version, &mut data[p * PS..(p + 1) * PS]);
    }
    v.write(&pages, &data).unwrap();
}

fn backends() -> Vec<(&'static str, BackendChoice, usize)> {
    vec![
        ("uring", BackendChoice::Force(BackendKind::Uring), 0),
        ("posix", BackendChoice::Force(BackendKind::Posix), 0),
        ("sim", BackendChoice::Sim(SimDisk::new(1, 7)), 1),
        ("sim3", BackendChoice::Sim(SimDisk::new(3, 9)), 3),
    ]
}

proptest! {
    #[test]
    fn striping_is_a_bijection(members in 1u64..9, unit in 1u64..70, page in 0u64..1_000_000) {
        let s = Stripe { members, unit, page_size: 4096 };
        let (m, off) = s.locate(page);
        prop_assert!((m as u64) < members);
        prop_assert_eq!(off % 4096, 0);
        prop_assert_eq!(s.page_of(m, off), page);
    }

    #[test]
    fn striping_fills_members_evenly(members in 1u64..6, unit in 1u64..9) {
        let s = Stripe { members, unit, page_size: 4096 };
        let total = members * unit * 5;
        let mut seen = std::collections::HashSet::new();
        for p in 0..total {
            let (m, off) = s.locate(p);
            prop_assert!(off < 5 * unit * 4096, "page {} beyond 5 rows", p);
            prop_assert!(seen.insert((m, off)), "page {} collides", p);
        }
    }
}

/// Random batches (with duplicates, any order) return what was written, on
/// every backend, with merging on or off, across gaps or not, and the
/// in-flight cap holds.
#[test]
fn random_batches_read_back_on_every_backend() {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig { cases: 24, ..Default::default() });
    for (name, choice, sim_members) in backends() {
        let dir = tempfile::tempdir().unwrap();
        let members = if sim_members > 0 { sim_members } else { 2 };
        let ps = paths(&dir, members);
        for (cap, max_io, gap) in [(1usize, PS, 4), (4, 8 * PS, 0), (64, 64 * PS, 4)] {
            let dir2 = tempfile::tempdir().unwrap();
            let ps2 = if matches!(choice, BackendChoice::Sim(_)) { ps.clone() } else { paths(&dir2, members) };
            let choice = match &choice {
                BackendChoice::Sim(_) => BackendChoice::Sim(SimDisk::new(members, cap as u64 + 3)),
                c => c.clone(),
            };
            let v = Volume::create(&ps2, 300, VolumeOptions { read_gap_pages: gap, ..opts(choice, 3, cap, max_io) }).unwrap();
            let n = v.num_pages();
            assert!(n >= 300, "{name}: grew to {n}");
            write_all(&v, n, 1);
            runner
                .run(&proptest::collection::vec(0..n, 1..200), |batch| {
                    let got = v.read(&batch).unwrap();
                    prop_assert_eq!(got.len(), batch.len());
                    let mut want = vec![0u8; PS];
                    for (i, &p) in batch.iter().enumerate() {
                        fill(p, 1, &mut want);
                        prop_assert!(got.page(i) == &want[..], "{}: page {} wrong", name, p);
                    }
                    Ok(())
                })
                .unwrap();
            for st in v.stats() {
                assert!(st.inflight_hwm as usize <= cap, "{name}: in flight {} > cap {cap}", st.inflight_hwm);
                assert!(st.ios > 0);
            }
            if max_io > PS {
                let merged: u64 = v.stats().iter().map(|s| s.merged_pages).sum();
                assert!(merged > 0, "{name}: a sequential write of {n} pages merged nothing");
            }
        }
    }
}

/// Runs up to `read_gap_pages` apart become one I/O that reads the pages
/// between too; farther ones, other members' pages, runs past
/// `max_io_bytes` and gaps past one page per requested page do not (the
/// last case: 0-2-7 bridge 5 pages, 7-20 would make 17 for 6 requests).
#[test]
fn reads_bridge_small_gaps() {
    for (gap, max_io, ios, gap_pages) in [(0, 64 * PS, 5, 0), (4, 64 * PS, 3, 5), (4, 4 * PS, 4, 1), (12, 64 * PS, 3, 5)] {
        let dir = tempfile::tempdir().unwrap();
        let ps = paths(&dir, 2);
        // Stripe units of 64 pages: 0..64 on member 0, 64..128 on member 1.
        let o = VolumeOptions { read_gap_pages: gap, ..opts(BackendChoice::Auto, 64, 8, max_io) };
        let v = Volume::create(&ps, 128, o).unwrap();
        write_all(&v, v.num_pages(), 2);
        v.reset_stats();
        let batch = [20u64, 0, 2, 7, 64, 2];
        let got = v.read(&batch).unwrap();
        let mut want = vec![0u8; PS];
        for (i, &p) in batch.iter().enumerate() {
            fill(p, 2, &mut want);
            assert!(got.page(i) == &want[..], "gap {gap}: page {p} wrong");
        }
        let st = v.stats();
        assert_eq!(st.iter().map(|s| s.ios).sum::<u64>(), ios, "gap {gap} max_io {max_io}");
        assert_eq!(st.iter().map(|s| s.gap_pages).sum::<u64>(), gap_pages, "gap {gap} max_io {max_io}");
        let pages = 5 + gap_pages;
        assert_eq!(st.iter().map(|s| s.bytes_read).sum::<u64>(), pages * PS as u64, "gap {gap} max_io {max_io}");
    }
}

#[test]
fn reopen_sees_data_and_checks_members() {
    let dir = tempfile::tempdir().unwrap();
    let ps = paths(&dir, 2);
    let o = opts(BackendChoice::Auto, 4, 8, 16 * PS);
    {
        let v = Volume::create(&ps, 100, o.clone()).unwrap();
        write_all(&v, v.num_pages(), 5);
        v.sync(true).unwrap();
    }
    let v = Volume::open(&ps, o.clone()).unwrap();
    let got = v.read(&[0, 99, 50]).unwrap();
    let mut want = vec![0u8; PS];
    fill(99, 5, &mut want);
    assert_eq!(got.page(1), &want[..]);

    // Creating over an existing member is refused.
    assert!(Volume::create(&ps, 10, o.clone()).is_err());

    // Missing member.
    let mut three = ps.clone();
    three.push(dir.path().join("nope"));
    match Volume::open(&three, o.clone()) {
        Err(IoError::MissingMember { path }) => assert!(path.ends_with("nope")),
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("opened with a missing member"),
    }

    // A member of a different size.
    drop(v);
    let f = std::fs::OpenOptions::new().write(true).open(&ps[1]).unwrap();
    f.set_len(4 * 4096 * 100).unwrap();
    match Volume::open(&ps, o.clone()) {
        Err(IoError::MemberSize { path, .. }) => assert_eq!(path, ps[1]),
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("opened with mismatched members"),
    }
    // Not a whole number of stripe rows.
    f.set_len(4096 * 3).unwrap();
    assert!(matches!(Volume::open(&ps, o), Err(IoError::UnalignedSize { .. })));
}

#[test]
fn bad_requests_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let ps = paths(&dir, 1);
    let v = Volume::create(&ps, 64, opts(BackendChoice::Auto, 64, 8, 16 * PS)).unwrap();
    assert!(matches!(v.read(&[64]), Err(IoError::PastEnd { page: 64, .. })));
    let data = AlignedBuf::zeroed(2 * PS);
    assert!(matches!(v.write(&[3, 3], &data), Err(IoError::BadWrite(_))));
    assert!(matches!(v.write(&[1], &data), Err(IoError::BadWrite(_))));
    let unaligned = vec![0u8; PS + 1];
    assert!(matches!(v.write(&[1], &unaligned[1..]), Err(IoError::BadWrite(_))));
    let bad = VolumeOptions { page_size: 1000, ..Default::default() };
    assert!(matches!(Volume::open(&ps, bad), Err(IoError::Config(_))));
    assert!("zfs".parse::<BackendKind>().is_err());

    // Read-only volumes refuse writes.
    drop(v);
    let ro = Volume::open(&ps, VolumeOptions { writable: false, stripe_pages: 64, ..Default::default() }).unwrap();
    assert!(matches!(ro.write(&[0], &AlignedBuf::zeroed(PS)), Err(IoError::BadWrite(_))));

    // A member truncated behind the volume's back: short read, not garbage.
    let v = Volume::open(&ps, opts(BackendChoice::Force(BackendKind::Posix), 64, 8, 16 * PS)).unwrap();
    std::fs::OpenOptions::new().write(true).open(&ps[0]).unwrap().set_len(4096 * 10).unwrap();
    assert!(matches!(v.read(&[20, 30]), Err(IoError::ShortRead { .. })));
}

#[test]
fn injected_faults_surface() {
    let disk = SimDisk::new(1, 1);
    let o = opts(BackendChoice::Sim(disk.clone()), 8, 4, 4 * PS);
    let p = vec![PathBuf::from("sim0")];
    let v = Volume::create(&p, 32, o.clone()).unwrap();
    write_all(&v, 32, 1);
    v.sync(false).unwrap();

    // EIO on the next op.
    disk.set_faults(Faults { eio_at: Some(disk.ops()), ..Default::default() });
    match v.read(&[5]) {
        Err(IoError::Device { offset, .. }) => assert_eq!(offset, 5 * PS as u64),
        other => panic!("expected EIO, got {:?}", other.map(|_| ())),
    }
    // Bit flip on the next read: data differs in exactly one bit.
    disk.set_faults(Faults { flip_at: Some((disk.ops(), 100, 3)), ..Default::default() });
    let got = v.read(&[7]).unwrap();
    let mut want = vec![0u8; PS];
    fill(7, 1, &mut want);
    let diff: u32 = got.page(0).iter().zip(&want).map(|(a, b)| (a ^ b).count_ones()).sum();
    assert_eq!(diff, 1);

    // Unsynced writes are lost by a crash; synced ones survive.
    disk.set_faults(Faults::default());
    write_all(&v, 32, 2);
    disk.crash(CrashMode::LoseUnsynced);
    let got = v.read(&[9]).unwrap();
    fill(9, 1, &mut want);
    assert_eq!(got.page(0), &want[..]);

    // Torn: each unsynced write ends up as a sector prefix of the new data
    // over the old.
    let mut data = AlignedBuf::zeroed(4 * PS);
    for k in 0..4 {
        fill(k as u64, 3, &mut data[k * PS..(k + 1) * PS]);
    }
    v.write(&[0, 2, 4, 6], &data).unwrap();
    disk.crash(CrashMode::Torn { seed: 42 });
    let got = v.read(&[0, 2, 4, 6]).unwrap();
    let mut old = vec![0u8; PS];
    for k in 0..4 {
        fill(2 * k as u64, 1, &mut old);
        let new = &data[k * PS..(k + 1) * PS];
        let page = got.page(k);
        let cut = (0..=PS / SECTOR).find(|&s| page[s * SECTOR..] == old[s * SECTOR..]).unwrap();
        assert_eq!(&page[..cut * SECTOR], &new[..cut * SECTOR], "page {k} is not a sector prefix");
    }

    // Power cut: every op after it fails, until the crash image is built.
    disk.set_faults(Faults { power_cut_at: Some(disk.ops()), ..Default::default() });
    assert!(v.read(&[1]).is_err());
    assert!(v.sync(false).is_err());
    disk.crash(CrashMode::LoseUnsynced);
    assert!(v.read(&[1]).is_ok());
}

/// A loaded image is what a crash restores until the first sync, and a
/// synced one after it: the simulated disk keeps a durable copy apart
/// only from the first write after a load or a sync.
#[test]
fn sim_crash_restores_the_loaded_then_the_synced_image() {
    let disk = SimDisk::new(1, 1);
    let o = opts(BackendChoice::Sim(disk.clone()), 8, 4, 4 * PS);
    let p = vec![PathBuf::from("sim0")];
    let v = Volume::create(&p, 16, o.clone()).unwrap();
    write_all(&v, 16, 1);
    v.sync(false).unwrap();
    let image = disk.peek(0, 0, 16 * PS);
    drop(v);

    disk.load(0, image.clone());
    let v = Volume::open(&p, o).unwrap();
    write_all(&v, 16, 2);
    assert_ne!(disk.peek(0, 0, 16 * PS), image, "the writes landed");
    disk.crash(CrashMode::LoseUnsynced);
    assert_eq!(disk.peek(0, 0, 16 * PS), image, "a crash before any sync restores the loaded image");

    // Media damage to a clean member stays through a crash.
    disk.corrupt(0, 100, 0);
    disk.crash(CrashMode::LoseUnsynced);
    assert_eq!(disk.peek(0, 100, 1)[0], image[100] ^ 1);

    write_all(&v, 16, 3);
    v.sync(false).unwrap();
    let synced = disk.peek(0, 0, 16 * PS);
    write_all(&v, 16, 4);
    disk.crash(CrashMode::LoseUnsynced);
    assert_eq!(disk.peek(0, 0, 16 * PS), synced, "a crash after a sync restores the synced image");
}

/// Batches larger than the registered (fixed) buffers: reads land partly in
/// registered chunks and partly in plain ones, with single-page I/Os packed
/// many to a chunk, merged runs bounded by max_io_bytes, and a second batch
/// while the first one's pages are still held.
#[test]
fn large_batches_span_registered_and_plain_chunks() {
    for (name, backend) in [("uring", BackendKind::Uring), ("posix", BackendKind::Posix)] {
        for max_io in [PS, 3 * PS, 128 * PS] {
            let dir = tempfile::tempdir().unwrap();
            let ps = paths(&dir, 3);
            let o = VolumeOptions { registered_chunks: 1, ..opts(BackendChoice::Force(backend), 5, 16, max_io) };
            let v = Volume::create(&ps, 3000, o).unwrap();
            let n = v.num_pages();
            write_all(&v, n, 4);
            // Every page in a scrambled order, some twice, and a sorted run.
            let mut batch: Vec<u64> = (0..n).map(|i| (i * 7919) % n).collect();
            batch.extend((0..200).map(|i| (i * 13) % n));
            let held = v.read(&batch).unwrap();
            let seq: Vec<u64> = (100..900).collect();
            let got = v.read(&seq).unwrap();
            let mut want = vec![0u8; PS];
            for (i, &p) in batch.iter().enumerate() {
                fill(p, 4, &mut want);
                assert!(held.page(i) == &want[..], "{name} max_io {max_io}: page {p} wrong");
            }
            for (i, &p) in seq.iter().enumerate() {
                fill(p, 4, &mut want);
                assert!(got.page(i) == &want[..], "{name} max_io {max_io}: page {p} wrong");
            }
            let merged: u64 = v.stats().iter().map(|s| s.merged_pages).sum();
            assert_eq!(merged > 0, max_io > PS, "{name} max_io {max_io}: merged {merged}");
        }
    }
}
