//! Arrays across the wire: request arrays (`proto::Array`, raw
//! little-endian bytes with a dtype and shape) checked and decoded, and
//! results packed into `Arrays` messages of chunks that slice the result
//! buffers without copying them.

use bytes::Bytes;
use solidgraph_store::Rows;
use tonic::Status;

use crate::proto::{Array, ArrayChunk, Arrays};

fn need<'a>(a: Option<&'a Array>, what: &str) -> Result<&'a Array, Status> {
    a.ok_or_else(|| Status::invalid_argument(format!("{what} is missing")))
}

/// A 1-d array of `dtype` with `size`-byte elements: its element count.
fn vector(a: &Array, what: &str, dtype: &str, size: usize) -> Result<usize, Status> {
    if a.dtype != dtype {
        return Err(Status::invalid_argument(format!("{what} must be {dtype}, not {:?}", a.dtype)));
    }
    let [n] = a.shape[..] else {
        return Err(Status::invalid_argument(format!("{what} must be 1-dimensional, not of shape {:?}", a.shape)));
    };
    let n = usize::try_from(n).map_err(|_| Status::invalid_argument(format!("{what}: length {n} is too large")))?;
    if n.checked_mul(size) != Some(a.data.len()) {
        return Err(Status::invalid_argument(format!("{what}: {} bytes do not hold {n} {dtype} values", a.data.len())));
    }
    Ok(n)
}

/// Vertex ids (int64, non-negative), at most `limit` of them.
pub fn ids(a: Option<&Array>, what: &str, limit: usize) -> Result<Vec<u64>, Status> {
    let a = need(a, what)?;
    let n = vector(a, what, "int64", 8)?;
    if n > limit {
        return Err(Status::resource_exhausted(format!("{what}: {n} ids exceed the server's limit of {limit} per request")));
    }
    let mut out = Vec::with_capacity(n);
    for c in a.data.chunks_exact(8) {
        let v = i64::from_le_bytes(c.try_into().expect("8 bytes"));
        let v = u64::try_from(v).map_err(|_| Status::invalid_argument(format!("{what}: {v} is not a vertex id (ids are >= 0)")))?;
        out.push(v);
    }
    Ok(out)
}

/// `n` float32 values.
pub fn f32s(a: Option<&Array>, what: &str, n: usize) -> Result<Vec<f32>, Status> {
    let a = need(a, what)?;
    let m = vector(a, what, "float32", 4)?;
    if m != n {
        return Err(Status::invalid_argument(format!("{what}: {m} values for {n} edges")));
    }
    Ok(a.data.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect())
}

/// `n` uint32 values.
pub fn u32s(a: Option<&Array>, what: &str, n: usize) -> Result<Vec<u32>, Status> {
    let a = need(a, what)?;
    let m = vector(a, what, "uint32", 4)?;
    if m != n {
        return Err(Status::invalid_argument(format!("{what}: {m} values for {n} edges")));
    }
    Ok(a.data.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))).collect())
}

/// `n` rows of a tensor of `dtype` (`size`-byte elements) and `dim`: shape
/// (n, dim), or (n,) when dim is 1. Returns the row bytes.
pub fn rows(a: Option<&Array>, what: &str, dtype: &str, size: usize, dim: u64, n: u64) -> Result<Bytes, Status> {
    let a = need(a, what)?;
    if a.dtype != dtype {
        return Err(Status::invalid_argument(format!("{what} must be {dtype} (the tensor's dtype), not {:?}", a.dtype)));
    }
    let ok = a.shape == [n, dim] || (dim == 1 && a.shape == [n]);
    if !ok {
        return Err(Status::invalid_argument(format!("{what} must be of shape ({n}, {dim}), not {:?}", a.shape)));
    }
    let bytes = n.checked_mul(dim).and_then(|e| e.checked_mul(size as u64));
    if bytes != Some(a.data.len() as u64) {
        return Err(Status::invalid_argument(format!("{what}: {} bytes do not hold {n} x {dim} {dtype} values", a.data.len())));
    }
    Ok(a.data.clone())
}

/// Words whose bytes are their little-endian encoding: the server runs on
/// little-endian hosts only (asserted here at compile time).
struct LeWords(Vec<u64>);

const _: () = assert!(cfg!(target_endian = "little"), "replies hand u64 words to the wire as their bytes");

impl AsRef<[u8]> for LeWords {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: any bytes are valid u8 and u8 needs no alignment; the
        // slice covers exactly the vector's initialized words.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().cast::<u8>(), self.0.len() * 8) }
    }
}

/// The shape of `n` rows of a tensor of `dim`: (n, dim), or (n,) when dim
/// is 1.
pub fn rows_shape(dim: u64, n: usize) -> Vec<u64> {
    if dim == 1 { vec![n as u64] } else { vec![n as u64, dim] }
}

/// A result: named arrays, sent as `Arrays` messages.
#[derive(Default, Clone)]
pub struct Out {
    arrays: Vec<(String, &'static str, Vec<u64>, Bytes)>,
}

impl Out {
    pub fn push(&mut self, name: impl Into<String>, dtype: &'static str, shape: Vec<u64>, data: Bytes) {
        let name = name.into();
        assert!(!name.is_empty(), "a chunk without a name is padding");
        let elems: u64 = shape.iter().product();
        assert!((data.len() as u64).is_multiple_of(elems.max(1)), "{} bytes for shape {shape:?}", data.len());
        self.arrays.push((name, dtype, shape, data));
    }

    pub fn int64(&mut self, name: &str, v: &[u64]) {
        let mut b = Vec::with_capacity(v.len() * 8);
        for x in v {
            b.extend_from_slice(&x.to_le_bytes());
        }
        self.push(name, "int64", vec![v.len() as u64], b.into());
    }

    /// As `int64`, handing the words to the reply without copying them.
    pub fn int64_owned(&mut self, name: &str, v: Vec<u64>) {
        let n = v.len() as u64;
        self.push(name, "int64", vec![n], Bytes::from_owner(LeWords(v)));
    }

    pub fn int64_signed(&mut self, name: &str, v: &[i64]) {
        let b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        self.push(name, "int64", vec![v.len() as u64], b.into());
    }

    pub fn float64(&mut self, name: &str, v: &[f64]) {
        let b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        self.push(name, "float64", vec![v.len() as u64], b.into());
    }

    pub fn bools(&mut self, name: &str, v: &[bool]) {
        let b: Vec<u8> = v.iter().map(|&x| x as u8).collect();
        self.push(name, "bool", vec![v.len() as u64], b.into());
    }

    pub fn int64_2d(&mut self, name: &str, v: &[u64], cols: u64) {
        self.int64(name, v);
        let last = self.arrays.last_mut().expect("just pushed");
        last.2 = vec![v.len() as u64 / cols.max(1), cols];
    }

    pub fn float32(&mut self, name: &str, v: &[f32]) {
        let mut b = Vec::with_capacity(v.len() * 4);
        for x in v {
            b.extend_from_slice(&x.to_le_bytes());
        }
        self.push(name, "float32", vec![v.len() as u64], b.into());
    }

    pub fn uint32(&mut self, name: &str, v: &[u32]) {
        let mut b = Vec::with_capacity(v.len() * 4);
        for x in v {
            b.extend_from_slice(&x.to_le_bytes());
        }
        self.push(name, "uint32", vec![v.len() as u64], b.into());
    }

    /// Tensor rows for `n` vertices (`rows_shape`).
    pub fn rows(&mut self, name: &str, r: Rows, n: usize) {
        self.push(name, r.dtype.name(), rows_shape(r.dim, n), Bytes::from(r.data));
    }

    /// The arrays: (name, dtype, shape, data).
    pub fn arrays(&self) -> impl Iterator<Item = &(String, &'static str, Vec<u64>, Bytes)> {
        self.arrays.iter()
    }

    pub fn into_arrays(self) -> Vec<(String, &'static str, Vec<u64>, Bytes)> {
        self.arrays
    }

    pub fn bytes(&self) -> u64 {
        self.arrays.iter().map(|a| a.3.len() as u64).sum()
    }

    /// The messages: chunks of at most `chunk` bytes, packed in order into
    /// messages of about `chunk` bytes. An empty array still sends one
    /// chunk, which carries its dtype and shape. Every chunk's data starts
    /// at a multiple of `ALIGN` bytes into its encoded message (a padding
    /// chunk goes before it when needed), so a client can use the data in
    /// place as an array of its dtype.
    pub fn into_messages(self, chunk: usize) -> Vec<Arrays> {
        assert!(chunk > 0);
        let mut msgs = Vec::new();
        let mut cur = Arrays::default();
        let mut cur_bytes = 0;
        // Encoded bytes of `cur` so far.
        let mut pos = 0;
        for (name, dtype, shape, data) in self.arrays {
            let mut off = 0;
            loop {
                let take = (data.len() - off).min(chunk - cur_bytes);
                let c = ArrayChunk {
                    name: name.clone(),
                    dtype: dtype.into(),
                    shape: shape.clone(),
                    offset: off as u64,
                    data: data.slice(off..off + take),
                    shm: None,
                };
                if take > 0
                    && let Some(pad) = padding(pos, &c)
                {
                    pos += field_len(&pad);
                    cur.chunks.push(pad);
                }
                debug_assert!(take == 0 || (pos + field_len(&c) - take).is_multiple_of(ALIGN));
                pos += field_len(&c);
                cur.chunks.push(c);
                off += take;
                cur_bytes += take;
                if cur_bytes >= chunk {
                    msgs.push(std::mem::take(&mut cur));
                    (cur_bytes, pos) = (0, 0);
                }
                if off == data.len() {
                    break;
                }
            }
        }
        if !cur.chunks.is_empty() || msgs.is_empty() {
            msgs.push(cur);
        }
        msgs
    }
}

/// Alignment of every chunk's data within its message: enough for any
/// dtype (at most 8-byte elements).
pub const ALIGN: usize = 8;

/// Bytes a chunk takes in its `Arrays` message: tag, length, body.
fn field_len(c: &ArrayChunk) -> usize {
    let body = prost::Message::encoded_len(c);
    1 + prost::encoding::encoded_len_varint(body as u64) + body
}

/// The padding chunk (no name, `p` zero bytes of data) that moves `c`'s
/// data, written at `pos`, to a multiple of `ALIGN`; None if it is there.
/// Its data is the chunk's last field, so it starts `c.data.len()` before
/// the chunk's end. A padding chunk takes 2 bytes (no data) or 4 + p
/// (p of 1..=8 bytes), so one reaches every remainder.
fn padding(pos: usize, c: &ArrayChunk) -> Option<ArrayChunk> {
    static ZEROS: [u8; 16] = [0; 16];
    let start = pos + field_len(c) - c.data.len();
    let need = (ALIGN - start % ALIGN) % ALIGN;
    if need == 0 {
        return None;
    }
    let total = if matches!(need, 2 | 5 | 6 | 7) { need } else { need + ALIGN };
    let p = if total == 2 { 0 } else { total - 4 };
    let pad = ArrayChunk { data: Bytes::from_static(&ZEROS[..p]), ..Default::default() };
    assert_eq!(field_len(&pad), total, "padding of {p} bytes");
    Some(pad)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arr(dtype: &str, shape: Vec<u64>, data: Vec<u8>) -> Array {
        Array { dtype: dtype.into(), shape, data: data.into() }
    }

    #[test]
    fn ids_are_checked() {
        let ok = arr("int64", vec![2], [3i64, 5].iter().flat_map(|x| x.to_le_bytes()).collect());
        assert_eq!(ids(Some(&ok), "ids", 10).unwrap(), vec![3, 5]);
        assert_eq!(ids(Some(&ok), "ids", 1).unwrap_err().code(), tonic::Code::ResourceExhausted);
        let neg = arr("int64", vec![1], (-1i64).to_le_bytes().to_vec());
        assert_eq!(ids(Some(&neg), "ids", 10).unwrap_err().code(), tonic::Code::InvalidArgument);
        let short = arr("int64", vec![2], vec![0; 12]);
        assert!(ids(Some(&short), "ids", 10).unwrap_err().message().contains("12 bytes"));
        let wrong = arr("int32", vec![1], vec![0; 4]);
        assert_eq!(ids(Some(&wrong), "ids", 10).unwrap_err().code(), tonic::Code::InvalidArgument);
        assert_eq!(ids(None, "ids", 10).unwrap_err().code(), tonic::Code::InvalidArgument);
    }

    fn varint(b: &[u8], i: &mut usize) -> u64 {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let x = b[*i];
            *i += 1;
            v |= u64::from(x & 0x7f) << shift;
            if x < 0x80 {
                return v;
            }
            shift += 7;
        }
    }

    /// (offset, length) of every named chunk's non-empty data field in an
    /// encoded `Arrays` message, read from the wire bytes (padding chunks
    /// have no name).
    fn data_fields(b: &[u8]) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            assert_eq!(varint(b, &mut i), (1 << 3) | 2);
            let end = varint(b, &mut i) as usize + i;
            let mut named = false;
            while i < end {
                let key = varint(b, &mut i);
                match key & 7 {
                    0 => {
                        varint(b, &mut i);
                    }
                    2 => {
                        let n = varint(b, &mut i) as usize;
                        named |= key >> 3 == 1 && n > 0;
                        if key >> 3 == 5 && n > 0 && named {
                            out.push((i, n));
                        }
                        i += n;
                    }
                    w => panic!("wire type {w}"),
                }
            }
        }
        out
    }

    #[test]
    fn padding_reaches_every_remainder() {
        for pos in 0..64 {
            for name in ["", "a", "tensor/x", "a-longer-name-of-an-array"] {
                for len in [1usize, 3, 200, 70_000] {
                    let c =
                        ArrayChunk { name: name.into(), dtype: "float32".into(), shape: vec![len as u64], offset: 9, data: vec![1u8; len].into(), shm: None };
                    let pad = padding(pos, &c).map_or(0, |p| field_len(&p));
                    assert_eq!((pos + pad + field_len(&c) - len) % ALIGN, 0);
                }
            }
        }
    }

    #[test]
    fn chunks_cover_every_byte_once() {
        let mut o = Out::default();
        let a: Vec<u64> = (0..1000).collect();
        o.int64("a", &a);
        o.int64("empty", &[]);
        o.float32("b", &[1.0; 77]);
        for chunk in [1, 7, 64, 8000, 1 << 20] {
            let mut o2 = Out::default();
            o2.int64("a", &a);
            o2.int64("empty", &[]);
            o2.float32("b", &[1.0; 77]);
            let msgs = o2.into_messages(chunk);
            let mut got: std::collections::BTreeMap<String, Vec<u8>> = Default::default();
            for m in &msgs {
                let size: usize = m.chunks.iter().map(|c| c.data.len()).sum();
                assert!(size <= chunk.max(1) + 16);
                for c in m.chunks.iter().filter(|c| !c.name.is_empty()) {
                    let v = got.entry(c.name.clone()).or_default();
                    assert_eq!(v.len() as u64, c.offset);
                    v.extend_from_slice(&c.data);
                }
                for (start, len) in data_fields(&prost::Message::encode_to_vec(m)) {
                    assert_eq!(start % ALIGN, 0, "data of {len} bytes at {start}");
                }
            }
            assert_eq!(got["a"].len(), 8000);
            assert_eq!(got["empty"].len(), 0);
            assert_eq!(got["b"].len(), 308);
        }
        assert_eq!(o.bytes(), 8308);
    }
}
