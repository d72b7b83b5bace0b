//! A `.npy` tensor's rows in a new vertex order, larger than memory, by
//! sequential I/O only.
//!
//! Rows gathered in the new order read the input at random: one disk read
//! per row once the input outgrows the page cache. Instead, one pass reads
//! the input in file order and appends each row to the bucket file of its
//! new position's range (`distribute`); then each bucket, read whole, is put
//! in order and handed to the page writer (`Placed::fill`). That costs the
//! tensor's bytes written and read once more, all of it sequential. A
//! bucket's rows are appended in ascending input row, so the file holds no
//! positions: sorting the bucket's range of `to_external` gives where each
//! row goes.
//!
//! Memory: one bucket's rows twice (the file read whole, the rows placed)
//! plus the append buffers, about `budget / 16` in all (`plan`).
//!
//! Disk: the buckets live in the tensor's own region of the volume when it
//! has room for them (`Buckets::in_region`), else in files beside the build.
//! A region's pages hold `HEADER` bytes less of rows than its raw pages, so
//! bucket k's raw rows fit at or after the first page its finished rows
//! take; placed greedily from the front, no bucket's raw pages come before
//! the pages the writer finishes ahead of reading it. The page writer
//! finishes a page only once every row of it is filled, and a bucket is
//! read whole before its first row is handed over, so no raw page is
//! overwritten before it is read.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use solidgraph_io::{AlignedBuf, Volume};

use crate::error::{Result, StoreError, file_err};
use crate::tensor;

/// Buckets at most; a tensor that would need more (a budget far below its
/// bytes) is gathered row by row instead.
pub const MAX_BUCKETS: u64 = 1024;
/// Append buffer per bucket, at least and at most.
const APPEND_MIN: usize = 16 << 10;
const APPEND_MAX: usize = 1 << 20;
/// Input bytes read at a time (whole rows).
const READ_BYTES: usize = 8 << 20;

/// How a tensor is cut into buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub rows: u64,
    pub row_bytes: usize,
    /// Rows per bucket: new positions `[k * bucket_rows, (k + 1) * bucket_rows)` go to bucket k.
    pub bucket_rows: u64,
    pub buckets: u64,
}

impl Plan {
    fn append_bytes(&self) -> usize {
        let share = (self.bucket_rows as usize * self.row_bytes) / self.buckets.max(1) as usize;
        share.clamp(APPEND_MIN, APPEND_MAX)
    }

    fn range(&self, k: u64) -> std::ops::Range<usize> {
        let first = k * self.bucket_rows;
        first as usize..(first + self.bucket_rows).min(self.rows) as usize
    }
}

/// Buckets of `budget / 32` bytes of rows, or None when that takes more
/// than `MAX_BUCKETS`.
pub fn plan(rows: u64, row_bytes: usize, budget: u64) -> Option<Plan> {
    assert!(row_bytes > 0, "rows of width 0 are refused at planning");
    let bucket_rows = (budget / 32 / row_bytes as u64).max(1);
    let buckets = rows.div_ceil(bucket_rows);
    (buckets <= MAX_BUCKETS).then_some(Plan { rows, row_bytes, bucket_rows, buckets })
}

/// The bucket files of `prefix` in `dir`.
pub fn bucket_paths(dir: &Path, prefix: &str, p: &Plan) -> Vec<PathBuf> {
    (0..p.buckets).map(|k| dir.join(format!("{prefix}.bucket-{k}"))).collect()
}

/// Pages of a region bucket read at a time.
const READ_PAGES: usize = 256;

/// Where the buckets are kept between `distribute` and `Placed`.
pub enum Buckets<'a> {
    /// One file per bucket.
    Files(Vec<PathBuf>),
    /// In the tensor's region of `vol`: bucket k's raw rows in the pages
    /// from `first[k]` on, packed, the last one padded.
    Region { vol: &'a Volume, first: Vec<u64> },
}

impl<'a> Buckets<'a> {
    /// The buckets in the region of `pages` pages from `start` that the
    /// tensor's pages will take, or None when they do not fit (see the
    /// module: each bucket gains `HEADER` bytes a page and needs them to
    /// absorb rounding, so buckets of a few 100 KiB or less may not fit).
    pub fn in_region(vol: &'a Volume, p: &Plan, start: u64, pages: u64) -> Option<Buckets<'a>> {
        let first = region_layout(p, vol.page_size(), pages)?;
        Some(Buckets::Region { vol, first: first.into_iter().map(|f| start + f).collect() })
    }

    /// Pages bucket k's raw rows take in a region.
    fn raw_pages(p: &Plan, k: u64, ps: usize) -> u64 {
        (p.range(k).len() * p.row_bytes).div_ceil(ps) as u64
    }
}

/// Whether `Buckets::in_region` takes a region of `pages` pages of
/// `page_size` bytes for `p`'s buckets.
pub fn fits_region(p: &Plan, page_size: usize, pages: u64) -> bool {
    region_layout(p, page_size, pages).is_some()
}

/// Each bucket's first raw page, relative to the region: at or after the
/// first page its finished rows take and after the bucket before; None if
/// the last does not end inside the region's `pages`.
fn region_layout(p: &Plan, ps: usize, pages: u64) -> Option<Vec<u64>> {
    let pl = tensor::payload(ps) as u64;
    let mut first = Vec::with_capacity(p.buckets as usize);
    let mut free = 0u64;
    for k in 0..p.buckets {
        let finished = p.range(k).start as u64 * p.row_bytes as u64 / pl;
        let f = free.max(finished);
        first.push(f);
        free = f + Buckets::raw_pages(p, k, ps);
    }
    (free <= pages).then_some(first)
}

/// Reads the rows of `input` from `offset` in file order and appends each
/// to the bucket of its new position `to_internal[row]`.
/// `progress(bytes read)` is called every 64 MiB or so.
pub fn distribute(input: &Path, offset: u64, to_internal: &[u32], p: &Plan, buckets: &Buckets, progress: &mut dyn FnMut(u64)) -> Result<()> {
    assert_eq!(to_internal.len() as u64, p.rows, "one new position per row");
    let mut f = std::fs::File::open(input).map_err(file_err(input))?;
    f.seek(SeekFrom::Start(offset)).map_err(file_err(input))?;
    let rb = p.row_bytes;
    let mut out = Appender::new(p, buckets)?;
    let block_rows = (READ_BYTES / rb).max(1);
    let mut block = vec![0u8; block_rows * rb];
    let mut row = 0usize;
    while row < to_internal.len() {
        let n = block_rows.min(to_internal.len() - row);
        read_rows(&mut f, input, &mut block[..n * rb])?;
        for (i, bytes) in block[..n * rb].chunks_exact(rb).enumerate() {
            let k = (to_internal[row + i] as u64 / p.bucket_rows) as usize;
            out.push(k, bytes)?;
        }
        row += n;
        progress((row * rb) as u64);
    }
    out.finish()
}

/// Append buffers, one per bucket, written out as they fill.
struct Appender<'a, 'b> {
    buckets: &'b Buckets<'a>,
    bufs: Vec<Vec<u8>>,
    /// Raw pages written per bucket (region buckets).
    written: Vec<u64>,
    append: usize,
    /// Whole pages go out through it (region buckets).
    stage: Option<AlignedBuf>,
    plan: Plan,
}

impl<'a, 'b> Appender<'a, 'b> {
    fn new(p: &Plan, buckets: &'b Buckets<'a>) -> Result<Appender<'a, 'b>> {
        let mut append = p.append_bytes();
        let mut stage = None;
        match buckets {
            Buckets::Files(paths) => {
                assert_eq!(paths.len() as u64, p.buckets);
                for path in paths {
                    std::fs::File::create(path).map_err(file_err(path))?;
                }
            }
            Buckets::Region { vol, first } => {
                assert_eq!(first.len() as u64, p.buckets);
                let ps = vol.page_size();
                append = append.next_multiple_of(ps);
                stage = Some(AlignedBuf::zeroed(append + ps));
                // The import reserved the tensor's region (`Volume::reserve`):
                // growing here would allocate it.
                let end = first.last().map_or(0, |&f| f + Buckets::raw_pages(p, p.buckets - 1, ps));
                assert!(end <= vol.num_pages(), "region buckets end at page {end}, past the volume's {}", vol.num_pages());
            }
        }
        Ok(Appender { buckets, bufs: vec![Vec::new(); p.buckets as usize], written: vec![0; p.buckets as usize], append, stage, plan: *p })
    }

    fn push(&mut self, k: usize, row: &[u8]) -> Result<()> {
        self.bufs[k].extend_from_slice(row);
        if self.bufs[k].len() >= self.append {
            self.write(k, false)?;
        }
        Ok(())
    }

    /// Writes bucket k's buffer out: whole pages only unless `last`.
    fn write(&mut self, k: usize, last: bool) -> Result<()> {
        match self.buckets {
            Buckets::Files(paths) => append_to(&paths[k], &mut self.bufs[k]),
            Buckets::Region { vol, first } => {
                let ps = vol.page_size();
                let buf = &mut self.bufs[k];
                let len = if last { buf.len().next_multiple_of(ps) } else { buf.len() / ps * ps };
                if len == 0 {
                    return Ok(());
                }
                let stage = self.stage.as_mut().expect("region buckets stage their pages");
                if stage.len() < len {
                    // A row wider than the append buffer overshoots it.
                    *stage = AlignedBuf::zeroed(len);
                }
                let take = buf.len().min(len);
                stage[..take].copy_from_slice(&buf[..take]);
                stage[take..len].fill(0);
                let at = first[k] + self.written[k];
                let ids: Vec<u64> = (at..at + (len / ps) as u64).collect();
                vol.write(&ids, &stage[..len])?;
                self.written[k] += ids.len() as u64;
                buf.drain(..take);
                Ok(())
            }
        }
    }

    fn finish(mut self) -> Result<()> {
        for k in 0..self.bufs.len() {
            self.write(k, true)?;
        }
        if let Buckets::Region { vol, .. } = self.buckets {
            let ps = vol.page_size();
            for (k, &w) in self.written.iter().enumerate() {
                assert_eq!(w, Buckets::raw_pages(&self.plan, k as u64, ps), "bucket {k} took the pages planned");
            }
        }
        Ok(())
    }
}

fn read_rows(f: &mut std::fs::File, input: &Path, out: &mut [u8]) -> Result<()> {
    f.read_exact(out).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => StoreError::BadInput { path: input.to_path_buf(), reason: "file ended before its tensor data".into() },
        _ => StoreError::File { path: input.to_path_buf(), source: e },
    })
}

/// Appends and empties `buf`. The file is opened per append so that the
/// bucket count is not bounded by open descriptors.
fn append_to(path: &Path, buf: &mut Vec<u8>) -> Result<()> {
    if buf.is_empty() {
        return Ok(());
    }
    let mut f = std::fs::OpenOptions::new().append(true).open(path).map_err(file_err(path))?;
    f.write_all(buf).map_err(file_err(path))?;
    buf.clear();
    Ok(())
}

/// The rows in the new order, one bucket at a time, each bucket's file
/// removed once read.
pub struct Placed<'a> {
    plan: Plan,
    to_external: &'a [u32],
    buckets: Buckets<'a>,
    next: u64,
    file: Vec<u8>,
    rows: Vec<u8>,
    at: usize,
}

impl<'a> Placed<'a> {
    pub fn new(plan: Plan, to_external: &'a [u32], buckets: Buckets<'a>) -> Placed<'a> {
        assert_eq!(to_external.len() as u64, plan.rows);
        Placed { plan, to_external, buckets, next: 0, file: Vec::new(), rows: Vec::new(), at: 0 }
    }

    /// Copies the next bytes of rows into `out`; 0 at the end.
    pub fn fill(&mut self, out: &mut [u8]) -> Result<usize> {
        if self.at == self.rows.len() {
            if self.next == self.plan.buckets {
                return Ok(0);
            }
            self.place(self.next)?;
            self.next += 1;
            self.at = 0;
        }
        let n = out.len().min(self.rows.len() - self.at);
        out[..n].copy_from_slice(&self.rows[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }

    /// Reads bucket k and puts its rows in new-position order.
    fn place(&mut self, k: u64) -> Result<()> {
        let range = self.plan.range(k);
        let rb = self.plan.row_bytes;
        self.read_bucket(k)?;
        if self.file.len() != range.len() * rb {
            // Written by `distribute` in this import: a mismatch means the
            // build directory changed under it.
            return Err(StoreError::Invalid(format!(
                "bucket {k} holds {} bytes, not {} rows of {rb}: the import's build directory changed under it",
                self.file.len(),
                range.len()
            )));
        }
        let ids = &self.to_external[range.clone()];
        let mut order: Vec<u32> = (0..ids.len() as u32).collect();
        order.sort_unstable_by_key(|&j| ids[j as usize]);
        self.rows.resize(range.len() * rb, 0);
        for (src, &j) in self.file.chunks_exact(rb).zip(&order) {
            self.rows[j as usize * rb..(j as usize + 1) * rb].copy_from_slice(src);
        }
        if let Buckets::Files(paths) = &self.buckets {
            std::fs::remove_file(&paths[k as usize]).map_err(file_err(&paths[k as usize]))?;
        }
        Ok(())
    }

    /// Bucket k's raw rows into `file`.
    fn read_bucket(&mut self, k: u64) -> Result<()> {
        self.file.clear();
        match &self.buckets {
            Buckets::Files(paths) => {
                let path = &paths[k as usize];
                let mut f = std::fs::File::open(path).map_err(file_err(path))?;
                f.read_to_end(&mut self.file).map_err(file_err(path))?;
            }
            Buckets::Region { vol, first } => {
                let ps = vol.page_size();
                let bytes = self.plan.range(k).len() * self.plan.row_bytes;
                let pages = Buckets::raw_pages(&self.plan, k, ps);
                for from in (0..pages).step_by(READ_PAGES) {
                    let ids: Vec<u64> = (first[k as usize] + from..first[k as usize] + pages.min(from + READ_PAGES as u64)).collect();
                    let got = vol.read(&ids)?;
                    for i in 0..ids.len() {
                        let want = (bytes - self.file.len()).min(ps);
                        self.file.extend_from_slice(&got.page(i)[..want]);
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_buckets_within_the_budget() {
        let p = plan(1000, 64, 32 * 64 * 100).unwrap();
        assert_eq!((p.bucket_rows, p.buckets), (100, 10));
        assert_eq!(p.range(9), 900..1000);
        assert!(plan(1 << 30, 256, 16 << 20).is_none(), "more than MAX_BUCKETS");
        assert_eq!(plan(10, 1 << 20, 16 << 20).unwrap().bucket_rows, 1, "at least a row a bucket");
    }

    #[test]
    fn rows_come_out_in_the_new_order() {
        let dir = tempfile::tempdir().unwrap();
        let (rows, rb) = (1000usize, 12usize);
        let mut bytes = vec![0u8; 5];
        for r in 0..rows {
            bytes.extend((0..rb).map(|i| (r * 31 + i) as u8));
        }
        let input = dir.path().join("x.bin");
        std::fs::write(&input, &bytes).unwrap();
        // A scrambled order: new position i holds input row (i * 7 + 3) % rows.
        let to_external: Vec<u32> = (0..rows).map(|i| ((i * 7 + 3) % rows) as u32).collect();
        let mut to_internal = vec![0u32; rows];
        for (i, &r) in to_external.iter().enumerate() {
            to_internal[r as usize] = i as u32;
        }
        let p = plan(rows as u64, rb, 32 * rb as u64 * 64).unwrap();
        assert!(p.buckets > 10);
        let paths = bucket_paths(dir.path(), "x", &p);
        distribute(&input, 5, &to_internal, &p, &Buckets::Files(paths.clone()), &mut |_| {}).unwrap();
        let mut placed = Placed::new(p, &to_external, Buckets::Files(paths.clone()));
        let mut got = Vec::new();
        let mut buf = [0u8; 100];
        loop {
            let n = placed.fill(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        let want: Vec<u8> = to_external.iter().flat_map(|&r| bytes[5 + r as usize * rb..5 + (r as usize + 1) * rb].to_vec()).collect();
        assert_eq!(got, want);
        assert!(paths.iter().all(|p| !p.exists()), "buckets are removed once read");
    }

    /// Input rows 0..rows of `rb` bytes after a 5-byte header, a scrambled
    /// order, and the rows in that order.
    fn scrambled(dir: &Path, rows: usize, rb: usize) -> (PathBuf, Vec<u32>, Vec<u32>, Vec<u8>) {
        let mut bytes = vec![0u8; 5];
        for r in 0..rows {
            bytes.extend((0..rb).map(|i| (r * 31 + i * 7) as u8));
        }
        let input = dir.join("x.bin");
        std::fs::write(&input, &bytes).unwrap();
        let to_external: Vec<u32> = (0..rows).map(|i| ((i * 7919 + 3) % rows) as u32).collect();
        let mut to_internal = vec![0u32; rows];
        for (i, &r) in to_external.iter().enumerate() {
            to_internal[r as usize] = i as u32;
        }
        let want = to_external.iter().flat_map(|&r| bytes[5 + r as usize * rb..5 + (r as usize + 1) * rb].to_vec()).collect();
        (input, to_internal, to_external, want)
    }

    /// A region's layout keeps each bucket's raw pages at or after the first
    /// page its finished rows take, in order, inside the region; where it
    /// cannot, there is none.
    #[test]
    fn region_layout_keeps_raw_pages_ahead_of_the_writer() {
        let ps = 4096;
        let mut fitted = 0;
        for (rows, rb, budget) in [
            (40_000u64, 64usize, 16u64 << 20),
            (1000, 12, 32 * 12 * 64),
            (5000, 4096, 64 << 20),
            (3, 8, 1 << 20),
            (100_000, 512, 8 << 20),
            (777, 4100, 1 << 20),
        ] {
            let p = plan(rows, rb, budget).unwrap();
            let pages = tensor::pages_for(rows, rb as u64, ps);
            let Some(first) = region_layout(&p, ps, pages) else { continue };
            fitted += 1;
            let pl = tensor::payload(ps) as u64;
            for k in 0..p.buckets {
                let f = first[k as usize];
                assert!(f >= p.range(k).start as u64 * rb as u64 / pl, "bucket {k} starts behind its finished pages");
                let end = f + Buckets::raw_pages(&p, k, ps);
                assert!(end <= first.get(k as usize + 1).copied().unwrap_or(pages), "bucket {k} overlaps the next or leaves the region");
            }
        }
        assert!(fitted >= 3, "the cases mostly fit");
    }

    /// Rows through region buckets come out in the new order, as through
    /// files, and tensor pages written over the region as they are handed
    /// over (as `write_tensor` does) never clobber a bucket not read yet.
    #[test]
    fn region_buckets_give_the_rows_in_the_new_order() {
        let dir = tempfile::tempdir().unwrap();
        let ps = 4096;
        // Buckets of 1 MiB or more, which fit; the last case's rows are
        // wider than its append buffers.
        for (rows, rb, budget) in [(40_000usize, 256usize, 64u64 << 20), (5000, 1000, 32 * 1000 * 1500), (1000, 20_000, 32 * 20_000 * 50)] {
            let (input, to_internal, to_external, want) = scrambled(dir.path(), rows, rb);
            let p = plan(rows as u64, rb, budget).unwrap();
            assert!(p.buckets >= 4, "{p:?}");
            let pages = tensor::pages_for(rows as u64, rb as u64, ps);
            let path = dir.path().join(format!("vol-{rb}"));
            let vol =
                Volume::create(std::slice::from_ref(&path), 2, solidgraph_io::VolumeOptions { page_size: ps, writable: true, ..Default::default() }).unwrap();
            let start = 2;
            // As the import does before it writes anything.
            vol.reserve(start + pages).unwrap();
            let buckets = Buckets::in_region(&vol, &p, start, pages).expect("the region holds these buckets");
            distribute(&input, 5, &to_internal, &p, &buckets, &mut |_| {}).unwrap();
            let mut placed = Placed::new(p, &to_external, buckets);
            let got = crate::import::layout::write_tensor(&vol, start, 0, 1, |buf| placed.fill(buf)).unwrap();
            assert_eq!(got, start + pages);
            let pl = tensor::payload(ps);
            let read = vol.read(&(start..start + pages).collect::<Vec<_>>()).unwrap();
            let mut back = Vec::new();
            for i in 0..pages as usize {
                crate::page::open(start + i as u64, read.page(i)).unwrap();
                back.extend_from_slice(&read.page(i)[crate::page::HEADER..crate::page::HEADER + pl]);
            }
            back.truncate(want.len());
            assert!(back == want, "rows of {rb} bytes differ after the region round trip");
        }
    }

    #[test]
    fn a_short_input_is_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("x.bin");
        std::fs::write(&input, vec![1u8; 100]).unwrap();
        let p = plan(20, 8, 32 * 8 * 4).unwrap();
        let paths = bucket_paths(dir.path(), "x", &p);
        let to_internal: Vec<u32> = (0..20).collect();
        let e = distribute(&input, 0, &to_internal, &p, &Buckets::Files(paths), &mut |_| {}).unwrap_err();
        assert!(matches!(e, StoreError::BadInput { .. }), "{e}");
    }
}
