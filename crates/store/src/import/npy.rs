//! Just enough of the NumPy `.npy` format to stream arrays in: version 1-3
//! headers, C order, little-endian (or byte-sized) dtypes.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{Result, StoreError, file_err};

#[derive(Debug, Clone)]
pub struct NpyHeader {
    pub path: PathBuf,
    pub descr: String,
    pub shape: Vec<u64>,
    /// Byte offset of the data.
    pub data_offset: u64,
    pub item_size: usize,
}

impl NpyHeader {
    pub fn elements(&self) -> u64 {
        self.shape.iter().product()
    }
}

fn bad(path: &Path, reason: impl Into<String>) -> StoreError {
    StoreError::BadInput { path: path.to_path_buf(), reason: reason.into() }
}

/// A header read's error: the file ending early is a bad file (`short`);
/// any other is the I/O error it is, naming the file.
fn read_err<'a>(path: &'a Path, short: &'static str) -> impl FnOnce(std::io::Error) -> StoreError + 'a {
    move |e| if e.kind() == std::io::ErrorKind::UnexpectedEof { bad(path, short) } else { file_err(path)(e) }
}

/// Reads and checks the header, and that the file holds all the data it
/// declares (a truncated file is refused before anything is written).
pub fn read_header(path: &Path) -> Result<NpyHeader> {
    let mut f = std::fs::File::open(path).map_err(file_err(path))?;
    let file_len = f.metadata().map_err(file_err(path))?.len();
    let mut pre = [0u8; 10];
    f.read_exact(&mut pre).map_err(read_err(path, "not a .npy file (too short)"))?;
    if &pre[..6] != b"\x93NUMPY" {
        return Err(bad(path, "not a .npy file (bad magic)"));
    }
    let (hlen, start) = match pre[6] {
        1 => (u16::from_le_bytes([pre[8], pre[9]]) as usize, 10usize),
        2 | 3 => {
            let mut more = [0u8; 2];
            f.read_exact(&mut more).map_err(read_err(path, "truncated .npy header"))?;
            (u32::from_le_bytes([pre[8], pre[9], more[0], more[1]]) as usize, 12usize)
        }
        v => return Err(bad(path, format!("unsupported .npy version {v}"))),
    };
    if hlen > 1 << 20 {
        return Err(bad(path, "implausible .npy header length"));
    }
    let mut h = vec![0u8; hlen];
    f.read_exact(&mut h).map_err(read_err(path, "truncated .npy header"))?;
    let h = String::from_utf8_lossy(&h).to_string();
    let field = |key: &str| -> Option<String> {
        let at = h.find(&format!("'{key}'"))? + key.len() + 2;
        let rest = h[at..].trim_start().strip_prefix(':')?.trim_start();
        Some(rest.to_string())
    };
    let descr = field("descr").and_then(|r| r.strip_prefix('\'').and_then(|r| r.split('\'').next().map(str::to_string)));
    let descr = descr.ok_or_else(|| bad(path, "no descr in .npy header"))?;
    if field("fortran_order").is_some_and(|r| r.starts_with("True")) {
        return Err(bad(path, "Fortran-order arrays are not supported; save with np.ascontiguousarray"));
    }
    let shape = field("shape").and_then(|r| r.strip_prefix('(').and_then(|r| r.split(')').next().map(str::to_string)));
    let shape = shape.ok_or_else(|| bad(path, "no shape in .npy header"))?;
    let shape: Vec<u64> = shape
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_end_matches('L').parse::<u64>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| bad(path, format!("bad shape ({shape})")))?;
    if descr.starts_with('>') {
        return Err(bad(path, format!("big-endian dtype {descr} is not supported")));
    }
    let item_size: usize =
        descr.trim_start_matches(['<', '|', '=']).get(1..).and_then(|s| s.parse().ok()).ok_or_else(|| bad(path, format!("unsupported dtype {descr}")))?;
    let hdr = NpyHeader { path: path.to_path_buf(), descr, shape, data_offset: (start + hlen) as u64, item_size };
    let need = hdr.data_offset + hdr.elements() * item_size as u64;
    if file_len < need {
        return Err(bad(path, format!("truncated: header declares {need} bytes, file has {file_len}")));
    }
    Ok(hdr)
}

/// Integer element kinds accepted for vertex ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntKind {
    I32,
    I64,
    U32,
    U64,
}

impl NpyHeader {
    pub fn int_kind(&self) -> Result<IntKind> {
        match self.descr.trim_start_matches(['<', '|', '=']) {
            "i4" => Ok(IntKind::I32),
            "i8" => Ok(IntKind::I64),
            "u4" => Ok(IntKind::U32),
            "u8" => Ok(IntKind::U64),
            d => Err(bad(&self.path, format!("vertex ids must be int32/int64/uint32/uint64, not {d}"))),
        }
    }
}

/// Streams integer elements from an offset of an .npy file.
pub struct IntStream {
    path: PathBuf,
    r: std::io::BufReader<std::fs::File>,
    kind: IntKind,
    left: u64,
    /// Raw bytes of a batch, reused.
    bytes: Vec<u8>,
    /// Index of the next element, for error messages.
    pub index: u64,
}

impl IntStream {
    pub fn new(h: &NpyHeader, first: u64, count: u64) -> Result<IntStream> {
        use std::io::{Seek, SeekFrom};
        let kind = h.int_kind()?;
        let mut f = std::fs::File::open(&h.path).map_err(file_err(&h.path))?;
        f.seek(SeekFrom::Start(h.data_offset + first * h.item_size as u64)).map_err(file_err(&h.path))?;
        Ok(IntStream { path: h.path.clone(), r: std::io::BufReader::with_capacity(1 << 20, f), kind, left: count, bytes: Vec::new(), index: 0 })
    }

    /// Appends the next `n` ids to `out` (the stream must hold them);
    /// negative values are an error naming the element index.
    pub fn read_ids(&mut self, out: &mut Vec<u64>, n: usize) -> Result<()> {
        if (n as u64) > self.left {
            return Err(bad(&self.path, format!("element {}: the array ends before {n} more ids", self.index)));
        }
        let size = match self.kind {
            IntKind::I32 | IntKind::U32 => 4,
            IntKind::I64 | IntKind::U64 => 8,
        };
        let from = out.len();
        if size == 8 {
            // 8-byte ids are read straight into `out` (one copy less).
            out.resize(from + n, 0);
            let dst = &mut out[from..];
            // SAFETY: any bytes are a valid u64, and the byte view covers
            // exactly `dst`, borrowed mutably here.
            let bytes = unsafe { std::slice::from_raw_parts_mut(dst.as_mut_ptr().cast::<u8>(), n * 8) };
            self.r.read_exact(bytes).map_err(file_err(&self.path))?;
            if cfg!(target_endian = "big") {
                dst.iter_mut().for_each(|v| *v = u64::from_le(*v));
            }
            return self.after_read(out, from, self.kind == IntKind::I64);
        }
        self.bytes.resize(n * size, 0);
        self.r.read_exact(&mut self.bytes).map_err(file_err(&self.path))?;
        let b = &self.bytes;
        let negative = match self.kind {
            IntKind::I32 => {
                out.extend(b.chunks_exact(4).map(|c| i32::from_le_bytes(c.try_into().expect("4")) as i64 as u64));
                true
            }
            IntKind::U32 => {
                out.extend(b.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4")) as u64));
                false
            }
            IntKind::I64 | IntKind::U64 => unreachable!("8-byte ids are read above"),
        };
        self.after_read(out, from, negative)
    }

    /// Checks the ids appended from `from` (a negative signed id is an
    /// error naming its element) and moves past them.
    fn after_read(&mut self, out: &[u64], from: usize, signed: bool) -> Result<()> {
        // A negative signed id is >= 2^63 as u64.
        if signed && let Some(k) = out[from..].iter().position(|&v| v >= 1 << 63) {
            let v = out[from + k] as i64;
            return Err(bad(&self.path, format!("element {}: negative vertex id {v}", self.index + k as u64)));
        }
        let n = (out.len() - from) as u64;
        self.left -= n;
        self.index += n;
        Ok(())
    }

    /// Next id; negative values are an error naming the element index.
    pub fn next_id(&mut self) -> Result<Option<u64>> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let mut b = [0u8; 8];
        let v: i128 = match self.kind {
            IntKind::I32 => {
                self.r.read_exact(&mut b[..4]).map_err(file_err(&self.path))?;
                i32::from_le_bytes(b[..4].try_into().expect("4")) as i128
            }
            IntKind::U32 => {
                self.r.read_exact(&mut b[..4]).map_err(file_err(&self.path))?;
                u32::from_le_bytes(b[..4].try_into().expect("4")) as i128
            }
            IntKind::I64 => {
                self.r.read_exact(&mut b).map_err(file_err(&self.path))?;
                i64::from_le_bytes(b) as i128
            }
            IntKind::U64 => {
                self.r.read_exact(&mut b).map_err(file_err(&self.path))?;
                u64::from_le_bytes(b) as i128
            }
        };
        let i = self.index;
        self.index += 1;
        if v < 0 {
            return Err(bad(&self.path, format!("element {i}: negative vertex id {v}")));
        }
        Ok(Some(v as u64))
    }
}

/// Writes a version-1 .npy header for a C-order array; the data follows.
pub fn write_header(w: &mut impl std::io::Write, descr: &str, shape: &[u64]) -> std::io::Result<()> {
    let shape_s = match shape.len() {
        1 => format!("({},)", shape[0]),
        _ => format!("({})", shape.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ")),
    };
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_s}, }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    w.write_all(b"\x93NUMPY\x01\x00")?;
    w.write_all(&(h.len() as u16).to_le_bytes())?;
    w.write_all(h.as_bytes())
}

/// Writes a whole .npy file.
pub fn write_npy(path: &Path, descr: &str, shape: &[u64], data: &[u8]) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    write_header(&mut f, descr, shape)?;
    std::io::Write::write_all(&mut f, data)?;
    std::io::Write::flush(&mut f)
}
