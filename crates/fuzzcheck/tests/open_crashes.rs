//! Crashes the fuzzers found, each kept in fuzz/crashes/<target>/ and
//! replayed here, #[ignore]d with the reason until the fix lands; then the
//! input moves to fuzz/corpus/<target>/ (replayed by corpus.rs) and its
//! test goes, unless the test checks more than the replay does.

use std::path::Path;

use solidgraph_store::StoreError;

fn replay(target: &str, name: &str) {
    solidgraph_fuzzcheck::run(target, &input(target, name));
}

fn input(target: &str, name: &str) -> Vec<u8> {
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/crashes").join(target).join(name);
    std::fs::read(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()))
}

/// The RDF store an rdf_bytes input makes, written to a new directory.
fn rdf_bytes_store(name: &str) -> tempfile::TempDir {
    let files = solidgraph_fuzzcheck::rdf::rdf_bytes_files(&input("rdf_bytes", name)).expect("a whole input");
    let dir = tempfile::tempdir().unwrap();
    for (rel, bytes) in &files {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, bytes).unwrap();
    }
    dir
}

/// A damaged adjacency page (checksum recomputed) decodes to a neighbor id
/// at or past the vertex count; BFS indexes its `unvisited` bitmap by it
/// (engine/src/frontier.rs `contains`: "index out of bounds: the len is 5
/// but the index is 5"). `verify` reports such an id (store/src/verify.rs);
/// the list decoders now refuse it too (a corruption error naming the
/// page), so BFS from every source returns an error or an answer.
#[test]
fn store_bytes_bfs_neighbor_past_the_vertex_count() {
    let data = input("store_bytes", "crash-8cfaf08b8229cead8e9af7c6c0a0e4eb05320443");
    let image = solidgraph_fuzzcheck::store_bytes_image(&data).expect("a whole input");
    let s = solidgraph_fuzzcheck::open_image(image).expect("the damaged store opens");
    assert!(s.verify(&mut |_, _| {}).is_err(), "verify reports the damage");
    for source in 0..s.num_nodes() {
        let _ = solidgraph_engine::bfs::bfs(&s, source, None, true, &solidgraph_engine::silent);
    }
}

/// `k` log records in `fuzzcheck::wal`'s input format, each adding 2^32
/// vertices (the most one `add_vertices` batch may) without rows.
fn add_vertices_records(k: usize) -> Vec<u8> {
    let mut payload = 0i64.to_le_bytes().to_vec(); // edges added
    payload.push(1); // AddVertices
    payload.extend_from_slice(&(1u64 << 32).to_le_bytes());
    payload.extend_from_slice(&0u64.to_le_bytes()); // no tensors
    let mut data = Vec::new();
    for _ in 0..k {
        data.extend_from_slice(&(payload.len() as u16).to_le_bytes());
        data.extend_from_slice(&payload);
    }
    data
}

/// Log records (valid checksums) that replayed to a huge vertex count; a
/// BFS then walked `chunk_ranges` over it for minutes with gigabytes (the
/// fuzzer's input: a record of 2^53 vertices, refused since by the
/// per-batch limit). Batches each within the limit still add up: replay
/// refuses growth past `MAX_GROWN_NODES`, and a whole-graph pass refuses a
/// vertex count the machine cannot keep state for, at once.
#[test]
fn wal_replayed_vertex_count_hangs_bfs() {
    replay("wal", "timeout-9332edd52d3d230a71260b9d404d782d7f65b20a");
    let s = solidgraph_fuzzcheck::open_wal(&add_vertices_records(8)).expect("eight batches of 2^32 vertices replay");
    assert!(s.num_nodes() > 8 << 32, "{} vertices", s.num_nodes());
    let t = std::time::Instant::now();
    let e = solidgraph_engine::bfs::bfs(&s, 0, None, true, &solidgraph_engine::silent).expect_err("no machine holds the state");
    assert!(matches!(e, solidgraph_engine::EngineError::OverBudget { algorithm: "BFS", .. }), "{e}");
    assert!(t.elapsed().as_secs() < 10, "refused at once, not after a walk: {:?}", t.elapsed());
    solidgraph_fuzzcheck::run("wal", &add_vertices_records(8));
    drop(s);
    let grown = 1usize << (48 - 32);
    match solidgraph_fuzzcheck::open_wal(&add_vertices_records(grown)) {
        Err(StoreError::BadInput { reason, .. }) => assert!(reason.contains(&format!("record {}", grown as u64 + fixture_checkpoint())), "{reason}"),
        other => panic!("replay past the growth limit: {:?}", other.map(|s| s.num_nodes())),
    }
}

fn fixture_checkpoint() -> u64 {
    solidgraph_fuzzcheck::fixture().checkpoint
}

/// A damaged page (checksum recomputed) whose edge counts sized the range
/// read's buffers: `Store::read_range` asked the allocator for 0x10000dea20
/// bytes (an abort), or the size overflowed ("capacity overflow"). Open now
/// checks every GTT entry's edges against what its page can hold and the
/// direction's edge count (`base::check_gtt_edges`).
#[test]
fn store_bytes_edge_counts_size_read_range_buffers() {
    for name in ["crash-da84d596a4e4023d6bb912605081f86b63497ba6", "crash-7494742a31d2980471fc83b2065c59f26a40e631"] {
        let data = input("store_bytes", name);
        let image = solidgraph_fuzzcheck::store_bytes_image(&data).expect("a whole input");
        match solidgraph_fuzzcheck::open_image(image) {
            Err(StoreError::Corrupt { page, reason }) => assert!(reason.starts_with("GTT entry"), "{name}: page {page}: {reason}"),
            other => panic!("{name}: {:?}", other.map(|s| s.num_nodes())),
        }
        replay("store_bytes", name);
    }
}

/// Out of memory under libFuzzer's 2 GiB limit (found 2026-11-26 with
/// `cargo fuzz run -s none -O store_bytes`): the damaged store declares
/// billions of vertices, few enough to pass `Store::chunk_ranges`'s
/// machine-memory floor (8 bytes a vertex), and BFS then allocated its
/// u32 levels for all of them (engine/src/state.rs `filled`, from
/// bfs.rs `bfs_with`). Each algorithm now sizes its state and checks it
/// against the state budget (`state::reserve`) before allocating.
#[test]
fn store_bytes_bfs_state_for_billions_of_vertices() {
    over_budget("store_bytes", "oom-160a5fc132d69c88a48c9da884c851e3a6abc541");
}

/// Replays an input whose store declares more vertices than the fuzz
/// budget holds state for, then checks that BFS on it is refused by the
/// budget, naming the algorithm and the bytes, without allocating them.
fn over_budget(target: &str, name: &str) {
    let data = input(target, name);
    replay(target, name);
    let image = match target {
        "store_bytes" => solidgraph_fuzzcheck::store_bytes_image(&data).expect("a whole input"),
        _ => solidgraph_fuzzcheck::page_image(&data).expect("a whole input"),
    };
    let s = solidgraph_fuzzcheck::open_image(image).expect("the damaged store opens");
    let n = s.num_nodes();
    assert!(n.saturating_mul(13) > solidgraph_fuzzcheck::STATE_BUDGET, "{n} vertices");
    match solidgraph_engine::bfs::bfs(&s, 0, None, true, &solidgraph_engine::silent) {
        Err(solidgraph_engine::EngineError::OverBudget { algorithm, needed, budget }) => {
            assert_eq!((algorithm, budget), ("BFS", solidgraph_fuzzcheck::STATE_BUDGET));
            assert!(needed > budget && needed >= n * 21, "{needed} bytes for {n} vertices");
        }
        other => panic!("{n} vertices: {:?}", other.map(|b| b.levels.len())),
    }
}

/// Out of memory under libFuzzer's 2 GiB limit (found 2026-11-26 with
/// `cargo fuzz run -s none -O page`): a damaged superblock page declares
/// billions of vertices and BFS allocates its levels for all of them, as
/// in `store_bytes_bfs_state_for_billions_of_vertices` (gdb: `filled`
/// from `bfs_with`); refused by the state budget now.
#[test]
fn page_superblock_allocation_past_the_budget() {
    over_budget("page", "oom-6354edd95cf0c0738de449335e2709c651971a59");
}

/// Opens the image `target` makes of input `name`; `verify` must report
/// the damage as corruption (it aborted on an allocation sized by it).
fn verify_refuses(target: &str, name: &str, what: &str) {
    let data = input(target, name);
    let image = match target {
        "store_bytes" => solidgraph_fuzzcheck::store_bytes_image(&data),
        _ => solidgraph_fuzzcheck::page_image(&data),
    };
    let s = solidgraph_fuzzcheck::open_image(image.expect("a whole input")).expect("the damaged store opens");
    match s.verify(&mut |_, _| {}) {
        Err(StoreError::Corrupt { reason, .. }) => assert!(reason.contains(what), "{name}: {reason}"),
        other => panic!("{name}: {other:?}"),
    }
    replay(target, name);
}

/// Out of memory in verify (found 2026-11-26, `-s none -O page`, 43K
/// executions in): a damaged superblock region's page count reaching past
/// the store made `space::pages_in_use` list every page of it (a 436 PB
/// vector). A region past the store now adds one page past the end, which
/// verify reports.
#[test]
fn page_region_past_the_store_listed_page_by_page() {
    verify_refuses("page", "crash-3d75d181e27afd4b5734eb4dc3ed84b4ba396b7e", "region");
}

/// Out of memory in verify (found 2026-11-26, `-s none -O store_bytes`):
/// a damaged vertex count sized the lower lists' degree array (260 GB);
/// verify now refuses a count whose 4 B a vertex cannot lie in the store.
#[test]
fn store_bytes_vertex_count_sized_the_degree_check() {
    verify_refuses("store_bytes", "crash-63cb7f94df2631967513733bb4a4c686ee1c8c0b", "degrees cannot lie");
}

/// A damaged quad page of an RDF store (checksum recomputed) names term id
/// 0, which no term has; decoding the quads indexed the batch's terms by it
/// (rdf/src/store.rs `decode_quads`: "decoded above"). Now that is a
/// corruption error naming the store, from the pattern reads and queries.
#[test]
fn rdf_bytes_quad_names_no_term() {
    let dir = rdf_bytes_store("crash-7cf22295d3dad1bb6e85d1f18926f350ef7038b7");
    let s = solidgraph_rdf::RdfStore::open(dir.path(), &solidgraph_rdf::OpenOptions::default()).expect("the damaged store opens");
    let e = s.quads_for_pattern(None, None, None, None).expect_err("the damaged quad is reported");
    assert!(e.to_string().contains("no term"), "{e}");
    replay("rdf_bytes", "crash-7cf22295d3dad1bb6e85d1f18926f350ef7038b7");
}

/// Found by rdf_bytes (round 3, build of 9c38a29): the quad store's
/// superblock page overwritten from byte 16 (checksum recomputed) declared
/// billions of vertices; a pattern with no bound term then scanned every id
/// (42 s, past libFuzzer's timeout). Open now refuses a quad store whose
/// vertex count is not the dictionary's terms + 1, naming the quad store.
#[test]
fn rdf_bytes_damaged_superblock_vertex_count() {
    let dir = rdf_bytes_store("timeout-12b10a4e29bb40a5a99a7720b964b403589a61f4");
    match solidgraph_rdf::RdfStore::open(dir.path(), &solidgraph_rdf::OpenOptions::default()) {
        Err(e @ solidgraph_rdf::RdfError::Corrupt { .. }) => assert!(e.to_string().contains("rdf.meta says"), "{e}"),
        Err(e) => panic!("a corruption error, not {e}"),
        Ok(_) => panic!("the damaged vertex count is refused at open"),
    }
    let t = std::time::Instant::now();
    replay("rdf_bytes", "timeout-12b10a4e29bb40a5a99a7720b964b403589a61f4");
    assert!(t.elapsed().as_secs() < 30, "within libFuzzer's timeout: {:?}", t.elapsed());
}

/// Found by rdf_bytes (round 4): the dictionary's header rewritten
/// (checksum recomputed) declared a directory longer than its directory
/// pages hold; open read the entries past the bytes read (rdf/src/dictfile.rs
/// `le64`: "range end index 32 out of range for slice of length 24"). Open
/// now checks the directory's length against the header's, a corruption
/// error naming the dictionary.
#[test]
fn rdf_bytes_dictionary_directory_shorter_than_its_header() {
    let name = "crash-905aaf18758ff7f2380d09f62d1369a3c34f2ee9";
    let dir = rdf_bytes_store(name);
    match solidgraph_rdf::RdfStore::open(dir.path(), &solidgraph_rdf::OpenOptions::default()) {
        Err(e @ solidgraph_rdf::RdfError::Corrupt { .. }) => assert!(e.to_string().contains("dict."), "{e}"),
        Err(e) => panic!("a corruption error, not {e}"),
        Ok(_) => panic!("the damaged dictionary header is refused at open"),
    }
    replay("rdf_bytes", name);
}

/// Found by rdf_bytes (round 4): the quad store's superblock (checksum
/// recomputed) declared a stripe unit whose row of bytes (unit x page size)
/// wrapped to 0; the volume's open took each member's length modulo it
/// (io/src/volume.rs: "attempt to calculate the remainder with a divisor
/// of zero"). The volume now refuses a stripe unit past 2^24 pages.
#[test]
fn rdf_bytes_stripe_unit_wraps_the_row_size() {
    let name = "crash-3c68fabfab661d37687849601fa4ebb5f76c211d";
    let dir = rdf_bytes_store(name);
    match solidgraph_rdf::RdfStore::open(dir.path(), &solidgraph_rdf::OpenOptions::default()) {
        Err(e) => assert!(e.to_string().contains("stripe unit"), "{e}"),
        Ok(_) => panic!("the damaged stripe unit is refused at open"),
    }
    replay("rdf_bytes", name);
}

/// Found by rdf_bytes (round 4): rdf.meta (checksum recomputed) declared
/// a label-pair count whose 16 bytes a pair wrapped to the file's length;
/// collecting the pairs overflowed a vector's capacity (rdf/src/meta.rs).
/// The length check is now overflow-checked: a corruption error.
#[test]
fn rdf_bytes_meta_pair_count_wraps_the_length() {
    let name = "crash-0c63c896e0dbdf79caf4f98ef7d7d6be772b5abc";
    let dir = rdf_bytes_store(name);
    match solidgraph_rdf::RdfStore::open(dir.path(), &solidgraph_rdf::OpenOptions::default()) {
        Err(e @ solidgraph_rdf::RdfError::Corrupt { .. }) => assert!(e.to_string().contains("label count"), "{e}"),
        Err(e) => panic!("a corruption error, not {e}"),
        Ok(_) => panic!("the damaged pair count is refused at open"),
    }
    replay("rdf_bytes", name);
}

/// A damaged vertex-order table (checksum recomputed) whose vertex count
/// exceeds the words it holds: mapping a few ids (the sampler's draws,
/// `Store::to_external`) read each id's table word by position and indexed
/// an empty read ("index out of bounds: the len is 0 but the index is 0",
/// store/src/order.rs `map`; found 2026-12-08 by `store_bytes`). The count
/// is now checked against the table's length before any map is read, as
/// loading a whole map already did.
#[test]
fn store_bytes_order_table_shorter_than_its_count() {
    let name = "crash-96071374c69fa72e5679b28ebe17ae1f601297eb";
    let image = solidgraph_fuzzcheck::store_bytes_image(&input("store_bytes", name)).expect("a whole input");
    let s = solidgraph_fuzzcheck::open_image(image).expect("the damaged store opens");
    for few in [vec![0u64], (0..s.num_nodes().min(64)).collect()] {
        let mut ids = few.clone();
        match s.to_external(&mut ids) {
            Err(StoreError::Corrupt { reason, .. }) => assert!(reason.starts_with("vertex order of"), "{} ids: {reason}", few.len()),
            other => panic!("{} ids: {other:?}", few.len()),
        }
    }
    replay("store_bytes", name);
}

/// A damaged adjacency page (checksum recomputed) whose gaps sum past
/// 2^64: the decoders added gaps wrapping, so the list came out unsorted
/// with a small last id, and the check against the vertex count (which
/// reads a sorted list's last id) passed an id of 2^58 - 1; a top-down BFS
/// level indexed its `unvisited` bitset by it ("index out of bounds: the
/// len is 5 but the index is 288230376151711743", engine/src/frontier.rs
/// `contains`; found 2026-12-08 by `store_bytes`). A sum past 2^64 is now
/// malformed (store/src/varint.rs), a corruption error naming the page.
#[test]
fn store_bytes_gaps_that_wrap_past_2_64() {
    let name = "crash-f84dd84315eda134212ced72dabe79201efd61d1";
    let image = solidgraph_fuzzcheck::store_bytes_image(&input("store_bytes", name)).expect("a whole input");
    let s = solidgraph_fuzzcheck::open_image(image).expect("the damaged store opens");
    let ids: Vec<u64> = (0..s.num_nodes()).collect();
    let mut refused = 0;
    for dir in [solidgraph_store::Direction::Out, solidgraph_store::Direction::In] {
        match s.neighbors(&ids, dir, false, false) {
            Ok(csr) => assert!(csr.indices.iter().all(|&u| u < s.num_nodes()), "{dir:?}: an id past the vertex count"),
            Err(StoreError::Corrupt { .. }) => refused += 1,
            Err(e) => panic!("{dir:?}: {e}"),
        }
    }
    assert!(refused > 0, "the damaged list is refused");
    for source in 0..s.num_nodes() {
        let _ = solidgraph_engine::bfs::bfs(&s, source, None, false, &solidgraph_engine::silent);
    }
    replay("store_bytes", name);
}
