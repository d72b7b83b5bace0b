//! The term dictionary's file, `dict.<gen>` (format version 4): 4 KiB
//! pages read with direct I/O through the I/O layer's `Volume`, each page
//! checksummed, so a store's dictionary costs memory in proportion to its
//! pages' directory, not its terms.
//!
//! ```text
//! page 0      header: magic, version, page size, counts, CRC32C in its last 4 bytes
//! 1 ..        term blocks, in id order: crc u32 | kind u8 | pad 3 | count u32 |
//!             used u32 | first id u64 | (len u32, term bytes)*; a block is one
//!             page, or as many as its one term needs
//! then        hash pages: crc u32 | kind u8 | pad 3 | count u32 | pad 4 |
//!             (hash u64, id u64)* sorted, 255 a page
//! then        directory pages: crc u32 | kind u8 | pad 3 | len u32 | pad 4 | bytes:
//!             (first id u64, first page u64) per block, first hash u64 per
//!             hash page, first id u64 per inline page
//! then        inline pages: crc u32 | kind u8 | pad 3 | count u32 | pad 4 |
//!             (id u64, inlined id u64)* in id order, 255 a page: the terms
//!             that are values inlined in query-time ids (inline.rs)
//! ```
//!
//! Inline pages are read on demand through the same cache as the others:
//! the directory's first id per page names the page of a term id. Version
//! 3 has no inline entries in its directory: they are rebuilt at open by
//! reading the inline pages once (8 bytes a page kept), and `solidgraph
//! rdf compact` converts it. A version 2 file (no inline pages) is read
//! only to convert it.
//!
//! id -> term: the directory names the block; term -> id: the hash names
//! the hash page(s), the candidates' terms are read and compared, so a hash
//! collision never maps a term to another's id. Both ways are batched: one
//! call reads every page a batch needs in one `Volume::read`. Pages go
//! through a cache with a byte budget.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;
use solidgraph_io::{BackendChoice, Volume, VolumeOptions};

use crate::error::{RdfError, Result, corrupt, io_err};

pub const PAGE: usize = 4096;
pub const MAGIC: &[u8; 8] = b"SGRDFDIC";
pub const VERSION: u32 = 4;
/// Inline pages without their directory entries: opened, rebuilding them.
pub const VERSION_INLINE_UNLISTED: u32 = 3;
/// The paged format before inline pages: read only to convert it.
pub const VERSION_NO_INLINE: u32 = 2;
const KIND_TERMS: u8 = 1;
const KIND_HASH: u8 = 2;
const KIND_DIR: u8 = 3;
const KIND_INLINE: u8 = 4;
/// Inlined terms a file may list (a limit on everything; the directory
/// holds 8 bytes per 255 of them when open).
const MAX_INLINE: u64 = 1 << 32;
const TERM_HEAD: usize = 24;
const HASH_HEAD: usize = 16;
const HASH_PER_PAGE: usize = (PAGE - HASH_HEAD) / 16;
const DIR_HEAD: usize = 16;
const DIR_PER_PAGE: usize = PAGE - DIR_HEAD;
/// Pages read with a single block that misses the cache (the blocks after it).
const READ_AHEAD_PAGES: u64 = 16;
/// Pages one batched read asks for at most (a limit on everything).
const MAX_BATCH_PAGES: usize = 1 << 14;
/// Bytes of (hash, id) pairs a writer holds before it writes a sorted run
/// ([`DictWriter::create`]; the bulk load passes its own share).
pub const HASH_BUDGET: u64 = 64 << 20;
/// (hash, id) pairs per run at least, whatever the budget (1 MiB).
const MIN_RUN_PAIRS: usize = 1 << 16;
/// Sorted runs one writer merges at most; a dictionary needing more is
/// refused with a clear error (raise the budget).
const MAX_HASH_RUNS: usize = 4096;

/// The 64-bit hash of a term's bytes: FNV-1a with a final mix, written out
/// because the file depends on it never changing (std's and rustc-hash's
/// hashers may change between releases).
pub fn hash(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in b {
        h ^= u64::from(x);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

fn put_crc(page: &mut [u8]) {
    let c = crc32c::crc32c(&page[4..]);
    page[..4].copy_from_slice(&c.to_le_bytes());
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Streams terms, in id order from 1, into a new dictionary file.
pub struct DictWriter {
    w: BufWriter<File>,
    path: PathBuf,
    next_page: u64,
    block: Vec<u8>,
    block_count: u32,
    block_first: u64,
    next_id: u64,
    blocks: Vec<(u64, u64)>,
    /// (hash, id) of the terms since the last run; at most `run_pairs`.
    hashes: Vec<(u64, u64)>,
    run_pairs: usize,
    /// Sorted runs of (hash, id) pairs written beside the file, merged at
    /// the end, so the writer's memory is bounded whatever the term count.
    runs: Runs,
    /// (id, inlined id) of the inlined terms, in id order, written beside
    /// the file (`<path>.inline.tmp`) and copied into its inline pages at
    /// the end, so they cost the writer no memory.
    inline: BufWriter<File>,
    inline_count: u64,
}

/// Run files, removed when dropped (after the merge, or with a writer
/// dropped on an error).
#[derive(Default)]
struct Runs(Vec<PathBuf>);

impl Drop for Runs {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl DictWriter {
    /// A writer holding at most [`HASH_BUDGET`] bytes of (hash, id) pairs.
    pub fn create(path: &Path) -> Result<DictWriter> {
        DictWriter::with_budget(path, HASH_BUDGET)
    }

    /// A writer holding at most `hash_budget` bytes (1 MiB at least) of
    /// (hash, id) pairs; beyond, sorted runs go to `<path>.hrun<i>.tmp`.
    pub fn with_budget(path: &Path, hash_budget: u64) -> Result<DictWriter> {
        let f = File::create(path).map_err(io_err(path))?;
        let mut w = BufWriter::with_capacity(1 << 20, f);
        // The header is written last, over these zeros.
        w.write_all(&[0u8; PAGE]).map_err(io_err(path))?;
        let ip = inline_path(path);
        let inline = BufWriter::with_capacity(1 << 16, File::create(&ip).map_err(io_err(&ip))?);
        Ok(DictWriter {
            inline,
            inline_count: 0,
            w,
            path: path.to_path_buf(),
            next_page: 1,
            block: Vec::with_capacity(PAGE),
            block_count: 0,
            block_first: 1,
            next_id: 1,
            blocks: Vec::new(),
            hashes: Vec::new(),
            run_pairs: ((hash_budget / 16) as usize).max(MIN_RUN_PAIRS),
            runs: Runs(vec![ip]),
        })
    }

    fn run_path(&self, i: usize) -> PathBuf {
        let mut p = self.path.as_os_str().to_owned();
        p.push(format!(".hrun{i}.tmp"));
        PathBuf::from(p)
    }

    /// Sorts the pairs held and writes them as the next run.
    fn spill_hashes(&mut self) -> Result<()> {
        if self.runs.0.len() > MAX_HASH_RUNS {
            return Err(RdfError::Invalid(format!("the dictionary needs more than {MAX_HASH_RUNS} sorted hash runs; raise the memory budget")));
        }
        self.hashes.sort_unstable();
        let path = self.run_path(self.runs.0.len() - 1);
        let mut w = BufWriter::with_capacity(1 << 20, File::create(&path).map_err(io_err(&path))?);
        self.runs.0.push(path.clone());
        for &(h, id) in &self.hashes {
            w.write_all(&h.to_le_bytes()).and_then(|()| w.write_all(&id.to_le_bytes())).map_err(io_err(&path))?;
        }
        w.flush().map_err(io_err(&path))?;
        self.hashes.clear();
        Ok(())
    }

    /// Appends the next term; returns its id.
    pub fn push(&mut self, term: &[u8]) -> Result<u64> {
        if self.block_count > 0 && TERM_HEAD + self.block.len() + 4 + term.len() > PAGE {
            self.flush_block()?;
        }
        if self.block_count == 0 {
            self.block_first = self.next_id;
        }
        self.block.extend_from_slice(&(term.len() as u32).to_le_bytes());
        self.block.extend_from_slice(term);
        self.block_count += 1;
        let id = self.next_id;
        if let Some(v) = crate::inline::encode_bytes(term) {
            let ip = &self.runs.0[0];
            self.inline.write_all(&id.to_le_bytes()).and_then(|()| self.inline.write_all(&v.to_le_bytes())).map_err(io_err(ip))?;
            self.inline_count += 1;
        }
        self.hashes.push((hash(term), id));
        if self.hashes.len() >= self.run_pairs {
            self.spill_hashes()?;
        }
        self.next_id += 1;
        Ok(id)
    }

    fn flush_block(&mut self) -> Result<()> {
        if self.block_count == 0 {
            return Ok(());
        }
        let pages = (TERM_HEAD + self.block.len()).div_ceil(PAGE);
        let mut buf = vec![0u8; pages * PAGE];
        buf[4] = KIND_TERMS;
        buf[8..12].copy_from_slice(&self.block_count.to_le_bytes());
        buf[12..16].copy_from_slice(&(self.block.len() as u32).to_le_bytes());
        buf[16..24].copy_from_slice(&self.block_first.to_le_bytes());
        buf[TERM_HEAD..TERM_HEAD + self.block.len()].copy_from_slice(&self.block);
        put_crc(&mut buf);
        self.w.write_all(&buf).map_err(io_err(&self.path))?;
        self.blocks.push((self.block_first, self.next_page));
        self.next_page += pages as u64;
        self.block.clear();
        self.block_count = 0;
        Ok(())
    }

    /// Writes the hash pages, the directory and the header; syncs.
    pub fn finish(mut self) -> Result<()> {
        self.flush_block()?;
        let term_pages = self.next_page - 1;
        let mut first_hashes = Vec::with_capacity((self.next_id as usize).div_ceil(HASH_PER_PAGE));
        if self.runs.0.len() > 1 && !self.hashes.is_empty() {
            self.spill_hashes()?;
        }
        let mut chunk = Vec::with_capacity(HASH_PER_PAGE);
        let (w, path) = (&mut self.w, &self.path);
        sorted_hashes(&mut self.hashes, &self.runs.0[1..], self.run_pairs, &mut |x| {
            chunk.push(x);
            if chunk.len() == HASH_PER_PAGE {
                w.write_all(&hash_page(&chunk)).map_err(io_err(path))?;
                first_hashes.push(chunk[0].0);
                chunk.clear();
            }
            Ok(())
        })?;
        if let Some(&(first, _)) = chunk.first() {
            w.write_all(&hash_page(&chunk)).map_err(io_err(path))?;
            first_hashes.push(first);
        }
        // Removes the run files (the inline file stays, first).
        for p in self.runs.0.drain(1..) {
            let _ = std::fs::remove_file(p);
        }
        let hash_pages = first_hashes.len() as u64;
        let inline_first = self.inline_firsts()?;
        let mut dir = Vec::with_capacity(self.blocks.len() * 16 + first_hashes.len() * 8 + inline_first.len() * 8);
        for &(first, page) in &self.blocks {
            dir.extend_from_slice(&first.to_le_bytes());
            dir.extend_from_slice(&page.to_le_bytes());
        }
        for h in first_hashes.iter().chain(&inline_first) {
            dir.extend_from_slice(&h.to_le_bytes());
        }
        let mut dir_pages = 0u64;
        for chunk in dir.chunks(DIR_PER_PAGE) {
            let mut page = [0u8; PAGE];
            page[4] = KIND_DIR;
            page[8..12].copy_from_slice(&(chunk.len() as u32).to_le_bytes());
            page[DIR_HEAD..DIR_HEAD + chunk.len()].copy_from_slice(chunk);
            put_crc(&mut page);
            self.w.write_all(&page).map_err(io_err(&self.path))?;
            dir_pages += 1;
        }
        let inline_pages = self.write_inline()?;
        debug_assert_eq!(inline_pages, inline_first.len() as u64);
        self.runs = Runs::default();
        let mut head = [0u8; PAGE];
        head[..8].copy_from_slice(MAGIC);
        head[8..12].copy_from_slice(&VERSION.to_le_bytes());
        head[12..16].copy_from_slice(&(PAGE as u32).to_le_bytes());
        let counts = [self.next_id - 1, self.blocks.len() as u64, term_pages, hash_pages, dir_pages, dir.len() as u64, inline_pages, self.inline_count];
        for (i, x) in counts.into_iter().enumerate() {
            head[16 + 8 * i..24 + 8 * i].copy_from_slice(&x.to_le_bytes());
        }
        let c = crc32c::crc32c(&head[..PAGE - 4]);
        head[PAGE - 4..].copy_from_slice(&c.to_le_bytes());
        let path = self.path.clone();
        let mut f = self.w.into_inner().map_err(|e| io_err(&path)(e.into_error()))?;
        f.seek(SeekFrom::Start(0)).map_err(io_err(&path))?;
        f.write_all(&head).map_err(io_err(&path))?;
        f.sync_all().map_err(io_err(&path))
    }
}

impl DictWriter {
    /// The first id of each inline page to be written: every 255th id of
    /// the inline file (read once more; 8 bytes a page in memory).
    fn inline_firsts(&mut self) -> Result<Vec<u64>> {
        let ip = self.runs.0[0].clone();
        self.inline.flush().map_err(io_err(&ip))?;
        if self.inline_count > MAX_INLINE {
            return Err(RdfError::Invalid(format!("{} inlined terms, a dictionary lists {MAX_INLINE} at most", self.inline_count)));
        }
        let mut r = BufReader::with_capacity(1 << 16, File::open(&ip).map_err(io_err(&ip))?);
        let mut firsts = Vec::with_capacity(self.inline_count.div_ceil(HASH_PER_PAGE as u64) as usize);
        for k in 0..self.inline_count {
            let (id, _) = read_pair(&mut r, &ip)?.ok_or_else(|| RdfError::Invalid(format!("{}: cut short", ip.display())))?;
            if k % HASH_PER_PAGE as u64 == 0 {
                firsts.push(id);
            }
        }
        Ok(firsts)
    }

    /// Copies the inline file's (id, inlined id) pairs into inline pages;
    /// returns their number.
    fn write_inline(&mut self) -> Result<u64> {
        let ip = self.runs.0[0].clone();
        self.inline.flush().map_err(io_err(&ip))?;
        let mut r = BufReader::with_capacity(1 << 16, File::open(&ip).map_err(io_err(&ip))?);
        let mut chunk = Vec::with_capacity(HASH_PER_PAGE);
        let mut pages = 0;
        for k in 0..self.inline_count {
            let x = read_pair(&mut r, &ip)?.ok_or_else(|| RdfError::Invalid(format!("{}: cut short", ip.display())))?;
            chunk.push(x);
            if chunk.len() == HASH_PER_PAGE || k + 1 == self.inline_count {
                let mut page = hash_page(&chunk);
                page[4] = KIND_INLINE;
                put_crc(&mut page);
                self.w.write_all(&page).map_err(io_err(&self.path))?;
                pages += 1;
                chunk.clear();
            }
        }
        Ok(pages)
    }
}

/// The file beside a writer's that holds its inlined terms.
fn inline_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".inline.tmp");
    PathBuf::from(p)
}

/// A hash page of `chunk` (at most [`HASH_PER_PAGE`] sorted pairs).
fn hash_page(chunk: &[(u64, u64)]) -> [u8; PAGE] {
    debug_assert!(!chunk.is_empty() && chunk.len() <= HASH_PER_PAGE);
    let mut page = [0u8; PAGE];
    page[4] = KIND_HASH;
    page[8..12].copy_from_slice(&(chunk.len() as u32).to_le_bytes());
    for (i, &(h, id)) in chunk.iter().enumerate() {
        let at = HASH_HEAD + 16 * i;
        page[at..at + 8].copy_from_slice(&h.to_le_bytes());
        page[at + 8..at + 16].copy_from_slice(&id.to_le_bytes());
    }
    put_crc(&mut page);
    page
}

/// Hands every (hash, id) pair to `f` in sorted order: `hashes` sorted if
/// no run was written, else a merge of `runs` (`hashes` then empty; one
/// read buffer per run, their bytes within the budget of `run_pairs`).
fn sorted_hashes(hashes: &mut Vec<(u64, u64)>, runs: &[PathBuf], run_pairs: usize, f: &mut dyn FnMut((u64, u64)) -> Result<()>) -> Result<()> {
    if runs.is_empty() {
        hashes.sort_unstable();
        return hashes.iter().try_for_each(|&x| f(x));
    }
    assert!(hashes.is_empty(), "the pairs held are written as a run before the merge");
    *hashes = Vec::new();
    let buf = (run_pairs * 16 / runs.len()).clamp(4096, 1 << 20);
    let mut readers = Vec::with_capacity(runs.len());
    for p in runs {
        readers.push(BufReader::with_capacity(buf, File::open(p).map_err(io_err(p))?));
    }
    let mut heap = BinaryHeap::with_capacity(readers.len());
    for (i, r) in readers.iter_mut().enumerate() {
        if let Some(x) = read_pair(r, &runs[i])? {
            heap.push(Reverse((x, i)));
        }
    }
    while let Some(Reverse((x, i))) = heap.pop() {
        f(x)?;
        if let Some(y) = read_pair(&mut readers[i], &runs[i])? {
            heap.push(Reverse((y, i)));
        }
    }
    Ok(())
}

/// The next (hash, id) pair of a run file, or None at its end.
fn read_pair(r: &mut impl Read, path: &Path) -> Result<Option<(u64, u64)>> {
    let mut b = [0u8; 16];
    match r.read_exact(&mut b) {
        Ok(()) => Ok(Some((le64(&b, 0), le64(&b, 8)))),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(io_err(path)(e)),
    }
}

/// A term block read from the file: its bytes and each term's offset.
pub struct Block {
    bytes: Box<[u8]>,
    /// Term i spans `offs[i] + 4 .. offs[i + 1]` (length prefix skipped).
    offs: Vec<u32>,
}

impl Block {
    fn size(&self) -> u64 {
        (self.bytes.len() + self.offs.len() * 4 + 64) as u64
    }

    fn term(&self, i: usize) -> &[u8] {
        &self.bytes[self.offs[i] as usize + 4..self.offs[i + 1] as usize]
    }
}

/// Pages (term blocks and hash pages, by first page) with a byte budget;
/// on overflow the least recently used quarter goes.
struct Cache {
    map: FxHashMap<u64, (Arc<Block>, u64)>,
    bytes: u64,
    budget: u64,
    tick: u64,
}

impl Cache {
    fn get(&mut self, page: u64) -> Option<Arc<Block>> {
        self.tick += 1;
        let t = self.tick;
        self.map.get_mut(&page).map(|e| {
            e.1 = t;
            e.0.clone()
        })
    }

    fn put(&mut self, page: u64, b: Arc<Block>) {
        self.tick += 1;
        self.bytes += b.size();
        if let Some((old, _)) = self.map.insert(page, (b, self.tick)) {
            self.bytes -= old.size();
        }
        if self.bytes > self.budget {
            let mut ticks: Vec<u64> = self.map.values().map(|e| e.1).collect();
            let cut = ticks.len() / 4;
            let (_, &mut oldest, _) = ticks.select_nth_unstable(cut);
            let mut freed = 0;
            self.map.retain(|_, e| {
                let keep = e.1 > oldest;
                if !keep {
                    freed += e.0.size();
                }
                keep
            });
            self.bytes -= freed;
        }
    }
}

/// An open dictionary file.
pub struct DictFile {
    path: PathBuf,
    vol: Volume,
    terms: u64,
    /// First id of each block, then `terms + 1`.
    block_first: Vec<u64>,
    /// First page of each block, then the first hash page.
    block_page: Vec<u64>,
    /// First hash of each hash page.
    hash_first: Vec<u64>,
    cache: Mutex<Cache>,
    /// First id of each inline page (read through the cache on demand).
    inline_first: Vec<u64>,
    /// Page number of the first inline page.
    inline_start: u64,
    /// Terms decoded (id -> term) for callers, not for lookups' compares
    /// (a test counts them).
    reads: AtomicU64,
}

/// The version of the dictionary file at `path` (1: read whole at open, 2:
/// paged, 3: inline pages, 4: listed in the directory).
pub fn version(path: &Path) -> Result<u32> {
    let mut head = [0u8; 12];
    File::open(path).and_then(|mut f| f.read_exact(&mut head)).map_err(io_err(path))?;
    if &head[..8] != MAGIC {
        return Err(corrupt(path, "not a dictionary file"));
    }
    Ok(le32(&head, 8))
}

impl DictFile {
    /// Opens a version 4 file, or a version 3 one (its inline pages read
    /// once to rebuild their directory).
    pub fn open(path: &Path, cache_bytes: u64) -> Result<DictFile> {
        DictFile::open_on(path, cache_bytes, BackendChoice::Auto)
    }

    /// [`DictFile::open`] with the pages read through `backend` (a
    /// simulated disk holding the file's bytes, for the fuzz targets).
    pub fn open_on(path: &Path, cache_bytes: u64, backend: BackendChoice) -> Result<DictFile> {
        DictFile::open_version(path, cache_bytes, &[VERSION, VERSION_INLINE_UNLISTED], backend)
    }

    /// Opens a version 2 file (no inline pages) to convert it.
    pub fn open_old(path: &Path, cache_bytes: u64) -> Result<DictFile> {
        DictFile::open_version(path, cache_bytes, &[VERSION_NO_INLINE], BackendChoice::Auto)
    }

    fn open_version(path: &Path, cache_bytes: u64, want: &[u32], backend: BackendChoice) -> Result<DictFile> {
        let v = version(path)?;
        if !want.contains(&v) {
            return Err(RdfError::OldFormat { path: path.to_path_buf(), found: v, reads: VERSION });
        }
        let len = std::fs::metadata(path).map_err(io_err(path))?.len();
        if len % PAGE as u64 != 0 {
            return Err(corrupt(path, format!("{len} bytes is not a whole number of {PAGE}-byte pages")));
        }
        let opts = VolumeOptions { page_size: PAGE, stripe_pages: 1, registered_chunks: 2, backend, ..Default::default() };
        let vol = Volume::open(&[path.to_path_buf()], opts).map_err(|e| corrupt(path, e.to_string()))?;
        let head = vol.read(&[0]).map_err(|e| corrupt(path, e.to_string()))?;
        let head = head.page(0);
        if crc32c::crc32c(&head[..PAGE - 4]) != le32(head, PAGE - 4) {
            return Err(corrupt(path, "page 0 (header) fails its checksum"));
        }
        if le32(head, 12) as usize != PAGE {
            return Err(corrupt(path, format!("page size {}, this build reads {PAGE}", le32(head, 12))));
        }
        let [terms, blocks, term_pages, hash_pages, dir_pages, dir_len, inline_pages, inline_count] = std::array::from_fn(|i| le64(head, 16 + 8 * i));
        let pages = len / PAGE as u64;
        let listed = if v == VERSION { inline_pages } else { 0 };
        let want_dir = blocks.checked_mul(16).and_then(|b| b.checked_add(hash_pages.checked_add(listed)?.checked_mul(8)?));
        let dir_start = 1u64.checked_add(term_pages).and_then(|x| x.checked_add(hash_pages));
        let end = dir_start.and_then(|d| d.checked_add(dir_pages)).and_then(|x| x.checked_add(inline_pages));
        if end != Some(pages)
            || inline_count > MAX_INLINE
            || inline_count.div_ceil(HASH_PER_PAGE as u64) != inline_pages
            || want_dir != Some(dir_len)
            || dir_len > dir_pages.saturating_mul(DIR_PER_PAGE as u64)
        {
            return Err(corrupt(path, "header counts do not match the file's size"));
        }
        let dir_start = dir_start.expect("checked with the file's size");
        let mut f = DictFile {
            path: path.to_path_buf(),
            vol,
            terms,
            block_first: Vec::with_capacity(blocks as usize + 1),
            block_page: Vec::with_capacity(blocks as usize + 1),
            hash_first: Vec::with_capacity(hash_pages as usize),
            cache: Mutex::new(Cache { map: FxHashMap::default(), bytes: 0, budget: cache_bytes.max(PAGE as u64 * 16), tick: 0 }),
            inline_first: Vec::new(),
            inline_start: dir_start + dir_pages,
            reads: AtomicU64::new(0),
        };
        let dir = f.read_dir(dir_start, dir_pages)?;
        // The pages' own used counts must add up to the header's length,
        // which the entries read below are indexed by.
        if dir.len() as u64 != dir_len {
            return Err(corrupt(path, format!("directory holds {} bytes, the header says {dir_len}", dir.len())));
        }
        for i in 0..blocks as usize {
            f.block_first.push(le64(&dir, 16 * i));
            f.block_page.push(le64(&dir, 16 * i + 8));
        }
        let off = blocks as usize * 16;
        f.hash_first.extend((0..hash_pages as usize).map(|i| le64(&dir, off + 8 * i)));
        let off = off + hash_pages as usize * 8;
        if v == VERSION {
            f.inline_first.extend((0..inline_pages as usize).map(|i| le64(&dir, off + 8 * i)));
        } else if v == VERSION_INLINE_UNLISTED {
            f.inline_first = f.list_inline(inline_pages, inline_count)?;
        }
        f.block_first.push(terms + 1);
        f.block_page.push(1 + term_pages);
        let ok = f.block_first.first() == Some(&1) || terms == 0;
        if !ok
            || f.block_first.windows(2).any(|w| w[0] >= w[1])
            || f.block_page.windows(2).any(|w| w[0] >= w[1])
            || f.hash_first.windows(2).any(|w| w[0] > w[1])
            || f.inline_first.windows(2).any(|w| w[0] >= w[1])
            || f.inline_first.first().is_some_and(|&x| x == 0)
            || f.inline_first.last().is_some_and(|&x| x > terms)
        {
            return Err(corrupt(path, "directory is not in order"));
        }
        Ok(f)
    }

    /// A version 3 file's inline directory: the first id of each of its
    /// `n` inline pages, read in batches of 1 MiB and checked (`count`
    /// pairs in all, in id order); nothing else of them is kept.
    fn list_inline(&self, n: u64, count: u64) -> Result<Vec<u64>> {
        let mut firsts = Vec::with_capacity(n as usize);
        let (mut last, mut seen) = (0u64, 0u64);
        for first in (self.inline_start..self.inline_start + n).step_by(256) {
            let ids: Vec<u64> = (first..(first + 256).min(self.inline_start + n)).collect();
            let pages = self.vol.read(&ids).map_err(|e| corrupt(&self.path, e.to_string()))?;
            for (i, &page) in ids.iter().enumerate() {
                let blk = self.parse(page, pages.page(i).to_vec(), KIND_INLINE)?;
                let k = blk.offs[0] as usize;
                if le64(&blk.bytes, HASH_HEAD) <= last {
                    return Err(corrupt(&self.path, format!("inline page {page}: ids out of order")));
                }
                firsts.push(le64(&blk.bytes, HASH_HEAD));
                last = le64(&blk.bytes, HASH_HEAD + 16 * (k - 1));
                seen += k as u64;
            }
        }
        if seen != count {
            return Err(corrupt(&self.path, format!("{seen} inlined terms, the header says {count}")));
        }
        Ok(firsts)
    }

    /// Replaces each id of `ids` that is a term of this file with an
    /// inlined value by its inlined id; other ids stay. The inline pages
    /// the ids fall in are read in one batch through the cache.
    pub fn to_inline(&self, ids: &mut [u64]) -> Result<()> {
        const NONE: u32 = u32::MAX;
        let Some(&lo) = self.inline_first.first() else { return Ok(()) };
        // The inline page of each id, found once (ids below the first
        // inlined one or past the file's terms have none).
        let at: Vec<u32> =
            ids.iter().map(|&id| if id < lo || id > self.terms { NONE } else { (self.inline_first.partition_point(|&f| f <= id) - 1) as u32 }).collect();
        let mut pages: Vec<u32> = at.iter().copied().filter(|&p| p != NONE).collect();
        // A list's ids come in runs of near ids: dropping repeats first makes the sort short.
        pages.dedup();
        pages.sort_unstable();
        pages.dedup();
        if pages.is_empty() {
            return Ok(());
        }
        let starts: Vec<u64> = pages.iter().map(|&p| self.inline_start + u64::from(p)).collect();
        let blocks = self.blocks(&starts, &vec![1; starts.len()], KIND_INLINE)?;
        for (k, blk) in blocks.iter().enumerate() {
            self.check_inline(pages[k] as usize, blk)?;
        }
        let mut last = (NONE, 0);
        for (id, &p) in ids.iter_mut().zip(&at) {
            if p == NONE {
                continue;
            }
            if last.0 != p {
                last = (p, pages.binary_search(&p).expect("page listed"));
            }
            let blk = &blocks[last.1];
            let n = blk.offs[0] as usize;
            let j = partition(n, |j| le64(&blk.bytes, HASH_HEAD + 16 * j) < *id);
            if j < n && le64(&blk.bytes, HASH_HEAD + 16 * j) == *id {
                *id = le64(&blk.bytes, HASH_HEAD + 16 * j + 8);
            }
        }
        Ok(())
    }

    /// Checks that inline page `p` (parsed: ids ascending, values inlined)
    /// holds the ids the directory says: from its first id to below the next page's.
    fn check_inline(&self, p: usize, blk: &Block) -> Result<()> {
        let n = blk.offs[0] as usize;
        let limit = self.inline_first.get(p + 1).copied().unwrap_or(self.terms + 1);
        if le64(&blk.bytes, HASH_HEAD) != self.inline_first[p] || le64(&blk.bytes, HASH_HEAD + 16 * (n - 1)) >= limit {
            return Err(corrupt(&self.path, format!("inline page {}: does not hold the ids the directory says", self.inline_start + p as u64)));
        }
        Ok(())
    }

    /// The term id of each inlined value of `vs`, `None` when no term of
    /// the file has it: its canonical literal looked up like any term (one
    /// batch), since a term is inlined exactly when it is that literal.
    pub fn ids_of_inline(&self, vs: &[u64]) -> Result<Vec<Option<u64>>> {
        if self.inline_first.is_empty() {
            return Ok(vec![None; vs.len()]);
        }
        let bytes: Vec<Option<Vec<u8>>> = vs.iter().map(|&v| crate::inline::canonical(v).map(|l| crate::term::to_bytes(&l.into()))).collect();
        let ask: Vec<&[u8]> = bytes.iter().flatten().map(Vec::as_slice).collect();
        let mut found = self.lookup(&ask)?.into_iter();
        Ok(bytes.iter().map(|b| b.as_ref().and_then(|_| found.next().flatten())).collect())
    }

    /// Whether the file has any inlined term.
    pub fn has_inline(&self) -> bool {
        !self.inline_first.is_empty()
    }

    /// Terms decoded (id -> term) since the file was opened.
    pub fn term_reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// Counts `n` terms decoded for a caller ([`DictFile::term_reads`]).
    pub fn count_reads(&self, n: usize) {
        self.reads.fetch_add(n as u64, Ordering::Relaxed);
    }

    fn read_dir(&self, start: u64, n: u64) -> Result<Vec<u8>> {
        let mut dir = Vec::with_capacity(n as usize * DIR_PER_PAGE);
        let mut p = start;
        while p < start + n {
            let k = (start + n - p).min(MAX_BATCH_PAGES as u64);
            let ids: Vec<u64> = (p..p + k).collect();
            let pages = self.vol.read(&ids).map_err(|e| corrupt(&self.path, e.to_string()))?;
            for (i, &id) in ids.iter().enumerate() {
                let pg = pages.page(i);
                let used = le32(pg, 8) as usize;
                if crc32c::crc32c(&pg[4..]) != le32(pg, 0) || pg[4] != KIND_DIR || used > DIR_PER_PAGE {
                    return Err(corrupt(&self.path, format!("directory page {id} fails its checksum")));
                }
                dir.extend_from_slice(&pg[DIR_HEAD..DIR_HEAD + used]);
            }
            p += k;
        }
        Ok(dir)
    }

    pub fn len(&self) -> u64 {
        self.terms
    }

    /// Reads the blocks (term blocks or hash pages) starting at `starts`
    /// with `counts[i]` pages each, through the cache, in one batch.
    fn blocks(&self, starts: &[u64], counts: &[u64], kind: u8) -> Result<Vec<Arc<Block>>> {
        let mut out: Vec<Option<Arc<Block>>> = vec![None; starts.len()];
        let mut missing = Vec::new();
        {
            let mut c = self.cache.lock().map_err(|_| RdfError::Invalid("dictionary cache lock poisoned; reopen the store".into()))?;
            for (i, &s) in starts.iter().enumerate() {
                match c.get(s) {
                    Some(b) => out[i] = Some(b),
                    None => missing.push(i),
                }
            }
        }
        for part in missing.chunks(MAX_BATCH_PAGES / 4) {
            let mut ids = Vec::new();
            for &i in part {
                ids.extend(starts[i]..starts[i] + counts[i]);
            }
            let pages = self.vol.read(&ids).map_err(|e| corrupt(&self.path, e.to_string()))?;
            let mut at = 0;
            let mut got = Vec::with_capacity(part.len());
            for &i in part {
                let n = counts[i] as usize;
                let mut bytes = Vec::with_capacity(n * PAGE);
                for k in 0..n {
                    bytes.extend_from_slice(pages.page(at + k));
                }
                at += n;
                let b = Arc::new(self.parse(starts[i], bytes, kind)?);
                got.push((i, b));
            }
            let mut c = self.cache.lock().map_err(|_| RdfError::Invalid("dictionary cache lock poisoned; reopen the store".into()))?;
            for (i, b) in got {
                c.put(starts[i], b.clone());
                out[i] = Some(b);
            }
        }
        Ok(out.into_iter().map(|b| b.expect("every block read")).collect())
    }

    fn parse(&self, page: u64, bytes: Vec<u8>, kind: u8) -> Result<Block> {
        let bad = |why: &str| corrupt(&self.path, format!("page {page}: {why}"));
        if crc32c::crc32c(&bytes[4..]) != le32(&bytes, 0) {
            return Err(bad("checksum mismatch"));
        }
        if bytes[4] != kind {
            return Err(bad("unexpected page kind"));
        }
        let count = le32(&bytes, 8) as usize;
        if kind == KIND_HASH {
            if count > HASH_PER_PAGE {
                return Err(bad("hash page count too large"));
            }
            return Ok(Block { bytes: bytes.into_boxed_slice(), offs: vec![count as u32] });
        }
        if kind == KIND_INLINE {
            if count == 0 || count > HASH_PER_PAGE {
                return Err(bad("inline page count out of range"));
            }
            let entry = |j: usize| (le64(&bytes, HASH_HEAD + 16 * j), le64(&bytes, HASH_HEAD + 16 * j + 8));
            if (0..count).any(|j| !crate::inline::is_inline(entry(j).1) || (j > 0 && entry(j - 1).0 >= entry(j).0)) {
                return Err(bad("inline entries out of order or not inlined values"));
            }
            return Ok(Block { bytes: bytes.into_boxed_slice(), offs: vec![count as u32] });
        }
        let used = le32(&bytes, 12) as usize;
        if TERM_HEAD + used > bytes.len() {
            return Err(bad("term block overruns its pages"));
        }
        let mut offs = Vec::with_capacity(count + 1);
        let mut p = TERM_HEAD;
        for _ in 0..count {
            if p + 4 > TERM_HEAD + used {
                return Err(bad("term block is malformed"));
            }
            offs.push(p as u32);
            p += 4 + le32(&bytes, p) as usize;
        }
        if p != TERM_HEAD + used {
            return Err(bad("term block is malformed"));
        }
        offs.push(p as u32);
        Ok(Block { bytes: bytes.into_boxed_slice(), offs })
    }

    /// Calls `f(i, bytes)` with the term of each `ids[i]` (each in 1..=len),
    /// reading every block they need in one batch.
    pub fn terms(&self, ids: &[u64], f: &mut dyn FnMut(usize, &[u8]) -> Result<()>) -> Result<()> {
        let mut which: Vec<usize> = Vec::with_capacity(ids.len());
        for &id in ids {
            if id == 0 || id > self.terms {
                return Err(RdfError::Evaluation(format!("no term with id {id} in the dictionary")));
            }
            which.push(self.block_first.partition_point(|&f| f <= id) - 1);
        }
        let mut uniq = which.clone();
        uniq.sort_unstable();
        uniq.dedup();
        // spareval decodes a result one term at a time: a single block is
        // looked up in the cache alone, and on a miss the blocks after it
        // are read with it, since a large result's ids come in near id order.
        let mut want = uniq.clone();
        if let [b] = uniq[..] {
            let hit = self.cache.lock().map_err(|_| RdfError::Invalid("dictionary cache lock poisoned; reopen the store".into()))?.get(self.block_page[b]);
            if let Some(blk) = hit {
                self.check(b, &blk)?;
                for (i, &id) in ids.iter().enumerate() {
                    f(i, blk.term((id - self.block_first[b]) as usize))?;
                }
                return Ok(());
            }
            let mut next = b + 1;
            while next + 1 < self.block_first.len() && self.block_page[next + 1] - self.block_page[b] <= READ_AHEAD_PAGES {
                want.push(next);
                next += 1;
            }
        }
        let starts: Vec<u64> = want.iter().map(|&b| self.block_page[b]).collect();
        let counts: Vec<u64> = want.iter().map(|&b| self.block_page[b + 1] - self.block_page[b]).collect();
        let blocks = self.blocks(&starts, &counts, KIND_TERMS)?;
        for (i, (&id, &b)) in ids.iter().zip(&which).enumerate() {
            let k = uniq.binary_search(&b).expect("block listed");
            let blk = &blocks[k];
            self.check(b, blk)?;
            f(i, blk.term((id - self.block_first[b]) as usize))?;
        }
        Ok(())
    }

    /// Checks that block `b` holds the ids the directory says.
    fn check(&self, b: usize, blk: &Block) -> Result<()> {
        if blk.offs.len() != (self.block_first[b + 1] - self.block_first[b]) as usize + 1 || le64(&blk.bytes, 16) != self.block_first[b] {
            return Err(corrupt(&self.path, format!("page {}: block does not hold the ids the directory says", self.block_page[b])));
        }
        Ok(())
    }

    /// The id of each term in `terms`, `None` when it is not in the file,
    /// reading the hash pages and candidates' blocks in two batches.
    pub fn lookup(&self, terms: &[&[u8]]) -> Result<Vec<Option<u64>>> {
        let hashes: Vec<u64> = terms.iter().map(|t| hash(t)).collect();
        // Pages holding hash h: from the last page starting below h to the last starting at or below it.
        let range = |h: u64| {
            let hi = self.hash_first.partition_point(|&f| f <= h);
            let lo = self.hash_first.partition_point(|&f| f < h).saturating_sub(1);
            (lo, hi)
        };
        let mut pages: Vec<u64> = Vec::new();
        for &h in &hashes {
            let (lo, hi) = range(h);
            pages.extend((lo..hi).map(|p| p as u64));
        }
        pages.sort_unstable();
        pages.dedup();
        let first_hash_page = *self.block_page.last().expect("sentinel");
        let starts: Vec<u64> = pages.iter().map(|&p| first_hash_page + p).collect();
        let blocks = self.blocks(&starts, &vec![1; starts.len()], KIND_HASH)?;
        let mut cand: Vec<(usize, u64)> = Vec::new();
        for (i, &h) in hashes.iter().enumerate() {
            let (lo, hi) = range(h);
            for p in lo..hi {
                let blk = &blocks[pages.binary_search(&(p as u64)).expect("page listed")];
                let n = blk.offs[0] as usize;
                let entry = |k: usize| (le64(&blk.bytes, HASH_HEAD + 16 * k), le64(&blk.bytes, HASH_HEAD + 16 * k + 8));
                let start = partition(n, |k| entry(k).0 < h);
                for k in start..n {
                    let (eh, id) = entry(k);
                    if eh != h {
                        break;
                    }
                    cand.push((i, id));
                }
            }
        }
        let mut out = vec![None; terms.len()];
        let ids: Vec<u64> = cand.iter().map(|c| c.1).collect();
        self.terms(&ids, &mut |k, bytes| {
            let (i, id) = cand[k];
            if bytes == terms[i] {
                out[i] = Some(id);
            }
            Ok(())
        })?;
        Ok(out)
    }

    /// Calls `f` with every term in id order, reading `batch` pages at a time.
    pub fn scan(&self, f: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()> {
        let nblocks = self.block_first.len() - 1;
        let mut b = 0;
        while b < nblocks {
            let mut e = b;
            let mut pages = 0;
            while e < nblocks && pages < 256 {
                pages += self.block_page[e + 1] - self.block_page[e];
                e += 1;
            }
            let ids: Vec<u64> = (self.block_first[b]..self.block_first[e]).collect();
            self.terms(&ids, &mut |_, t| f(t))?;
            b = e;
        }
        Ok(())
    }
}

/// The first k in 0..n with `!less(k)` (`less` true on a prefix).
fn partition(n: usize, less: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if less(mid) { lo = mid + 1 } else { hi = mid }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(n: usize) -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = (0..n).map(|i| format!("\x01http://example.org/term/{i}").into_bytes()).collect();
        // A term larger than a page, so a block spans pages.
        v[n / 2] = vec![b'x'; 3 * PAGE + 17];
        v
    }

    fn write(path: &Path, ts: &[Vec<u8>]) {
        let mut w = DictWriter::create(path).unwrap();
        for (i, t) in ts.iter().enumerate() {
            assert_eq!(w.push(t).unwrap(), i as u64 + 1);
        }
        w.finish().unwrap();
    }

    #[test]
    fn both_ways_batched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dict.1");
        let ts = terms(20_000);
        write(&path, &ts);
        // A small cache, so lookups evict and reread.
        let f = DictFile::open(&path, 64 << 10).unwrap();
        assert_eq!(f.len(), ts.len() as u64);
        let ids: Vec<u64> = (1..=ts.len() as u64).rev().step_by(7).collect();
        let mut seen = 0;
        f.terms(&ids, &mut |i, b| {
            assert_eq!(b, ts[ids[i] as usize - 1].as_slice());
            seen += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, ids.len());
        // Several ids of one block, read cold and then from the cache.
        for _ in 0..2 {
            let mut got = Vec::new();
            f.terms(&[3, 1, 2, 3], &mut |i, b| {
                got.push((i, b.to_vec()));
                Ok(())
            })
            .unwrap();
            assert_eq!(got, vec![(0, ts[2].clone()), (1, ts[0].clone()), (2, ts[1].clone()), (3, ts[2].clone())]);
        }
        let mut ask: Vec<&[u8]> = ts.iter().step_by(3).map(Vec::as_slice).collect();
        ask.push(b"\x01http://example.org/absent");
        ask.push(b"");
        let got = f.lookup(&ask).unwrap();
        for (k, id) in got.iter().enumerate().take(ask.len() - 2) {
            assert_eq!(*id, Some(3 * k as u64 + 1));
        }
        assert_eq!(got[ask.len() - 2..], [None, None]);
        let mut all = Vec::new();
        f.scan(&mut |t| {
            all.push(t.to_vec());
            Ok(())
        })
        .unwrap();
        assert_eq!(all, ts);
        assert!(f.terms(&[0], &mut |_, _| Ok(())).is_err());
        assert!(f.terms(&[ts.len() as u64 + 1], &mut |_, _| Ok(())).is_err());
    }

    #[test]
    fn hash_runs_write_the_same_file() {
        let dir = tempfile::tempdir().unwrap();
        // More pairs than three runs of the smallest budget hold.
        let ts = terms(3 * MIN_RUN_PAIRS + 1234);
        let (whole, runs) = (dir.path().join("dict.whole"), dir.path().join("dict.runs"));
        write(&whole, &ts);
        let mut w = DictWriter::with_budget(&runs, 0).unwrap();
        for t in &ts {
            w.push(t).unwrap();
        }
        // The inline file, then three runs.
        assert_eq!(w.runs.0.len(), 4);
        w.finish().unwrap();
        assert!(std::fs::read(&whole).unwrap() == std::fs::read(&runs).unwrap(), "the merged runs give other bytes");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left.len(), 2, "run files left: {left:?}");
        let f = DictFile::open(&runs, 1 << 20).unwrap();
        let probe: Vec<&[u8]> = ts.iter().step_by(997).map(|t| t.as_slice()).collect();
        let want: Vec<Option<u64>> = (0..ts.len() as u64).step_by(997).map(|i| Some(i + 1)).collect();
        assert_eq!(f.lookup(&probe).unwrap(), want);
    }

    #[test]
    fn hash_runs_are_removed_with_a_dropped_writer() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = DictWriter::with_budget(&dir.path().join("dict.1"), 0).unwrap();
        for t in terms(MIN_RUN_PAIRS + 1) {
            w.push(&t).unwrap();
        }
        assert_eq!(w.runs.0.len(), 2);
        drop(w);
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, ["dict.1"]);
    }

    /// Checks both ways of the inline pages against `encode_bytes`: all
    /// ids in one batch, then one at a time.
    fn check_inline(f: &DictFile, ts: &[Vec<u8>]) {
        let want: Vec<u64> = ts.iter().enumerate().map(|(i, t)| crate::inline::encode_bytes(t).unwrap_or(i as u64 + 1)).collect();
        let mut all: Vec<u64> = (1..=ts.len() as u64).collect();
        f.to_inline(&mut all).unwrap();
        assert_eq!(all, want);
        for (i, &w) in want.iter().enumerate().rev() {
            let mut one = [i as u64 + 1];
            f.to_inline(&mut one).unwrap();
            assert_eq!(one[0], w, "term {}", i + 1);
        }
        let vs: Vec<u64> = want.iter().copied().filter(|&v| crate::inline::is_inline(v)).collect();
        let ids = f.ids_of_inline(&vs).unwrap();
        for (v, id) in vs.iter().zip(ids) {
            assert_eq!(want[id.expect("a term has the value") as usize - 1], *v);
        }
    }

    #[test]
    fn inline_pages_are_read_on_demand_and_versions_2_and_3_are_upgraded() {
        use oxrdf::{Literal, NamedNode, Term};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dict.1");
        let int =
            |v: &str| crate::term::to_bytes(&Term::from(Literal::new_typed_literal(v, NamedNode::new_unchecked("http://www.w3.org/2001/XMLSchema#integer"))));
        // 600 integers (three inline pages), a non-canonical one and IRIs between.
        let mut ts = terms(10);
        ts.extend((0..600).map(|i| int(&i.to_string())));
        ts.push(int("007"));
        ts.extend(terms(30));
        write(&path, &ts);
        let v4 = std::fs::read(&path).unwrap();
        // The smallest cache (16 pages): the inline pages are read and evicted again.
        let f = DictFile::open(&path, 0).unwrap();
        check_inline(&f, &ts);
        assert_eq!(f.ids_of_inline(&[crate::inline::encode_bytes(&int("600")).unwrap()]).unwrap(), [None]);
        let mut one = [611];
        f.to_inline(&mut one).unwrap();
        assert_eq!(one, [611], "007 is not canonical");
        drop(f);
        // Inline pages are not read at open: a damaged one is found by the lookup that reads it.
        let inline_pages = le64(&v4, 16 + 8 * 6) as usize;
        assert_eq!(inline_pages, 3);
        let mut b = v4.clone();
        let second = b.len() - 2 * PAGE;
        b[second + 100] ^= 1;
        std::fs::write(&path, &b).unwrap();
        let f = DictFile::open(&path, 1 << 20).unwrap();
        let mut ids = [11, 12];
        f.to_inline(&mut ids).unwrap();
        let e = f.to_inline(&mut [400]).unwrap_err().to_string();
        assert!(e.contains(&format!("page {}", second / PAGE)) && e.contains("checksum"), "{e}");
        drop(f);
        // Version 3 as the previous build wrote it: the directory without inline entries.
        let mut b = v4.clone();
        let dir_pages = le64(&b, 16 + 8 * 4) as usize;
        assert_eq!(dir_pages, 1);
        let dir_at = b.len() - (inline_pages + 1) * PAGE;
        let used = le32(&b, dir_at + 8) as usize - 8 * inline_pages;
        b[dir_at + 8..dir_at + 12].copy_from_slice(&(used as u32).to_le_bytes());
        b[dir_at + DIR_HEAD + used..dir_at + PAGE].fill(0);
        put_crc(&mut b[dir_at..dir_at + PAGE]);
        b[16 + 8 * 5..16 + 8 * 6].copy_from_slice(&(used as u64).to_le_bytes());
        b[8..12].copy_from_slice(&VERSION_INLINE_UNLISTED.to_le_bytes());
        let c = crc32c::crc32c(&b[..PAGE - 4]);
        b[PAGE - 4..PAGE].copy_from_slice(&c.to_le_bytes());
        std::fs::write(&path, &b).unwrap();
        check_inline(&DictFile::open(&path, 0).unwrap(), &ts);
        assert!(crate::dict::upgrade(&path).unwrap());
        assert!(std::fs::read(&path).unwrap() == v4, "version 3 upgraded is the file version 4 writes");
        // Version 2: no inline pages.
        let mut b = v4.clone();
        b.truncate(b.len() - inline_pages * PAGE);
        b[dir_at + 8..dir_at + 12].copy_from_slice(&(used as u32).to_le_bytes());
        b[dir_at + DIR_HEAD + used..dir_at + PAGE].fill(0);
        put_crc(&mut b[dir_at..dir_at + PAGE]);
        b[16 + 8 * 5..16 + 8 * 6].copy_from_slice(&(used as u64).to_le_bytes());
        b[8..12].copy_from_slice(&VERSION_NO_INLINE.to_le_bytes());
        b[16 + 8 * 6..16 + 8 * 8].fill(0);
        let c = crc32c::crc32c(&b[..PAGE - 4]);
        b[PAGE - 4..PAGE].copy_from_slice(&c.to_le_bytes());
        std::fs::write(&path, &b).unwrap();
        let e = DictFile::open(&path, 1 << 20).err().expect("version 2 refused");
        assert!(matches!(e, RdfError::OldFormat { found: 2, reads: 4, .. }), "{e}");
        assert!(crate::dict::upgrade(&path).unwrap());
        assert!(std::fs::read(&path).unwrap() == v4, "version 2 upgraded is the file version 4 writes");
    }

    #[test]
    fn empty_dictionary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dict.1");
        write(&path, &[]);
        let f = DictFile::open(&path, 1 << 20).unwrap();
        assert_eq!(f.len(), 0);
        assert_eq!(f.lookup(&[b"\x01a"]).unwrap(), [None]);
    }

    #[test]
    fn damaged_page_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dict.1");
        let ts = terms(2_000);
        write(&path, &ts);
        let mut b = std::fs::read(&path).unwrap();
        b[PAGE + 100] ^= 0x40;
        std::fs::write(&path, &b).unwrap();
        let f = DictFile::open(&path, 1 << 20).unwrap();
        let e = f.terms(&[1], &mut |_, _| Ok(())).unwrap_err().to_string();
        assert!(e.contains("page 1") && e.contains("checksum"), "{e}");
        let mut head = b.clone();
        head[PAGE + 100] ^= 0x40;
        head[20] ^= 1;
        std::fs::write(&path, &head).unwrap();
        let e = DictFile::open(&path, 1 << 20).err().expect("a damaged header").to_string();
        assert!(e.contains("header"), "{e}");
    }

    #[test]
    fn version_1_is_refused_then_upgraded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dict.1");
        let ts = terms(500);
        // The version 1 layout, as the previous build wrote it.
        let mut head = Vec::new();
        head.extend_from_slice(MAGIC);
        head.extend_from_slice(&1u32.to_le_bytes());
        head.extend_from_slice(&(ts.len() as u64).to_le_bytes());
        let c = crc32c::crc32c(&head);
        head.extend_from_slice(&c.to_le_bytes());
        for chunk in ts.chunks(100) {
            let mut payload = Vec::new();
            for t in chunk {
                payload.extend_from_slice(&(t.len() as u32).to_le_bytes());
                payload.extend_from_slice(t);
            }
            let mut h = Vec::new();
            h.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            h.extend_from_slice(&(chunk.len() as u32).to_le_bytes());
            let c = crc32c::crc32c_append(crc32c::crc32c(&h), &payload);
            head.extend_from_slice(&c.to_le_bytes());
            head.extend_from_slice(&h);
            head.extend_from_slice(&payload);
        }
        std::fs::write(&path, &head).unwrap();
        let e = DictFile::open(&path, 1 << 20).err().expect("version 1 refused");
        assert!(matches!(e, RdfError::OldFormat { found: 1, .. }), "{e}");
        assert!(e.to_string().contains("solidgraph rdf compact"), "{e}");
        assert!(crate::dict::upgrade(&path).unwrap());
        assert!(!crate::dict::upgrade(&path).unwrap());
        let f = DictFile::open(&path, 1 << 20).unwrap();
        let ask: Vec<&[u8]> = ts.iter().map(Vec::as_slice).collect();
        let want: Vec<Option<u64>> = (1..=ts.len() as u64).map(Some).collect();
        assert_eq!(f.lookup(&ask).unwrap(), want);
    }
}
