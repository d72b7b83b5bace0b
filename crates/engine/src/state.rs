//! Vertex state arrays: one value per vertex, read at random by every
//! algorithm (a neighbor's level, root, rank or core value per list entry).
//! At scale 24 one array spans 64-128 MiB, 16-32K small pages: past the
//! TLB's reach, so every random read also walks the page table. The arrays
//! ask for transparent huge pages (2 MiB, 64 of them cover such an array),
//! which this kernel gives only on request (`madvise` mode).

/// `n` copies of `x`.
pub fn filled<T: Clone>(n: usize, x: T) -> Vec<T> {
    let mut v = Vec::with_capacity(n);
    advise_huge(&v);
    v.resize(n, x);
    v
}

/// `f(0), f(1), ..., f(n - 1)`.
pub fn from_fn<T>(n: usize, f: impl FnMut(usize) -> T) -> Vec<T> {
    let mut v = Vec::with_capacity(n);
    advise_huge(&v);
    v.extend((0..n).map(f));
    v
}

/// Before the pages are touched: the kernel backs them as they fault in.
fn advise_huge<T>(v: &Vec<T>) {
    const HUGE: usize = 2 << 20;
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
