//! Free space of a writable store. Merges write copy-on-write: new pages go
//! to free pages (lowest first, so the store stays compact) or past the end,
//! never over a page the current superblock names. Pages a merge replaces
//! are retired with the base that still names them and become free once no
//! reader holds that base (a snapshot, or a read in flight).
//!
//! Nothing here is persisted: at open, every page the superblock does not
//! name is free.

use std::collections::BTreeSet;
use std::sync::{Arc, Weak};

use crate::base::Base;

pub(crate) struct Space {
    free: BTreeSet<u64>,
    /// First page past everything in use (the superblock's total_pages).
    end: u64,
    retired: Vec<(Weak<Base>, Vec<u64>)>,
}

/// Every page a base names, in no particular order.
pub(crate) fn pages_in_use(base: &Base) -> Vec<u64> {
    let sb = &base.sb;
    let mut used = vec![0, 1];
    for (meta, gtt) in [(Some(sb.out), Some(&base.out)), (sb.inn, base.inn.as_ref()), (sb.lower.map(|l| l.dir), base.lower.as_ref())] {
        if let (Some(m), Some(g)) = (meta, gtt) {
            push_range(&mut used, m.gtt_start, m.gtt_pages.saturating_add(m.bitmap_pages), sb.total_pages);
            used.extend((0..g.len()).map(|i| g.page(i)));
        }
    }
    for (ti, t) in sb.tensors.iter().enumerate() {
        used.extend((0..t.pages).filter_map(|k| base.tensor_page(ti, k)));
    }
    // Pages past the import's region exist only in the map.
    used.extend(base.tensor_map.iter().filter(|((ti, k), _)| *k >= sb.tensors[*ti as usize].pages).map(|(_, &p)| p));
    for t in [sb.tensor_map, sb.tombstones, sb.hot, sb.order, sb.lower.map_or_else(Default::default, |l| l.degrees)] {
        push_range(&mut used, t.start, t.pages, sb.total_pages);
    }
    used
}

/// Pages `start..start + pages`. A region reaching past the store's
/// `total` pages (damage) adds only one page at or past the end, which
/// verify reports, never a count sized by damaged bytes.
fn push_range(used: &mut Vec<u64>, start: u64, pages: u64, total: u64) {
    match start.checked_add(pages) {
        _ if pages == 0 => {}
        Some(end) if end <= total => used.extend(start..end),
        _ => used.push(start.max(total)),
    }
}

impl Space {
    pub fn new(base: &Base) -> Space {
        let end = base.sb.total_pages;
        let mut in_use = vec![false; end as usize];
        for p in pages_in_use(base) {
            if let Some(x) = in_use.get_mut(p as usize) {
                *x = true;
            }
        }
        let free = (0..end).filter(|&p| !in_use[p as usize]).collect();
        Space { free, end, retired: Vec::new() }
    }

    pub fn end(&self) -> u64 {
        self.end
    }

    pub fn free_pages(&self) -> u64 {
        self.free.len() as u64
    }

    /// Frees the pages of retired bases no reader holds any more; returns
    /// them (the caller drops them from the page cache).
    pub fn reclaim(&mut self) -> Vec<u64> {
        let mut freed = Vec::new();
        self.retired.retain_mut(|(base, pages)| {
            if base.strong_count() > 0 {
                return true;
            }
            freed.append(pages);
            false
        });
        self.free.extend(freed.iter().copied());
        freed
    }

    /// One page for a copy-on-write write.
    pub fn page(&mut self) -> u64 {
        match self.free.pop_first() {
            Some(p) => p,
            None => {
                self.end += 1;
                self.end - 1
            }
        }
    }

    /// `n` consecutive pages (translation tables, bitmaps and tables are
    /// read as runs): taken past the end.
    pub fn run(&mut self, n: u64) -> u64 {
        let first = self.end;
        self.end += n;
        first
    }

    /// Pages `old` names that the next base does not; free once `old` is
    /// dropped by every reader.
    pub fn retire(&mut self, old: &Arc<Base>, pages: Vec<u64>) {
        self.retired.push((Arc::downgrade(old), pages));
    }

    /// After a failed merge: everything `base` does not name is free again,
    /// except pages retired bases may still be read through.
    pub fn reset(&mut self, base: &Base) {
        let retired = std::mem::take(&mut self.retired);
        *self = Space::new(base);
        for (_, pages) in &retired {
            for p in pages {
                self.free.remove(p);
            }
        }
        self.retired = retired;
    }
}
