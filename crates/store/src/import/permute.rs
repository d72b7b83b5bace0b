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

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::{Result, StoreError, file_err};

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

/// Reads the rows of `input` from `offset` in file order and appends each
/// to the bucket of its new position `to_internal[row]`; returns the
/// bucket files. `progress(bytes read)` is called every 64 MiB or so.
pub fn distribute(input: &Path, offset: u64, to_internal: &[u32], p: &Plan, paths: &[PathBuf], progress: &mut dyn FnMut(u64)) -> Result<()> {
    assert_eq!(to_internal.len() as u64, p.rows, "one new position per row");
    assert_eq!(paths.len() as u64, p.buckets);
    let mut f = std::fs::File::open(input).map_err(file_err(input))?;
    f.seek(SeekFrom::Start(offset)).map_err(file_err(input))?;
    let rb = p.row_bytes;
    let append = p.append_bytes();
    let mut bufs: Vec<Vec<u8>> = (0..p.buckets).map(|_| Vec::new()).collect();
    for path in paths {
        std::fs::File::create(path).map_err(file_err(path))?;
    }
    let block_rows = (READ_BYTES / rb).max(1);
    let mut block = vec![0u8; block_rows * rb];
    let mut row = 0usize;
    while row < to_internal.len() {
        let n = block_rows.min(to_internal.len() - row);
        read_rows(&mut f, input, &mut block[..n * rb])?;
        for (i, bytes) in block[..n * rb].chunks_exact(rb).enumerate() {
            let k = (to_internal[row + i] as u64 / p.bucket_rows) as usize;
            let buf = &mut bufs[k];
            buf.extend_from_slice(bytes);
            if buf.len() >= append {
                append_to(&paths[k], buf)?;
            }
        }
        row += n;
        progress((row * rb) as u64);
    }
    for (k, buf) in bufs.iter_mut().enumerate() {
        append_to(&paths[k], buf)?;
    }
    Ok(())
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
    paths: Vec<PathBuf>,
    next: u64,
    file: Vec<u8>,
    rows: Vec<u8>,
    at: usize,
}

impl<'a> Placed<'a> {
    pub fn new(plan: Plan, to_external: &'a [u32], paths: Vec<PathBuf>) -> Placed<'a> {
        assert_eq!(to_external.len() as u64, plan.rows);
        Placed { plan, to_external, paths, next: 0, file: Vec::new(), rows: Vec::new(), at: 0 }
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
        let path = &self.paths[k as usize];
        self.file.clear();
        let mut f = std::fs::File::open(path).map_err(file_err(path))?;
        f.read_to_end(&mut self.file).map_err(file_err(path))?;
        if self.file.len() != range.len() * rb {
            // Written by `distribute` in this import: a mismatch means the
            // build directory changed under it.
            return Err(StoreError::BadInput {
                path: path.clone(),
                reason: format!("bucket holds {} bytes, not {} rows of {rb}: the import's build directory changed under it", self.file.len(), range.len()),
            });
        }
        let ids = &self.to_external[range.clone()];
        let mut order: Vec<u32> = (0..ids.len() as u32).collect();
        order.sort_unstable_by_key(|&j| ids[j as usize]);
        self.rows.resize(range.len() * rb, 0);
        for (src, &j) in self.file.chunks_exact(rb).zip(&order) {
            self.rows[j as usize * rb..(j as usize + 1) * rb].copy_from_slice(src);
        }
        std::fs::remove_file(path).map_err(file_err(path))?;
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
        distribute(&input, 5, &to_internal, &p, &paths, &mut |_| {}).unwrap();
        let mut placed = Placed::new(p, &to_external, paths.clone());
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

    #[test]
    fn a_short_input_is_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("x.bin");
        std::fs::write(&input, vec![1u8; 100]).unwrap();
        let p = plan(20, 8, 32 * 8 * 4).unwrap();
        let paths = bucket_paths(dir.path(), "x", &p);
        let to_internal: Vec<u32> = (0..20).collect();
        let e = distribute(&input, 0, &to_internal, &p, &paths, &mut |_| {}).unwrap_err();
        assert!(matches!(e, StoreError::BadInput { .. }), "{e}");
    }
}
