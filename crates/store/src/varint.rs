//! LEB128 varints, and the decoder of a list's gaps.
//!
//! A whole-graph pass decodes every edge it reads, a few bytes each, and one
//! varint per load makes the decode most of a pass's CPU time. Where
//! SSSE3 and SSE4.1 are present (checked at run time), `push_gaps` decodes
//! up to four gaps per 16-byte load, as Masked VByte (Plaisance, Kurz and
//! Lemire, 2015) does for the same bytes: the load's continuation bits index
//! a table that says how many varints of up to four bytes lie in its first
//! 12 bytes and how to shuffle them into 32-bit lanes; a subtract and a
//! multiply-add join their 7-bit groups and a prefix sum turns gaps into
//! ids. Gaps of five bytes or more (ids past 2^28) and the last few gaps of
//! a list are decoded one at a time.

/// Bytes of `x` as a varint.
pub fn len(x: u64) -> usize {
    (64 - (x | 1).leading_zeros() as usize).div_ceil(7)
}

/// Writes `x` at the start of `out`; returns its length.
pub fn put(out: &mut [u8], mut x: u64) -> usize {
    let mut i = 0;
    while x >= 0x80 {
        out[i] = x as u8 | 0x80;
        x >>= 7;
        i += 1;
    }
    out[i] = x as u8;
    i + 1
}

/// Decodes the varint at `*at`; None when it runs past `b` or past 64 bits.
#[inline(always)]
pub fn get(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut x = 0u64;
    let mut shift = 0;
    loop {
        let byte = *b.get(*at)?;
        *at += 1;
        x |= ((byte & 0x7f) as u64) << shift;
        if byte < 0x80 {
            return Some(x);
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

/// Decodes `d` varint gaps from the start of `b` and appends their running
/// sums (the ids of a list) to `out`. The gaps must lie in `b[..limit]`;
/// the bytes after `limit` are only read ahead. Returns the bytes the gaps
/// take, or None when they are malformed, run past `limit` or sum past
/// 2^64: a sum that wrapped would leave the list unsorted, and readers
/// check a sorted list's ids against the vertex count by its last.
pub fn push_gaps(b: &[u8], limit: usize, d: usize, out: &mut Vec<u64>) -> Option<usize> {
    push_gaps_from(b, limit, d, 0, out)
}

/// `push_gaps` for gaps that continue a list whose last id so far is `x`
/// (a decode that starts at a checkpoint).
pub fn push_gaps_from(b: &[u8], limit: usize, d: usize, mut x: u64, out: &mut Vec<u64>) -> Option<usize> {
    let mut at = 0;
    let base = out.len();
    out.reserve(d);
    #[cfg(target_arch = "x86_64")]
    if d >= 4 && std::is_x86_feature_detected!("ssse3") && std::is_x86_feature_detected!("sse4.1") {
        // SAFETY: the features it is compiled for were detected just above.
        unsafe { simd::push_gaps(b, d, out, &mut at, &mut x)? };
    }
    for _ in out.len() - base..d {
        x = x.checked_add(get(b, &mut at)?)?;
        out.push(x);
    }
    (at <= limit).then_some(at)
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;

    /// Per 12-bit key (continuation bits of a load's first 12 bytes): the
    /// lengths of the leading varints of up to four bytes that end in those
    /// bytes, 2 bits each minus one (bits 0-7), their count minus one (bits
    /// 8-9) and their total bytes (bits 10-13); 0 when the first one is
    /// longer than four bytes.
    static TABLE: [u16; 4096] = table();

    const fn table() -> [u16; 4096] {
        let mut t = [0u16; 4096];
        let mut key = 0;
        while key < 4096 {
            let (mut start, mut count, mut code) = (0, 0, 0);
            while count < 4 {
                let mut end = start;
                while end < 12 && (key >> end) & 1 == 1 {
                    end += 1;
                }
                if end == 12 || end - start >= 4 {
                    break;
                }
                code |= (end - start) << (2 * count);
                count += 1;
                start = end + 1;
            }
            if count > 0 {
                t[key] = (code | (count - 1) << 8 | start << 10) as u16;
            }
            key += 1;
        }
        t
    }

    #[repr(align(16))]
    struct Rows([[u8; 16]; 256]);

    /// Per length code (bits 0-7 of a table entry): the shuffle moving each
    /// varint's bytes to the low bytes of its 32-bit lane, zeros above.
    static SHUFFLE: Rows = shuffles();

    const fn shuffles() -> Rows {
        let mut s = [[0x80u8; 16]; 256];
        let mut code = 0;
        while code < 256 {
            let mut start = 0;
            let mut lane = 0;
            while lane < 4 {
                let len = (code >> (2 * lane)) & 3;
                let mut i = 0;
                while i <= len {
                    s[code][4 * lane + i] = (start + i) as u8;
                    i += 1;
                }
                start += len + 1;
                lane += 1;
            }
            code += 1;
        }
        Rows(s)
    }

    /// Decodes from `b[*at..]` while four or more of the `d` gaps remain and
    /// 16 bytes can be loaded; `out` holds the ids decoded so far (`*x` the
    /// last). Leaves the rest to the caller. None: a malformed varint.
    #[target_feature(enable = "ssse3,sse4.1")]
    pub(super) fn push_gaps(b: &[u8], d: usize, out: &mut Vec<u64>, at: &mut usize, x: &mut u64) -> Option<()> {
        let base = out.len();
        let mut k = 0;
        // b0 + 2^7 b1 in each 16-bit half, then lo + 2^14 hi per lane.
        let high = _mm_set1_epi16(0x7f80);
        let join = _mm_set1_epi32(1 | (1 << 14) << 16);
        let (lane, seven) = (_mm_setr_epi32(0, 1, 2, 3), _mm_set1_epi8(0x7f));
        while k + 4 <= d && *at + 16 <= b.len() {
            let bytes: &[u8; 16] = b[*at..*at + 16].try_into().expect("16 bytes");
            // SAFETY: reads the 16 bytes just borrowed (unaligned load).
            let v = unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) };
            let e = TABLE[(_mm_movemask_epi8(v) & 0xfff) as usize] as usize;
            if e == 0 {
                *x = x.checked_add(super::get(b, at)?)?;
                out.push(*x);
                k += 1;
                continue;
            }
            let count = (e >> 8 & 3) + 1;
            // SAFETY: the table's rows are 16 bytes, aligned.
            let shuffle = unsafe { _mm_load_si128(SHUFFLE.0[e & 0xff].as_ptr().cast()) };
            // The 7-bit groups of the lanes below `count`; the others 0.
            let keep = _mm_and_si128(_mm_cmpgt_epi32(_mm_set1_epi32(count as i32), lane), seven);
            let s = _mm_and_si128(_mm_shuffle_epi8(v, shuffle), keep);
            let s = _mm_sub_epi16(s, _mm_and_si128(_mm_srli_epi16::<1>(s), high));
            let g = _mm_madd_epi16(s, join);
            // Lanes past `count` are 0, so the last sum is all of them.
            let g = _mm_add_epi32(g, _mm_slli_si128::<4>(g));
            let g = _mm_add_epi32(g, _mm_slli_si128::<8>(g));
            let xv = _mm_set1_epi64x(*x as i64);
            let ids = [_mm_add_epi64(xv, _mm_cvtepu32_epi64(g)), _mm_add_epi64(xv, _mm_cvtepu32_epi64(_mm_srli_si128::<8>(g)))];
            // Four ids go out, of which `count` are kept; d - k >= 4 makes
            // room for all four.
            let spare = &mut out.spare_capacity_mut()[..4];
            // SAFETY: `spare` is 4 u64s, the size of `ids`.
            unsafe { std::ptr::copy_nonoverlapping(ids.as_ptr().cast::<u8>(), spare.as_mut_ptr().cast::<u8>(), 32) };
            // SAFETY: the first `count` of the four were written just above.
            unsafe { out.set_len(out.len() + count) };
            // The four sums are ascending, so if any id of the group wrapped
            // past 2^64 the last did, and it is then below the one before.
            let last = x.wrapping_add(_mm_extract_epi32::<3>(g) as u32 as u64);
            if last < *x {
                return None;
            }
            *x = last;
            k += count;
            *at += e >> 10;
        }
        debug_assert_eq!(out.len(), base + k);
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gaps(gs: &[u64]) -> Vec<u8> {
        let mut b = vec![0u8; 10 * gs.len() + 16];
        let mut at = 0;
        for &g in gs {
            at += put(&mut b[at..], g);
        }
        b.truncate(at);
        b
    }

    /// Gaps whose sum passes 2^64 are malformed, whether the wrap comes in
    /// a four-gap group of small gaps (the SIMD path) or in a long gap
    /// (one at a time): a wrapped sum would make the list unsorted, and
    /// only its last id is checked against the vertex count.
    #[test]
    fn gaps_that_sum_past_2_64_are_malformed() {
        let near = u64::MAX - 10;
        for (start, gs) in
            [(near, vec![1u64, 2, 3, 9, 1, 1, 1, 1]), (0, vec![u64::MAX - 3, 2, 2, 2, 2, 2, 2, 2]), (near, vec![20, 1, 1, 1]), (0, vec![1u64 << 63, 1 << 63])]
        {
            let b = gaps(&gs);
            let mut padded = b.clone();
            padded.resize(b.len() + 16, 0);
            assert_eq!(push_gaps_from(&padded, b.len(), gs.len(), start, &mut Vec::new()), None, "{start} + {gs:?}");
        }
        // The same gaps up to 2^64 - 1 decode.
        let gs = [1u64, 2, 3, 4, 0, 0, 0, 0];
        let b = gaps(&gs);
        let mut padded = b.clone();
        padded.resize(b.len() + 16, 0);
        let mut out = Vec::new();
        assert_eq!(push_gaps_from(&padded, b.len(), gs.len(), u64::MAX - 10, &mut out), Some(b.len()));
        assert_eq!(out.last(), Some(&(u64::MAX - 10 + 10)));
    }
}
