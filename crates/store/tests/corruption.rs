//! Corruption at every byte: two small stores that hold every page kind
//! (packed adjacency and extents, GTT pages, presence bitmaps, in-lists,
//! lower lists and the degree table, order and hot tables, tombstones and
//! the tensor map, tensors, weights, labels, both superblock copies, a WAL
//! with records, a pending delta). Each byte of each file is flipped in
//! turn, and each file truncated and extended; after every mutation, open +
//! verify + neighbors/tensor/sample/bfs either return exactly the graph of
//! the unmutated store or fail with an error, never a panic, never other
//! data. The one older answer accepted is the WAL's torn-tail rule: damage
//! in the log's last record reads as an interrupted append and drops that
//! record, which no checksum can tell apart.
//!
//! CI flips every header byte of every page in use and a deterministic
//! sample of the rest (every 509th byte); `SG_CORRUPTION_STRIDE=1` flips
//! every byte (the unused pages past the first all alike are skipped).
//! A log cut short reads as an older state the log's prefix gives: the
//! superblock does not record where the log ends (only a merge writes it),
//! so that loss is beyond what the files can show.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::Arc;

use solidgraph_engine::bfs::bfs;
use solidgraph_engine::sampler::{SampleOptions, sample_neighbors};
use solidgraph_io::SimDisk;
use solidgraph_store::*;

const PAGE: usize = 4096;

/// Everything the reads return; two answers are equal when all of it is.
#[derive(Debug, Clone, PartialEq)]
struct Answer {
    nodes: u64,
    external: Option<Vec<u32>>,
    out: Csr,
    inn: Csr,
    lower: Option<Csr>,
    lower_degrees: Option<Vec<u32>>,
    x: Rows,
    y: Rows,
    sample: solidgraph_engine::sampler::Sample,
    levels: Vec<i64>,
}

fn rnd(x: &mut u64) -> u64 {
    *x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    *x >> 33
}

/// The reads every mutation is judged by; verify runs first.
fn answer(s: &Store) -> std::result::Result<Answer, String> {
    s.verify(&mut |_, _| {}).map_err(|e| e.to_string())?;
    let n = s.num_nodes();
    let ids: Vec<u64> = (0..n).collect();
    let lower = s.has_lower_lists();
    let directed = s.directed();
    let e = |e: StoreError| e.to_string();
    Ok(Answer {
        nodes: n,
        external: s.external_ids().map_err(e)?.map(|v| v.to_vec()),
        out: s.neighbors(&ids, Direction::Out, true, s.has_labels()).map_err(e)?,
        inn: if directed { s.neighbors(&ids, Direction::In, true, true).map_err(e)? } else { Csr::default() },
        lower: if lower { Some(s.neighbors(&ids, Direction::Lower, false, false).map_err(e)?) } else { None },
        lower_degrees: s.lower_degrees().map_err(e)?,
        x: s.tensor("x", &ids).map_err(e)?,
        y: s.tensor("y", &ids).map_err(e)?,
        sample: sample_neighbors(
            s,
            &[0, 1, 2, 5, 9],
            &SampleOptions {
                fanouts: vec![4, 3],
                seed: 7,
                tensors: vec!["x".into()],
                direction: if directed { Direction::In } else { Direction::Out },
                ..Default::default()
            },
        )
        .map_err(|e| e.to_string())?,
        levels: bfs(s, 0, None, false, &solidgraph_engine::silent).map_err(|e| e.to_string())?.levels,
    })
}

fn open_ro(dir: &Path, disk: &Arc<SimDisk>) -> Result<Store> {
    Store::open(dir, &OpenOptions { cache_bytes: 1 << 20, backend: BackendChoice::Sim(disk.clone()), ..Default::default() })
}

fn open_file(dir: &Path, writable: bool) -> Store {
    Store::open(dir, &OpenOptions { writable, cache_bytes: 1 << 20, delta_budget: 0, ..Default::default() }).unwrap()
}

fn tensors(n: u64) -> Vec<TensorInput> {
    let x: Vec<u8> = (0..n * 4).flat_map(|i| (i as f32 * 0.5).to_le_bytes()).collect();
    let y: Vec<u8> = (0..n).flat_map(|i| (i as i64 % 7 - 3).to_le_bytes()).collect();
    vec![
        TensorInput { name: "x".into(), data: TensorData::Memory { dtype: DType::F32, rows: n, dim: 4, bytes: x } },
        TensorInput { name: "y".into(), data: TensorData::Memory { dtype: DType::I64, rows: n, dim: 1, bytes: y } },
    ]
}

/// Edges with two hubs (their lists are extents) and a random rest.
fn edges(n: u64, seed: u64) -> (Vec<u64>, Vec<u64>) {
    let (mut a, mut b) = (vec![], vec![]);
    let mut rng = seed;
    for d in (1..n).step_by(2) {
        a.push(3);
        b.push(d);
    }
    for _ in 0..600 {
        a.push(n - 2);
        b.push(rnd(&mut rng) % n);
    }
    for _ in 0..2500 {
        a.push(rnd(&mut rng) % n);
        b.push(rnd(&mut rng) % n);
    }
    (a, b)
}

/// A directed store with in-edges, weights, labels and a degree order; a
/// merge after vertex adds (tensor map), a deletion (tombstones) and edge
/// updates; then three logged batches left pending (WAL records, a delta).
/// Returns the answers after each step the log can be cut back to: the
/// merged store, then one per logged batch (the last is the final graph).
fn build_directed(dir: &Path) -> Vec<Answer> {
    let n = 1200;
    let (a, b) = edges(n, 1);
    let m = a.len();
    let w: Vec<f32> = (0..m).map(|i| (i % 13) as f32 + 0.25).collect();
    let l: Vec<u32> = (0..m).map(|i| (i % 5) as u32).collect();
    let o = ImportOptions {
        in_edges: true,
        weights: true,
        labels: true,
        dedup: true,
        num_nodes: Some(n),
        page_size: PAGE,
        order: order::VertexOrder::Degree,
        ..Default::default()
    };
    import(dir, &[EdgeInput::Memory { src: a, dst: b, weights: Some(w), labels: Some(l) }], &tensors(n), &o, &|_, _, _| {}).unwrap();
    let s = open_file(dir, true);
    let rows = |k: u64, base: u64| -> Vec<(String, Vec<u8>)> {
        vec![
            ("x".into(), (0..k * 4).flat_map(|i| ((base * 4 + i) as f32).to_le_bytes()).collect()),
            ("y".into(), (0..k).flat_map(|i| ((base + i) as i64).to_le_bytes()).collect()),
        ]
    };
    s.add_vertices(40, &rows(40, n), true).unwrap();
    s.delete_vertices(&[11], true).unwrap();
    s.add_edges(&[n, n + 1, 4], &[0, 2, n + 3], Some(&[1.5, 2.5, 3.5]), Some(&[1, 2, 3]), true).unwrap();
    s.update_tensor("x", &[5, 6], &(0..8).flat_map(|i| (100.0 + i as f32).to_le_bytes()).collect::<Vec<u8>>(), true).unwrap();
    s.merge().unwrap();
    let mut states = vec![answer(&open_file(dir, false)).unwrap()];
    s.add_edges(&[7, 8], &[9, 10], Some(&[0.5, 0.75]), Some(&[4, 4]), true).unwrap();
    states.push(answer(&open_file(dir, false)).unwrap());
    s.update_tensor("y", &[1], &77i64.to_le_bytes(), true).unwrap();
    states.push(answer(&open_file(dir, false)).unwrap());
    s.delete_edges(&[n], &[0], true).unwrap();
    states.push(answer(&open_file(dir, false)).unwrap());
    drop(s);
    states
}

/// An undirected store with lower lists (their GTT, bitmap and degree
/// table), never updated.
fn build_undirected(dir: &Path) -> Vec<Answer> {
    let n = 900;
    let (a, b) = edges(n, 2);
    let o = ImportOptions { undirected: true, lower_lists: true, weights: true, dedup: true, num_nodes: Some(n), page_size: PAGE, ..Default::default() };
    let w: Vec<f32> = (0..a.len()).map(|i| (i % 3) as f32).collect();
    import(dir, &[EdgeInput::Memory { src: a, dst: b, weights: Some(w), labels: None }], &tensors(n), &o, &|_, _, _| {}).unwrap();
    vec![answer(&open_file(dir, false)).unwrap()]
}

#[derive(Default, Debug)]
struct Tally {
    tried: u64,
    same: u64,
    torn_tail: u64,
    log_prefix: u64,
    errors: BTreeMap<String, u64>,
}

/// The kind of an error message, for the tally: its text up to the first
/// digit-free word after "page N:" etc. is too varied, so the leading
/// words.
fn kind(msg: &str) -> String {
    if msg.starts_with("page ") {
        return "page N: corrupt".into();
    }
    if msg.contains("WAL record") {
        return "WAL record damaged".into();
    }
    if msg.contains("size") && msg.contains("is not") {
        return "member file size wrong".into();
    }
    if msg.contains("superblock") {
        return "superblock".into();
    }
    msg.split(':').next_back().unwrap_or(msg).split_whitespace().take(4).collect::<Vec<_>>().join(" ")
}

/// What a mutation may read as besides the unmutated graph: nothing, the
/// state before the log's last record (damage there reads as a torn
/// append), or any state the log's prefix gives (a log cut short reads as
/// one with fewer appends; the superblock does not record the log's end).
#[derive(Clone, Copy, PartialEq)]
enum Allow {
    Nothing,
    TornTail,
    Prefix,
}

/// One mutated image: member 0 and the log as given.
fn trial(scratch: &Path, member: Vec<u8>, wal: &[u8], states: &[Answer], tally: &mut Tally, what: &str, allow: Allow) {
    std::fs::write(scratch.join("wal.log"), wal).unwrap();
    let disk = SimDisk::new(1, 3);
    disk.load(0, member);
    tally.tried += 1;
    let got = catch_unwind(AssertUnwindSafe(|| open_ro(scratch, &disk).map_err(|e| e.to_string()).and_then(|s| answer(&s))));
    let got = got.unwrap_or_else(|_| panic!("{what}: panicked"));
    let last = states.len() - 1;
    match got {
        Ok(a) if a == states[last] => tally.same += 1,
        Ok(a) if allow == Allow::TornTail && last > 0 && a == states[last - 1] => tally.torn_tail += 1,
        Ok(a) if allow == Allow::Prefix && states.contains(&a) => tally.log_prefix += 1,
        Ok(a) => {
            let old = states.iter().position(|s| *s == a);
            panic!("{what}: different data (an older state: {old:?}; {} vertices)", a.nodes)
        }
        Err(e) => *tally.errors.entry(kind(&e)).or_default() += 1,
    }
}

/// Which bytes of a member image to flip: every page's header and every
/// `stride`-th byte after a per-page offset, on pages in use (not all
/// zeros) and the first unused one.
fn positions(image: &[u8], stride: usize) -> Vec<usize> {
    let mut unused = 0;
    let mut out = vec![];
    for (p, pg) in image.chunks(PAGE).enumerate() {
        if pg.iter().all(|&b| b == 0) {
            unused += 1;
            if unused > 1 {
                continue;
            }
        }
        out.extend((0..pg.len()).filter(|&i| i < 40 || i % stride == p % stride).map(|i| p * PAGE + i));
    }
    out
}

fn sweep(name: &str, dir: &Path, states: &[Answer]) -> Tally {
    // 1 flips every byte (about 25 ms a trial, most of it open, verify and
    // the reads).
    let stride: usize = std::env::var("SG_CORRUPTION_STRIDE").ok().and_then(|s| s.parse().ok()).unwrap_or(509);
    let image = std::fs::read(member_path(dir, 0)).unwrap();
    let wal = std::fs::read(dir.join("wal.log")).unwrap_or_default();
    let scratch = tempfile::tempdir().unwrap();
    let mut t = Tally::default();
    // The unmutated store reads as itself.
    trial(scratch.path(), image.clone(), &wal, states, &mut t, "unmutated", Allow::Nothing);
    assert_eq!(t.same, 1, "{name}: the unmutated store must read back");
    let last_record = wal_last_record(&wal);
    let t0 = std::time::Instant::now();
    for i in positions(&image, stride) {
        let mut m = image.clone();
        m[i] ^= 1 << (i % 8) | 0x10;
        trial(scratch.path(), m, &wal, states, &mut t, &format!("{name}: sg.0 byte {i} (page {})", i / PAGE), Allow::Nothing);
    }
    eprintln!("{name}: {} member flips in {:?}", t.tried, t0.elapsed());
    for i in (0..wal.len()).filter(|i| i % stride.min(7) == 0 || *i >= last_record) {
        let mut m = wal.clone();
        m[i] ^= 1 << (i % 8);
        trial(
            scratch.path(),
            image.clone(),
            &m,
            states,
            &mut t,
            &format!("{name}: wal.log byte {i}"),
            if i >= last_record { Allow::TornTail } else { Allow::Nothing },
        );
    }
    // Truncated and extended files: at every page boundary (and mid-page)
    // for the member, at every byte for the log.
    let used = image.len() - image.chunks(PAGE).rev().take_while(|p| p.iter().all(|&b| b == 0)).count() * PAGE;
    for cut in (0..used + PAGE).step_by(PAGE / 2).chain([image.len() - PAGE, image.len() - 1]) {
        trial(scratch.path(), image[..cut].to_vec(), &wal, states, &mut t, &format!("{name}: sg.0 cut to {cut}"), Allow::Nothing);
    }
    for extra in [1usize, 512, PAGE, 3 * PAGE] {
        let mut m = image.clone();
        m.extend((0..extra).map(|i| (i * 31) as u8));
        trial(scratch.path(), m, &wal, states, &mut t, &format!("{name}: sg.0 extended by {extra}"), Allow::Nothing);
    }
    for cut in 0..wal.len() {
        if cut % stride.min(3) == 0 || cut >= last_record {
            trial(scratch.path(), image.clone(), &wal[..cut], states, &mut t, &format!("{name}: wal.log cut to {cut}"), Allow::Prefix);
        }
    }
    for extra in [1usize, 19, 20, 100] {
        let mut m = wal.clone();
        m.extend((0..extra).map(|i| (i * 31 + 1) as u8));
        trial(scratch.path(), image.clone(), &m, states, &mut t, &format!("{name}: wal.log extended by {extra}"), Allow::Nothing);
    }
    eprintln!("{name}: {} pages, {} log bytes: {t:?}", image.len() / PAGE, wal.len());
    t
}

/// Where the log's last record starts (the records are back to back).
fn wal_last_record(wal: &[u8]) -> usize {
    let (mut at, mut last) = (0, 0);
    while at + wal::HEADER <= wal.len() {
        let len = u32::from_le_bytes(wal[at + 4..at + 8].try_into().unwrap()) as usize;
        last = at;
        at += wal::HEADER + len;
    }
    last
}

#[test]
fn every_byte_flipped_truncated_or_extended() {
    let dir = tempfile::tempdir().unwrap();
    let (d, u) = (dir.path().join("directed"), dir.path().join("undirected"));
    let ds = build_directed(&d);
    let us = build_undirected(&u);
    assert!(ds[0] != ds[3], "the logged batches change the graph");
    assert!(ds[3].external.is_some() && us[0].lower.is_some(), "order tables and lower lists are present");
    let a = sweep("directed", &d, &ds);
    let b = sweep("undirected", &u, &us);
    assert!(a.errors.values().sum::<u64>() > 0 && b.errors.values().sum::<u64>() > 0, "damage is detected");
}
