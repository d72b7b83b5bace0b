//! An UpdateGraph's chunks spooled to files under the data dir as they
//! arrive, so the server holds one chunk in memory, not the graph: edges as
//! two `.npy` id columns (or, with weights or labels, a CSV file whose
//! floats print in Rust's shortest round-trip form), each tensor as one
//! `.npy` file. The import reads them as it reads a user's files. A `.npy`
//! file's header is written last, into room kept at its start, once the
//! row count is known. The spool directory's name holds `.partial-`, so a
//! server killed midway removes it at its next start; otherwise it is
//! removed when the `Spool` is dropped.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use solidgraph_store::{DType, EdgeInput, TensorData, TensorInput};
use tonic::Status;

/// Bytes kept for a `.npy` header: magic, version, length and a dict with
/// two shape numbers of up to 20 digits fit in well under this.
const NPY_HEADER: usize = 128;

fn io_status(what: &Path, e: std::io::Error) -> Status {
    if e.kind() == std::io::ErrorKind::StorageFull {
        return Status::resource_exhausted(format!("spooling the graph to {}: the disk is full", what.display()));
    }
    Status::internal(format!("spooling the graph to {}: {e}", what.display()))
}

/// A `.npy` file being written: room for the header, then the data.
struct NpyFile {
    path: PathBuf,
    out: BufWriter<File>,
    descr: &'static str,
}

impl NpyFile {
    fn create(path: PathBuf, descr: &'static str) -> Result<NpyFile, Status> {
        let f = File::create_new(&path).map_err(|e| io_status(&path, e))?;
        let mut out = BufWriter::with_capacity(1 << 20, f);
        out.write_all(&[0u8; NPY_HEADER]).map_err(|e| io_status(&path, e))?;
        Ok(NpyFile { path, out, descr })
    }

    fn write(&mut self, data: &[u8]) -> Result<(), Status> {
        self.out.write_all(data).map_err(|e| io_status(&self.path, e))
    }

    /// Writes the header for `shape` into the room kept for it.
    fn finish(mut self, shape: &[u64]) -> Result<PathBuf, Status> {
        let h = npy_header(self.descr, shape);
        let r = self.out.seek(SeekFrom::Start(0)).and_then(|_| self.out.write_all(&h)).and_then(|_| self.out.flush());
        r.map_err(|e| io_status(&self.path, e))?;
        Ok(self.path)
    }
}

/// A version-1 `.npy` header of exactly `NPY_HEADER` bytes.
fn npy_header(descr: &str, shape: &[u64]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    let shape = if dims.len() == 1 { format!("({},)", dims[0]) } else { format!("({})", dims.join(", ")) };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    assert!(dict.len() < NPY_HEADER - 11, "a .npy header of {} bytes", dict.len());
    while dict.len() < NPY_HEADER - 11 {
        dict.push(' ');
    }
    dict.push('\n');
    let mut h = b"\x93NUMPY\x01\x00".to_vec();
    h.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    h.extend_from_slice(dict.as_bytes());
    assert_eq!(h.len(), NPY_HEADER);
    h
}

/// A dtype's NumPy type string (little-endian).
fn descr(d: DType) -> &'static str {
    match d {
        DType::F32 => "<f4",
        DType::F16 => "<f2",
        DType::I64 => "<i8",
        DType::I32 => "<i4",
        DType::U8 => "|u1",
        DType::Bool => "|b1",
    }
}

/// Where the edges go: id columns, or CSV rows when they carry weights or
/// labels.
enum Edges {
    None,
    Columns { src: NpyFile, dst: NpyFile },
    Csv { path: PathBuf, out: BufWriter<File> },
}

struct Tensor {
    dtype: DType,
    dim: u64,
    rows: u64,
    file: NpyFile,
}

/// One UpdateGraph's spool directory and the files being written in it.
pub struct Spool {
    dir: PathBuf,
    edges: Edges,
    num_edges: u64,
    tensors: BTreeMap<String, Tensor>,
}

impl Drop for Spool {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(path = %self.dir.display(), error = %e, "cannot remove an UpdateGraph spool");
        }
    }
}

/// The spooled files, ready for the import; they live as long as the spool.
pub struct Spooled {
    pub edges: Vec<EdgeInput>,
    pub tensors: Vec<TensorInput>,
}

impl Spool {
    /// A new spool directory `dir` (which must not exist).
    pub fn create(dir: PathBuf) -> Result<Spool, Status> {
        std::fs::create_dir(&dir).map_err(|e| io_status(&dir, e))?;
        Ok(Spool { dir, edges: Edges::None, num_edges: 0, tensors: BTreeMap::new() })
    }

    /// Appends an edge chunk: `src` and `dst` are checked ids (their wire
    /// bytes are int64 little-endian), `weights` and `labels` come with
    /// every chunk or with none (the caller checks).
    pub fn edges(&mut self, src: &[u64], dst: &[u64], weights: Option<&[f32]>, labels: Option<&[u32]>) -> Result<(), Status> {
        assert_eq!(src.len(), dst.len());
        if let Edges::None = self.edges {
            self.edges = if weights.is_some() || labels.is_some() {
                let path = self.dir.join("edges.csv");
                let f = File::create_new(&path).map_err(|e| io_status(&path, e))?;
                let mut out = BufWriter::with_capacity(1 << 20, f);
                let header = format!("src,dst{}{}\n", if weights.is_some() { ",weight" } else { "" }, if labels.is_some() { ",label" } else { "" });
                out.write_all(header.as_bytes()).map_err(|e| io_status(&path, e))?;
                Edges::Csv { path, out }
            } else {
                Edges::Columns { src: NpyFile::create(self.dir.join("src.npy"), "<i8")?, dst: NpyFile::create(self.dir.join("dst.npy"), "<i8")? }
            };
        }
        match &mut self.edges {
            Edges::None => unreachable!("set above"),
            Edges::Columns { src: s, dst: d } => {
                s.write(&le_bytes(src))?;
                d.write(&le_bytes(dst))?;
            }
            Edges::Csv { path, out } => {
                let mut line = String::with_capacity(64);
                for i in 0..src.len() {
                    use std::fmt::Write as _;
                    line.clear();
                    let _ = write!(line, "{},{}", src[i], dst[i]);
                    if let Some(w) = weights {
                        let _ = write!(line, ",{}", w[i]);
                    }
                    if let Some(l) = labels {
                        let _ = write!(line, ",{}", l[i]);
                    }
                    line.push('\n');
                    out.write_all(line.as_bytes()).map_err(|e| io_status(path, e))?;
                }
            }
        }
        self.num_edges += src.len() as u64;
        Ok(())
    }

    /// Appends `n` rows of tensor `name` (checked against its first chunk's
    /// dtype and dim by the caller).
    pub fn rows(&mut self, name: &str, dtype: DType, dim: u64, n: u64, bytes: &[u8]) -> Result<(), Status> {
        if !self.tensors.contains_key(name) {
            let file = NpyFile::create(self.dir.join(format!("tensor-{}.npy", self.tensors.len())), descr(dtype))?;
            self.tensors.insert(name.to_string(), Tensor { dtype, dim, rows: 0, file });
        }
        let t = self.tensors.get_mut(name).expect("inserted above");
        assert_eq!((t.dtype, t.dim), (dtype, dim));
        t.file.write(bytes)?;
        t.rows += n;
        Ok(())
    }

    /// The dtype and dim of tensor `name`, once it has a chunk.
    pub fn tensor(&self, name: &str) -> Option<(DType, u64)> {
        self.tensors.get(name).map(|t| (t.dtype, t.dim))
    }

    /// Finishes every file: the import's inputs.
    pub fn finish(&mut self) -> Result<Spooled, Status> {
        let edges = match std::mem::replace(&mut self.edges, Edges::None) {
            Edges::None => vec![EdgeInput::Memory { src: Vec::new(), dst: Vec::new(), weights: None, labels: None }],
            Edges::Columns { src, dst } => vec![EdgeInput::NpyPair(src.finish(&[self.num_edges])?, dst.finish(&[self.num_edges])?)],
            Edges::Csv { path, mut out } => {
                out.flush().map_err(|e| io_status(&path, e))?;
                vec![EdgeInput::File(path)]
            }
        };
        let mut tensors = Vec::new();
        for (name, t) in std::mem::take(&mut self.tensors) {
            let path = t.file.finish(&[t.rows, t.dim])?;
            tensors.push(TensorInput { name, data: TensorData::Npy(path) });
        }
        Ok(Spooled { edges, tensors })
    }
}

/// Ids as int64 little-endian bytes (they are below 2^63: checked on the way in).
fn le_bytes(v: &[u64]) -> Vec<u8> {
    let mut b = Vec::with_capacity(v.len() * 8);
    for x in v {
        b.extend_from_slice(&x.to_le_bytes());
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_header_is_fixed_size_and_readable() {
        let dir = tempfile::tempdir().unwrap();
        // The longest header fits in the room kept for it.
        assert_eq!(npy_header("<f4", &[u64::MAX, u64::MAX]).len(), NPY_HEADER);
        let mut f = NpyFile::create(dir.path().join("b.npy"), "<f4").unwrap();
        f.write(&[0u8; 4 * 6]).unwrap();
        let p2 = f.finish(&[2, 3]).unwrap();
        let h = solidgraph_store::import::npy::read_header(&p2).unwrap();
        assert_eq!((h.descr.as_str(), h.shape.as_slice(), h.data_offset), ("<f4", &[2u64, 3][..], NPY_HEADER as u64));
        // Fewer rows than the header declares: refused by the reader, not misread.
        let mut f = NpyFile::create(dir.path().join("a.npy"), "<f4").unwrap();
        f.write(&[0u8; 4 * 6]).unwrap();
        let p = f.finish(&[3, 3]).unwrap();
        assert!(solidgraph_store::import::npy::read_header(&p).is_err());
    }
}
