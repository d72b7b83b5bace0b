//! Large in-memory arrays backed by transparent huge pages, which this
//! kernel gives only on request (`madvise` mode).
//!
//! Two kinds of array want them. Vertex state (one value per vertex, read
//! at random: tens to hundreds of MiB, past the TLB's reach in 4 KiB
//! pages). And a batch's gathered rows: tens of MiB, mapped fresh for every
//! batch and unmapped when it is dropped; in 2 MiB pages such a buffer
//! faults 512 times less often than in 4 KiB ones.

const HUGE: usize = 2 << 20;

/// Asks for huge pages over the whole 2 MiB pages inside `v`'s allocation.
/// Call it before the pages are touched: the kernel backs them as they
/// fault in.
pub fn advise_huge<T>(v: &Vec<T>) {
    let bytes = v.capacity() * size_of::<T>();
    let start = (v.as_ptr() as usize).next_multiple_of(HUGE);
    let end = (v.as_ptr() as usize + bytes) / HUGE * HUGE;
    if end > start {
        // SAFETY: the range lies inside the vector's allocation; the
        // advice changes how it is backed, never its contents. A kernel
        // without THP refuses it, which costs only speed.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
}

/// Asks for 4 KiB pages over `v`'s allocation, whatever the kernel's
/// default. Call it before the pages are touched.
pub fn advise_small<T>(v: &Vec<T>) {
    let bytes = v.capacity() * size_of::<T>();
    let start = (v.as_ptr() as usize).next_multiple_of(4096);
    let end = (v.as_ptr() as usize + bytes) / 4096 * 4096;
    if end > start {
        // SAFETY: the range lies inside the vector's allocation; the
        // advice changes how it is backed, never its contents. A kernel
        // without THP refuses it, which is what it asks for.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_NOHUGEPAGE) };
    }
}

/// Maps in, writable, the whole pages of the `bytes` at `addr` without
/// touching them: the kernel zeroes each page as it first maps it, which
/// this moves off the thread that will write there. Best effort: a kernel
/// without MADV_POPULATE_WRITE leaves the pages to fault in when written.
pub fn populate(addr: usize, bytes: usize) {
    let start = addr.next_multiple_of(4096);
    let end = (addr + bytes) / 4096 * 4096;
    if end > start {
        // SAFETY: the caller names memory it owns (reserved capacity); the
        // advice maps pages in and never changes what they hold.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_POPULATE_WRITE) };
    }
}

/// The machine's memory in bytes (0: unknown).
pub fn machine_memory() -> u64 {
    // SAFETY: sysconf only reads system configuration.
    let (pages, page) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    (pages.max(0) as u64).saturating_mul(page.max(0) as u64)
}

/// `n` zero bytes. A large zeroed allocation comes from the kernel already
/// zero and untouched, so the advice still applies when it faults in.
pub fn zeroed(n: usize) -> Vec<u8> {
    let v = vec![0u8; n];
    advise_huge(&v);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_is_zero_at_any_size() {
        for n in [0, 1, 4095, HUGE - 1, 3 * HUGE + 17] {
            let v = zeroed(n);
            assert_eq!(v.len(), n);
            assert!(v.iter().all(|&b| b == 0));
        }
    }
}
