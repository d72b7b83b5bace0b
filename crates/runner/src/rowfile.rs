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

/// A finished row file opened for batched, checked reads.
pub struct RowReader {
    path: PathBuf,
    file: File,
    pub rows: u64,
    pub cols: usize,
    crcs: Vec<u32>,
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
        Ok(RowReader { path: path.to_path_buf(), file, rows, cols, crcs })
    }

    /// Rows `ids` (any order, repeats allowed) as one tensor: the pages they
    /// touch are read once, in order, neighbouring ones merged into one read.
    pub fn read(&self, ids: &[u64]) -> Result<Tensor> {
        let rb = self.cols * 4;
        let mut pages: Vec<u64> = Vec::with_capacity(ids.len() * 2);
        for &v in ids {
            assert!(v < self.rows, "row {v} of a row file of {} rows", self.rows);
            let (a, b) = (v * rb as u64, (v + 1) * rb as u64 - 1);
            pages.extend(a / PAGE as u64..=b / PAGE as u64);
        }
        pages.sort_unstable();
        pages.dedup();
        let mut buf: Vec<u8> = Vec::new();
        // (first page, byte offset in buf) of each run read.
        let mut runs: Vec<(u64, u64, usize)> = Vec::new();
        let mut i = 0;
        while i < pages.len() {
            let first = pages[i];
            let mut last = first;
            let mut j = i + 1;
            while j < pages.len() && pages[j] - last <= READ_GAP_PAGES && ((pages[j] - first + 1) as usize) * PAGE <= MAX_READ {
                last = pages[j];
                j += 1;
            }
            runs.push((first, last, buf.len()));
            let start = first * PAGE as u64;
            let end = ((last + 1) * PAGE as u64).min(self.rows * rb as u64);
            let at = buf.len();
            buf.resize(at + (end - start) as usize, 0);
            self.file.read_exact_at(&mut buf[at..], start).map_err(io(&self.path))?;
            for p in first..=last {
                let lo = at + ((p - first) as usize) * PAGE;
                let hi = (lo + PAGE).min(at + (end - start) as usize);
                if crc32c::crc32c(&buf[lo..hi]) != self.crcs[p as usize] {
                    return Err(RunnerError::RowFile { path: self.path.clone(), message: format!("page {p} fails its checksum") });
                }
            }
            i = j;
        }
        let mut out = Tensor::zeros(ids.len(), self.cols);
        let out_bytes = unsafe { std::slice::from_raw_parts_mut(out.data.as_mut_ptr().cast::<u8>(), out.data.len() * 4) };
        for (k, &v) in ids.iter().enumerate() {
            let byte = v * rb as u64;
            let p = byte / PAGE as u64;
            let r = runs.partition_point(|&(first, _, _)| first <= p) - 1;
            let (first, last, at) = runs[r];
            debug_assert!(p <= last, "every requested page lies in a run");
            let from = at + (byte - first * PAGE as u64) as usize;
            out_bytes[k * rb..(k + 1) * rb].copy_from_slice(&buf[from..from + rb]);
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
