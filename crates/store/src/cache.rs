//! Page cache with a byte budget and SIEVE eviction (Zhang et al., NSDI'24;
//! GraphBolt measured it best for feature reads). Feature rows have a cache
//! of their own (`rowcache.rs`).
//!
//! Once full, it takes a missed page in only when the page missed before
//! (a doorkeeper, `doorkeeper.rs`): a hop's cold list pages, read once, do
//! not push out pages that later batches read again.
//!
//! Pages are `Arc<[u8]>`: a caller holding one pins it, and eviction skips
//! pinned pages. A batch looks up all its pages under one lock, loads every
//! miss in one batch outside the lock, then inserts them under one lock.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;
use solidgraph_io::sync::MutexExt;

use crate::doorkeeper::Doorkeeper;
use crate::error::Result;

pub type PageRef = Arc<[u8]>;

const NIL: u32 = u32::MAX;

/// What an entry costs beyond its bytes: its node, its map slot, the
/// `Arc`'s counts and the allocator's header. Charged against the budget,
/// so the budget bounds memory: a 512-byte feature row costs 600.
const ENTRY_OVERHEAD: usize = size_of::<Node>() + size_of::<(u64, u32)>() + 1 + 2 * size_of::<usize>() + 16;

/// Budget bytes an entry of `len` bytes takes.
pub fn charge(len: usize) -> usize {
    len + ENTRY_OVERHEAD
}

struct Node {
    page: u64,
    data: PageRef,
    visited: bool,
    prev: u32,
    next: u32,
}

/// SIEVE: new pages enter at the head; the hand walks from the tail toward
/// the head, clearing `visited` bits, and evicts the first unvisited page.
struct Sieve {
    /// Page number -> node; Fx hashing: a batch probes it once per page.
    map: FxHashMap<u64, u32>,
    nodes: Vec<Node>,
    free: Vec<u32>,
    head: u32,
    tail: u32,
    hand: u32,
    bytes: usize,
    door: Doorkeeper,
}

impl Sieve {
    fn new(entries: usize) -> Sieve {
        Sieve { map: Default::default(), nodes: Vec::new(), free: Vec::new(), head: NIL, tail: NIL, hand: NIL, bytes: 0, door: Doorkeeper::new(entries) }
    }

    fn unlink(&mut self, i: u32) {
        let (p, n) = (self.nodes[i as usize].prev, self.nodes[i as usize].next);
        if p != NIL {
            self.nodes[p as usize].next = n
        } else {
            self.head = n
        }
        if n != NIL { self.nodes[n as usize].prev = p } else { self.tail = p }
    }

    fn push_head(&mut self, page: u64, data: PageRef) {
        self.bytes += charge(data.len());
        let node = Node { page, data, visited: false, prev: NIL, next: self.head };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        if self.head != NIL {
            self.nodes[self.head as usize].prev = i;
        }
        self.head = i;
        if self.tail == NIL {
            self.tail = i;
        }
        self.map.insert(page, i);
    }

    fn remove(&mut self, page: u64) {
        let Some(i) = self.map.remove(&page) else { return };
        if self.hand == i {
            self.hand = self.nodes[i as usize].prev;
        }
        self.unlink(i);
        self.bytes -= charge(self.nodes[i as usize].data.len());
        self.nodes[i as usize].data = Arc::from(&[][..]);
        self.free.push(i);
    }

    /// Evicts one page; false when every page is visited-and-pinned for two
    /// full sweeps (the budget is then exceeded until pins drop). Adds the
    /// entries the hand visited to `walked`.
    fn evict_one(&mut self, walked: &mut u64) -> bool {
        let mut steps = 2 * self.map.len() + 1;
        let mut h = if self.hand != NIL { self.hand } else { self.tail };
        while h != NIL && steps > 0 {
            steps -= 1;
            *walked += 1;
            let node = &mut self.nodes[h as usize];
            let pinned = Arc::strong_count(&node.data) > 1;
            if node.visited || pinned {
                node.visited = false;
                h = if node.prev != NIL { node.prev } else { self.tail };
                continue;
            }
            let prev = node.prev;
            let page = node.page;
            self.bytes -= charge(node.data.len());
            self.unlink(h);
            self.map.remove(&page);
            // Drop the data now, keep the slot for reuse.
            self.nodes[h as usize].data = Arc::from(&[][..]);
            self.free.push(h);
            self.hand = prev;
            return true;
        }
        self.hand = h;
        false
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Keys asked for that were cached.
    pub hits: u64,
    /// Distinct keys a batch loaded: a page several lists of one batch
    /// share counts once, so hits / (hits + misses) is the share of reads
    /// the cache saved, not of keys asked for.
    pub misses: u64,
    pub evictions: u64,
    /// Entries the eviction hand visited. Each visit past an eviction's
    /// first clears a visited bit that a hit (or, in the row cache, an
    /// announced upcoming row) set, so this stays near `evictions` plus
    /// those; far more means eviction is scanning.
    pub hand_steps: u64,
    /// Charged bytes: data plus `ENTRY_OVERHEAD` per entry.
    pub bytes: u64,
    pub budget: u64,
}

pub struct PageCache {
    budget: usize,
    page_size: usize,
    /// The doorkeeper's, sized for the pages the budget holds and charged
    /// to it.
    door_bytes: usize,
    inner: Mutex<Sieve>,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
    hand_steps: AtomicU64,
}

impl PageCache {
    /// A cache of `budget` bytes for pages of `page_size` bytes.
    pub fn new(budget: usize, page_size: usize) -> PageCache {
        let entries = budget / charge(page_size);
        let door_bytes = if entries == 0 { 0 } else { Doorkeeper::bytes_for(entries) };
        PageCache {
            budget,
            page_size,
            door_bytes,
            inner: Mutex::new(Sieve::new(entries)),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            hand_steps: AtomicU64::new(0),
        }
    }

    /// Bytes the entries may take: the budget less the doorkeeper's.
    fn entry_budget(&self) -> usize {
        self.budget.saturating_sub(self.door_bytes)
    }

    /// Returns the pages in request order. `load` gets the distinct missing
    /// pages, sorted, and returns their (checked) contents in that order.
    pub fn get_many(&self, pages: &[u64], load: impl FnOnce(&[u64]) -> Result<Vec<PageRef>>) -> Result<Vec<PageRef>> {
        let (out, missing) = self.lookup(pages);
        if missing.is_empty() {
            return Ok(out.into_iter().map(|o| o.expect("all hits")).collect());
        }
        let loaded = load(&missing)?;
        debug_assert_eq!(loaded.len(), missing.len());
        self.insert(&missing, |j| loaded[j].clone());
        Ok(pages.iter().zip(out).map(|(p, o)| o.unwrap_or_else(|| loaded[missing.binary_search(p).expect("loaded")].clone())).collect())
    }

    /// The hits among `keys`, in request order, and the distinct missing
    /// keys, sorted.
    fn lookup(&self, keys: &[u64]) -> (Vec<Option<PageRef>>, Vec<u64>) {
        let mut out: Vec<Option<PageRef>> = Vec::with_capacity(keys.len());
        let mut missing: Vec<u64> = Vec::new();
        {
            let mut s = self.inner.locked();
            for &p in keys {
                match s.map.get(&p).copied() {
                    Some(i) => {
                        let n = &mut s.nodes[i as usize];
                        n.visited = true;
                        out.push(Some(n.data.clone()));
                    }
                    None => {
                        out.push(None);
                        missing.push(p);
                    }
                }
            }
        }
        self.hits.fetch_add((keys.len() - missing.len()) as u64, Relaxed);
        missing.sort_unstable();
        missing.dedup();
        self.misses.fetch_add(missing.len() as u64, Relaxed);
        (out, missing)
    }

    /// Offers loaded misses (distinct keys): `make(j)` builds `missing[j]`'s
    /// entry and is called only for keys that fit, so a batch far larger
    /// than the cache does not build an entry per key.
    fn insert(&self, missing: &[u64], mut make: impl FnMut(usize) -> PageRef) {
        let budget = self.entry_budget();
        if budget < charge(self.page_size) {
            return;
        }
        let mut s = self.inner.locked();
        let mut walked = 0;
        'insert: for (j, &p) in missing.iter().enumerate() {
            if s.map.contains_key(&p) {
                continue;
            }
            if !s.door.check_and_mark(p) && s.bytes + charge(self.page_size) > budget {
                continue;
            }
            let d = make(j);
            while s.bytes + charge(d.len()) > budget && !s.map.is_empty() {
                if !s.evict_one(&mut walked) {
                    // Everything left is pinned (a batch larger than the
                    // cache): the rest of the batch is not cached, rather
                    // than sweeping the whole cache once per page.
                    break 'insert;
                }
                self.evictions.fetch_add(1, Relaxed);
            }
            if s.bytes + charge(d.len()) <= budget {
                s.push_head(p, d);
            }
        }
        self.hand_steps.fetch_add(walked, Relaxed);
    }

    pub fn budget(&self) -> usize {
        self.budget
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
            evictions: self.evictions.load(Relaxed),
            hand_steps: self.hand_steps.load(Relaxed),
            bytes: (self.inner.locked().bytes + self.door_bytes) as u64,
            budget: self.budget as u64,
        }
    }

    pub fn reset_stats(&self) {
        self.hits.store(0, Relaxed);
        self.misses.store(0, Relaxed);
        self.evictions.store(0, Relaxed);
        self.hand_steps.store(0, Relaxed);
    }

    /// Forgets `pages` (their page numbers are about to hold new contents).
    pub fn invalidate(&self, pages: &[u64]) {
        let mut s = self.inner.locked();
        for &p in pages {
            s.remove(p);
        }
    }

    /// Drops every unpinned page (benchmarks start cold with this).
    pub fn clear(&self) {
        let mut s = self.inner.locked();
        *s = Sieve::new(self.budget / charge(self.page_size));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(p: u64) -> PageRef {
        Arc::from(vec![p as u8; 16])
    }

    #[test]
    fn budget_holds_and_visited_pages_survive() {
        let budget = 4 * charge(16) + Doorkeeper::bytes_for(4);
        let c = PageCache::new(budget, 16);
        let load = |ps: &[u64]| Ok(ps.iter().map(|&p| page(p)).collect());
        c.get_many(&[1, 2, 3, 4], load).unwrap();
        // Touch 1 and 2: they are visited and should outlive 3 and 4.
        c.get_many(&[1, 2], load).unwrap();
        // Missed twice, so the doorkeeper lets them in.
        c.get_many(&[5, 6], load).unwrap();
        c.get_many(&[5, 6], load).unwrap();
        let s = c.stats();
        assert!(s.bytes as usize <= budget);
        assert_eq!((s.hits, s.evictions), (2, 2));
        c.reset_stats();
        c.get_many(&[1, 2], load).unwrap();
        assert_eq!(c.stats().hits, 2, "visited pages were evicted");
        let got = c.get_many(&[9, 9, 1], load).unwrap();
        assert_eq!(got[0][0], 9);
        assert_eq!(got[2][0], 1);
        c.invalidate(&[1, 9, 77]);
        c.reset_stats();
        c.get_many(&[1, 9, 2], load).unwrap();
        assert_eq!(c.stats().hits, 1, "invalidated pages were served");
        assert!(c.stats().bytes as usize <= budget);
    }

    #[test]
    fn a_full_cache_takes_a_page_on_its_second_miss() {
        let c = PageCache::new(3 * charge(16) + Doorkeeper::bytes_for(3), 16);
        let load = |ps: &[u64]| Ok(ps.iter().map(|&p| page(p)).collect());
        c.get_many(&[1, 2, 3], load).unwrap();
        c.get_many(&[4], load).unwrap();
        assert_eq!(c.stats().evictions, 0, "a first miss entered a full cache");
        c.get_many(&[4], load).unwrap();
        assert_eq!(c.stats().evictions, 1, "a second miss did not enter");
        c.reset_stats();
        c.get_many(&[4], load).unwrap();
        assert_eq!(c.stats().hits, 1);
        // A page evicted comes back on its next miss: it was marked on entry.
        c.reset_stats();
        c.get_many(&[1, 2, 3], load).unwrap();
        assert_eq!(c.stats().misses, 1);
        c.reset_stats();
        c.get_many(&[1, 2, 3], load).unwrap();
        assert_eq!(c.stats().misses, 0, "the evicted page did not come back on its first miss");
    }

    #[test]
    fn pinned_pages_are_not_evicted() {
        let c = PageCache::new(2 * charge(16) + Doorkeeper::bytes_for(2), 16);
        let load = |ps: &[u64]| Ok(ps.iter().map(|&p| page(p)).collect());
        let pinned = c.get_many(&[1, 2], load).unwrap();
        c.get_many(&[3], load).unwrap();
        assert_eq!(pinned[0][0], 1);
        c.reset_stats();
        c.get_many(&[1, 2], load).unwrap();
        assert_eq!(c.stats().hits, 2);
    }
}
