//! The header every page carries, and its checksum.
//!
//! ```text
//! 0..4    crc32c of (page number, little-endian u64) ++ bytes 4..page_size
//! 4       kind
//! 5       flags (reserved, 0)
//! 6..8    reserved, 0
//! 8..16   epoch (the superblock epoch that wrote the page)
//! 16..24  key: first vertex (adjacency), owner vertex (extent), 0 otherwise
//! 24..28  count: directory entries (packed), edges in this page (extent),
//!         entries (GTT)
//! 28..32  aux: end of list data (packed), index within the extent (extent)
//! ```
//!
//! Folding the page number into the checksum catches a page written to, or
//! read from, the wrong place, not only flipped bits.

use crate::error::{Result, StoreError};

pub const HEADER: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Superblock = 1,
    Gtt = 2,
    Packed = 3,
    Extent = 4,
    Tensor = 5,
    Presence = 6,
    /// A table of u64 words (tensor page map, tombstones): `count` words,
    /// `aux` = page index within the table.
    Table = 7,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Superblock,
            2 => Kind::Gtt,
            3 => Kind::Packed,
            4 => Kind::Extent,
            5 => Kind::Tensor,
            6 => Kind::Presence,
            7 => Kind::Table,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    pub epoch: u64,
    pub key: u64,
    pub count: u32,
    pub aux: u32,
}

/// The checksum page `page_no` holding `page` carries (public so that
/// fuzz targets can seal pages of arbitrary bytes).
pub fn checksum(page_no: u64, page: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&page_no.to_le_bytes()), &page[4..])
}

/// Writes the header into `page[..HEADER]` and seals the page with its
/// checksum. The body must already be in place.
pub fn seal(page_no: u64, page: &mut [u8], h: &Header) {
    page[4] = h.kind as u8;
    page[5] = 0;
    page[6..8].fill(0);
    page[8..16].copy_from_slice(&h.epoch.to_le_bytes());
    page[16..24].copy_from_slice(&h.key.to_le_bytes());
    page[24..28].copy_from_slice(&h.count.to_le_bytes());
    page[28..32].copy_from_slice(&h.aux.to_le_bytes());
    let crc = checksum(page_no, page);
    page[0..4].copy_from_slice(&crc.to_le_bytes());
}

/// Checks the checksum and decodes the header; names the page on failure.
pub fn open(page_no: u64, page: &[u8]) -> Result<Header> {
    let stored = u32::from_le_bytes(page[0..4].try_into().expect("4 bytes"));
    let crc = checksum(page_no, page);
    if stored != crc {
        return Err(StoreError::Corrupt { page: page_no, reason: format!("checksum mismatch (stored {stored:08x}, computed {crc:08x})") });
    }
    decode(page_no, page)
}

fn decode(page_no: u64, page: &[u8]) -> Result<Header> {
    let kind = Kind::from_u8(page[4]).ok_or_else(|| StoreError::Corrupt { page: page_no, reason: format!("unknown page kind {}", page[4]) })?;
    // A packed page's directory and data must fit in it: decoders index
    // the page by these.
    let (count, aux) =
        (u32::from_le_bytes(page[24..28].try_into().expect("4 bytes")) as usize, u32::from_le_bytes(page[28..32].try_into().expect("4 bytes")) as usize);
    if kind == Kind::Packed && (count > (page.len() - HEADER) / 8 || aux > page.len() - 8 * count) {
        return Err(StoreError::Corrupt { page: page_no, reason: format!("packed page with {count} entries and {aux} bytes of data does not fit") });
    }
    Ok(Header {
        kind,
        epoch: u64::from_le_bytes(page[8..16].try_into().expect("8 bytes")),
        key: u64::from_le_bytes(page[16..24].try_into().expect("8 bytes")),
        count: u32::from_le_bytes(page[24..28].try_into().expect("4 bytes")),
        aux: u32::from_le_bytes(page[28..32].try_into().expect("4 bytes")),
    })
}

/// Like [`open`], and also requires the page to be of `kind`.
pub fn open_kind(page_no: u64, page: &[u8], kind: Kind) -> Result<Header> {
    open(page_no, page)?;
    open_kind_trusted(page_no, page, kind)
}

/// Decodes the header of a page whose checksum was verified when it was
/// read (pages in the cache), checking only its kind.
pub fn open_kind_trusted(page_no: u64, page: &[u8], kind: Kind) -> Result<Header> {
    let h = decode(page_no, page)?;
    if h.kind != kind {
        return Err(StoreError::Corrupt { page: page_no, reason: format!("expected a {kind:?} page, found {:?}", h.kind) });
    }
    Ok(h)
}

/// Pages a table of `words` u64 words needs.
pub fn table_pages(words: usize, page_size: usize) -> u64 {
    words.div_ceil(table_words_per_page(page_size)) as u64
}

/// Seals `words` into consecutive Table pages numbered from `first_page`.
pub fn encode_table(words: &[u64], page_size: usize, first_page: u64, epoch: u64, out: &mut [u8]) {
    let per = table_words_per_page(page_size);
    for (p, chunk) in words.chunks(per).enumerate() {
        encode_table_page(chunk, first_page + p as u64, p as u64, epoch, &mut out[p * page_size..(p + 1) * page_size]);
    }
}

/// Words a Table page holds.
pub fn table_words_per_page(page_size: usize) -> usize {
    (page_size - HEADER) / 8
}

/// Seals page `index` of a Table (page number `page_no`) holding `words`,
/// at most `table_words_per_page` of them.
pub fn encode_table_page(words: &[u64], page_no: u64, index: u64, epoch: u64, page: &mut [u8]) {
    assert!(words.len() <= table_words_per_page(page.len()), "{} words for one table page", words.len());
    page.fill(0);
    for (j, w) in words.iter().enumerate() {
        page[HEADER + 8 * j..HEADER + 8 * j + 8].copy_from_slice(&w.to_le_bytes());
    }
    let aux = u32::try_from(index).expect("a table of fewer than 2^32 pages");
    seal(page_no, page, &Header { kind: Kind::Table, epoch, key: 0, count: words.len() as u32, aux });
}

/// Appends the words of Table page `index` (checksum and kind checked here).
pub fn decode_table(page_no: u64, page: &[u8], index: u64, out: &mut Vec<u64>) -> Result<()> {
    let h = open_kind(page_no, page, Kind::Table)?;
    let n = h.count as usize;
    if n > (page.len() - HEADER) / 8 || h.aux as u64 != index {
        return Err(StoreError::Corrupt { page: page_no, reason: "table page out of place".into() });
    }
    out.extend((0..n).map(|j| u64_at(page, HEADER + 8 * j)));
    Ok(())
}

pub(crate) fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}

pub(crate) fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_open_roundtrip_and_every_flip_is_caught() {
        let mut p = vec![0u8; 4096];
        for (i, b) in p.iter_mut().enumerate().skip(HEADER) {
            *b = (i * 31) as u8;
        }
        let h = Header { kind: Kind::Packed, epoch: 7, key: 1 << 40, count: 3, aux: 999 };
        seal(12, &mut p, &h);
        assert_eq!(open(12, &p).unwrap(), h);
        assert!(open(13, &p).is_err(), "misplaced page must fail");
        for byte in (0..4096).step_by(7) {
            let mut q = p.clone();
            q[byte] ^= 0x10;
            assert!(open(12, &q).is_err(), "flip at {byte} not caught");
        }
    }
}
