//! Row files: one layer's output of `infer_all`, f32 rows of fixed width in
//! vertex order, checksummed. The data file (`NAME.rows`) is the raw rows
//! from byte 0 (so Python maps it without a copy); its pages of
//! [`PAGE`] bytes each have a CRC32C in `NAME.crc` (little-endian u32s, then
//! the CRC32C of that table), written once the rows are synced. Every page
//! a read uses is checked against its CRC before any row of it is used.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Result, RunnerError};
use crate::tensor::Tensor;

/// Bytes per checksummed page of a row file.
pub const PAGE: usize = 4096;
/// Largest single read: neighbouring pages within this span merge into one.
const MAX_READ: usize = 1 << 20;
/// A gap of at most this many unrequested pages is read through rather than split.
const READ_GAP_PAGES: u64 = 4;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RunnerError + '_ {
    move |source| RunnerError::Io { path: path.to_path_buf(), source }
}

pub fn crc_path(rows: &Path) -> PathBuf {
    rows.with_extension("crc")
}

/// Streams rows in order into a new row file, checksumming each page as it fills.
pub struct RowWriter {
    path: PathBuf,
    file: std::io::BufWriter<File>,
    cols: usize,
    rows: u64,
    /// The bytes of the page being filled, checksummed when full.
    page: Vec<u8>,
    crcs: Vec<u32>,
}

impl RowWriter {
    pub fn create(path: &Path, cols: usize) -> Result<RowWriter> {
        assert!(cols > 0, "a row file has at least one column");
        let file = File::create(path).map_err(io(path))?;
        Ok(RowWriter {
            path: path.to_path_buf(),
            file: std::io::BufWriter::with_capacity(1 << 20, file),
            cols,
            rows: 0,
            page: Vec::with_capacity(PAGE),
            crcs: Vec::new(),
        })
    }

    /// Appends `t`'s rows after those written so far.
    pub fn append(&mut self, t: &Tensor) -> Result<()> {
        assert_eq!(t.cols, self.cols, "rows appended to a row file have its width");
        let bytes: &[u8] = bytemuck_f32(&t.data);
        self.file.write_all(bytes).map_err(io(&self.path))?;
        let mut rest = bytes;
        while !rest.is_empty() {
            let take = (PAGE - self.page.len()).min(rest.len());
            self.page.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if self.page.len() == PAGE {
                self.crcs.push(crc32c::crc32c(&self.page));
                self.page.clear();
            }
        }
        self.rows += t.rows as u64;
        Ok(())
    }

    /// Syncs the rows, then writes and syncs the CRC table: a file with a
    /// complete table was wholly written. Returns the table's own CRC.
    pub fn finish(mut self) -> Result<(u64, u32)> {
        if !self.page.is_empty() {
            self.crcs.push(crc32c::crc32c(&self.page));
        }
        self.file.flush().map_err(io(&self.path))?;
        self.file.get_ref().sync_data().map_err(io(&self.path))?;
        let mut table: Vec<u8> = self.crcs.iter().flat_map(|c| c.to_le_bytes()).collect();
        let own = crc32c::crc32c(&table);
        table.extend_from_slice(&own.to_le_bytes());
        let cp = crc_path(&self.path);
        let mut f = File::create(&cp).map_err(io(&cp))?;
        f.write_all(&table).map_err(io(&cp))?;
        f.sync_data().map_err(io(&cp))?;
        Ok((self.rows, own))
    }
}

fn bytemuck_f32(v: &[f32]) -> &[u8] {
    // f32 has no padding and any bit pattern is a valid u8; the platform is little-endian (checked at build).
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

#[cfg(not(target_endian = "little"))]
compile_error!("row files are little-endian f32 written from memory");

/// A finished row file opened for batched, checked reads, with an optional
/// set of pinned pages: the pages a level reads most (its hub rows) are read
/// once into memory for the whole level instead of once per chunk.
pub struct RowReader {
    path: PathBuf,
    file: File,
    pub rows: u64,
    pub cols: usize,
    crcs: Vec<u32>,
    /// Per page, 0 or 1 + its slot in `pinned_data`.
    pinned_slot: Vec<u32>,
    pinned_data: Vec<u8>,
    /// Bytes read from the file (pinning included) since open.
    read_bytes: AtomicU64,
}

impl RowReader {
    /// Opens `path`, checking that its size is `rows` x `cols` f32s and that
    /// its CRC table is whole and is the one `table_crc` names.
    pub fn open(path: &Path, rows: u64, cols: usize, table_crc: u32) -> Result<RowReader> {
        let bad = |message: String| RunnerError::RowFile { path: path.to_path_buf(), message };
        let file = File::open(path).map_err(io(path))?;
        let len = file.metadata().map_err(io(path))?.len();
        let want = rows * cols as u64 * 4;
        if len != want {
            return Err(bad(format!("{len} bytes, {rows} rows of {cols} f32 make {want}")));
        }
        let cp = crc_path(path);
        let table = std::fs::read(&cp).map_err(io(&cp))?;
        let pages = want.div_ceil(PAGE as u64) as usize;
        if table.len() != pages * 4 + 4 {
            return Err(bad(format!("its CRC table holds {} bytes, {pages} pages need {}", table.len(), pages * 4 + 4)));
        }
        let (body, own) = table.split_at(pages * 4);
        let own = u32::from_le_bytes(own.try_into().expect("4 bytes"));
        if crc32c::crc32c(body) != own || own != table_crc {
            return Err(bad(format!("its CRC table is damaged or not the one recorded (crc {own:#x}, recorded {table_crc:#x})")));
        }
        let crcs = body.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes"))).collect();
        Ok(RowReader { path: path.to_path_buf(), file, rows, cols, crcs, pinned_slot: Vec::new(), pinned_data: Vec::new(), read_bytes: AtomicU64::new(0) })
    }

    /// Bytes of rows in the file.
    fn len(&self) -> u64 {
        self.rows * self.cols as u64 * 4
    }

    /// Bytes read from the file so far (pinned pages included).
    pub fn read_bytes(&self) -> u64 {
        self.read_bytes.load(Ordering::Relaxed)
    }

    /// Bytes of pages pinned in memory.
    pub fn pinned_bytes(&self) -> u64 {
        self.pinned_data.len() as u64
    }

    /// Reads `[start, start + buf.len())` and checks the pages it covers
    /// (`start` on a page boundary).
    fn read_checked(&self, buf: &mut [u8], start: u64) -> Result<()> {
        debug_assert_eq!(start % PAGE as u64, 0, "reads start at a page");
        self.file.read_exact_at(buf, start).map_err(io(&self.path))?;
        self.read_bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
        let first = (start / PAGE as u64) as usize;
        for (k, page) in buf.chunks(PAGE).enumerate() {
            if crc32c::crc32c(page) != self.crcs[first + k] {
                return Err(RunnerError::RowFile { path: self.path.clone(), message: format!("page {} fails its checksum", first + k) });
            }
        }
        Ok(())
    }

    /// Pins the pages with the highest `scores` (one per page; pages scoring
    /// below 2 are read at most once per chunk anyway and are left out)
    /// that fit in `budget` bytes, replacing any pinned before. Returns the
    /// bytes pinned.
    pub fn pin(&mut self, scores: &[u64], budget: u64) -> Result<u64> {
        let pages = self.crcs.len();
        assert_eq!(scores.len(), pages, "a score per page");
        self.unpin();
        let room = (budget / PAGE as u64) as usize;
        let mut best: Vec<u32> = (0..pages as u32).filter(|&p| scores[p as usize] >= 2).collect();
        if best.len() > room {
            best.select_nth_unstable_by(room, |&a, &b| scores[b as usize].cmp(&scores[a as usize]));
            best.truncate(room);
        }
        best.sort_unstable();
        let mut slot = vec![0u32; pages];
        let mut data = vec![0u8; best.len() * PAGE];
        let len = self.len();
        let mut i = 0;
        while i < best.len() {
            // Consecutive pages in one read.
            let mut j = i + 1;
            while j < best.len() && best[j] == best[j - 1] + 1 && (j - i) * PAGE < MAX_READ {
                j += 1;
            }
            let start = best[i] as u64 * PAGE as u64;
            let end = ((best[j - 1] as u64 + 1) * PAGE as u64).min(len);
            self.read_checked(&mut data[i * PAGE..i * PAGE + (end - start) as usize], start)?;
            for (k, &p) in best[i..j].iter().enumerate() {
                slot[p as usize] = (i + k + 1) as u32;
            }
            i = j;
        }
        self.pinned_slot = slot;
        self.pinned_data = data;
        Ok(self.pinned_bytes())
    }

    /// Drops the pinned pages.
    pub fn unpin(&mut self) {
        self.pinned_slot = Vec::new();
        self.pinned_data = Vec::new();
    }

    fn pinned(&self, p: u64) -> Option<usize> {
        match self.pinned_slot.get(p as usize) {
            Some(&s) if s > 0 => Some((s - 1) as usize),
            _ => None,
        }
    }

    /// Rows `ids` (any order, repeats allowed) as one tensor: the pages they
    /// touch that are not pinned are read once, in order, neighbouring ones
    /// merged into one read.
    pub fn read(&self, ids: &[u64]) -> Result<Tensor> {
        let rb = self.cols * 4;
        let mut pages: Vec<u64> = Vec::with_capacity(ids.len() * 2);
        for &v in ids {
            assert!(v < self.rows, "row {v} of a row file of {} rows", self.rows);
            let (a, b) = (v * rb as u64, (v + 1) * rb as u64 - 1);
            pages.extend((a / PAGE as u64..=b / PAGE as u64).filter(|&p| self.pinned(p).is_none()));
        }
        pages.sort_unstable();
        pages.dedup();
        let mut buf: Vec<u8> = Vec::new();
        // (first page, last page, byte offset in buf) of each run read.
        let mut runs: Vec<(u64, u64, usize)> = Vec::new();
        let mut i = 0;
        while i < pages.len() {
            let first = pages[i];
            let mut last = first;
            let mut j = i + 1;
            // A short gap is read through, unless pinned pages are in it (the
            // point of pinning is not to read them).
            while j < pages.len()
                && pages[j] - last <= READ_GAP_PAGES
                && ((pages[j] - first + 1) as usize) * PAGE <= MAX_READ
                && (last + 1..pages[j]).all(|p| self.pinned(p).is_none())
            {
                last = pages[j];
                j += 1;
            }
            runs.push((first, last, buf.len()));
            let start = first * PAGE as u64;
            let end = ((last + 1) * PAGE as u64).min(self.len());
            let at = buf.len();
            buf.resize(at + (end - start) as usize, 0);
            self.read_checked(&mut buf[at..], start)?;
            i = j;
        }
        // Page p's bytes: pinned, or in the run that read it.
        let page_at = |p: u64| -> &[u8] {
            if let Some(s) = self.pinned(p) {
                return &self.pinned_data[s * PAGE..(s + 1) * PAGE];
            }
            let r = runs.partition_point(|&(first, _, _)| first <= p) - 1;
            let (first, last, at) = runs[r];
            debug_assert!(p <= last, "every requested page lies in a run");
            let from = at + ((p - first) as usize) * PAGE;
            &buf[from..(from + PAGE).min(buf.len())]
        };
        let mut out = Tensor::zeros(ids.len(), self.cols);
        let out_bytes = unsafe { std::slice::from_raw_parts_mut(out.data.as_mut_ptr().cast::<u8>(), out.data.len() * 4) };
        for (k, &v) in ids.iter().enumerate() {
            let (mut pos, end) = (v * rb as u64, (v + 1) * rb as u64);
            let mut to = k * rb;
            // A row may straddle two pages, one pinned and one read.
            while pos < end {
                let p = pos / PAGE as u64;
                let stop = end.min((p + 1) * PAGE as u64);
                let (a, b) = ((pos - p * PAGE as u64) as usize, (stop - p * PAGE as u64) as usize);
                out_bytes[to..to + b - a].copy_from_slice(&page_at(p)[a..b]);
                to += b - a;
                pos = stop;
            }
        }
        Ok(out)
    }

    /// Reads and checks every page (a resumed run's output before it is handed out).
    pub fn verify_all(&self) -> Result<()> {
        let per = (MAX_READ / PAGE) as u64;
        let total = self.rows * self.cols as u64 * 4;
        let mut buf = vec![0u8; MAX_READ];
        let mut p = 0u64;
        while p * (PAGE as u64) < total {
            let start = p * PAGE as u64;
            let end = ((p + per) * PAGE as u64).min(total);
            let n = (end - start) as usize;
            self.file.read_exact_at(&mut buf[..n], start).map_err(io(&self.path))?;
            for (k, page) in buf[..n].chunks(PAGE).enumerate() {
                if crc32c::crc32c(page) != self.crcs[p as usize + k] {
                    return Err(RunnerError::RowFile { path: self.path.clone(), message: format!("page {} fails its checksum", p as usize + k) });
                }
            }
            p += per;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pinned pages serve rows exactly as reads do (rows straddling a pinned
    /// and an unpinned page included), and are read once.
    #[test]
    fn pinned_reads_equal_plain_reads() {
        let dir = std::env::temp_dir().join(format!("sg-rowfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.rows");
        let (rows, cols) = (5000u64, 7usize);
        let mut w = RowWriter::create(&path, cols).unwrap();
        let data: Vec<f32> = (0..rows as usize * cols).map(|i| i as f32 * 0.5).collect();
        w.append(&Tensor::new(rows as usize, cols, data.clone())).unwrap();
        let (_, crc) = w.finish().unwrap();
        let mut r = RowReader::open(&path, rows, cols, crc).unwrap();
        let ids: Vec<u64> = (0..3000u64).map(|i| (i * 7919) % rows).chain([0, rows - 1, 146, 146]).collect();
        let plain = r.read(&ids).unwrap();
        let pages = r.crcs.len();
        // Every other page scores high, so rows straddle pinned and unpinned pages.
        let scores: Vec<u64> = (0..pages).map(|p| if p % 2 == 0 { 10 + p as u64 } else { 0 }).collect();
        let pinned = r.pin(&scores, 5 * PAGE as u64).unwrap();
        assert_eq!(pinned, 5 * PAGE as u64);
        let before = r.read_bytes();
        let cached = r.read(&ids).unwrap();
        assert_eq!(cached.data, plain.data);
        for (k, &v) in ids.iter().enumerate() {
            assert_eq!(&cached.data[k * cols..(k + 1) * cols], &data[v as usize * cols..(v as usize + 1) * cols]);
        }
        // Only pinned pages: no read at all.
        let hp = (pages as u64 - 1) & !1; // the highest even page: pinned
        let hot: Vec<u64> = (0..rows).filter(|&v| v * 28 / PAGE as u64 == hp && (v * 28 + 27) / PAGE as u64 == hp).collect();
        assert!(!hot.is_empty());
        let after = r.read_bytes();
        assert!(after > before);
        r.read(&hot).unwrap();
        assert_eq!(r.read_bytes(), after, "rows of pinned pages are not read again");
        r.unpin();
        assert_eq!(r.read(&ids).unwrap().data, plain.data);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
