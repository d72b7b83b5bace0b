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
//!
//! When the budget holds a whole direction, whole-graph passes keep it as an
//! `Image` instead: one buffer in page order, each page filled as a pass
//! reads it straight from the volume, so a pass that reads every page once
//! pays a copy per page, not an insert and an eviction, and later passes
//! find their pages by position, without a lock or a lookup per page.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicI64, AtomicU8, AtomicU64, AtomicUsize, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};
use std::sync::{Arc, Mutex, RwLock};

use rustc_hash::FxHashMap;
use solidgraph_io::sync::{MutexExt, RwLockExt};

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

/// A page of an `Image`: not read yet, read once, being copied in, or
/// readable.
const EMPTY: u8 = 0;
const SEEN: u8 = 1;
const FILLING: u8 = 2;
const FILLED: u8 = 3;

/// A direction's adjacency pages of one epoch, held in one buffer in page
/// order (`PageCache::image_for`). A page is copied in the second time a
/// pass reads it from the volume (already checked), and never changes
/// after. The first touch of fresh memory costs about what reading the page
/// costs (docs/PERFORMANCE.md), so copies are paid from a credit: a base
/// of `FILL_BASE_SHARE` of the pages, plus one page for each page the image
/// served. No pass then costs much more than a pass without the image, and
/// the filled share about doubles with each pass; a single pass, which
/// reads each page once, fills nothing.
pub(crate) struct Image {
    key: ImageKey,
    /// Page numbers, sorted and distinct; page `pages[i]` is slot i.
    pages: Vec<u64>,
    state: Vec<AtomicU8>,
    data: Box<[UnsafeCell<MaybeUninit<u8>>]>,
    page_size: usize,
    /// Pages that may still be copied in (see the type).
    credit: AtomicI64,
}

/// The share of an image's pages its credit starts with: the first pass
/// that fills copies at most this many pages beyond what it read anyway.
const FILL_BASE_SHARE: usize = 8;

/// The largest image, in pages: `Fetched::Image` marks a page read from the
/// volume with the top bit of its slot.
pub(crate) const IMAGE_MAX_PAGES: usize = 1 << 31;

// SAFETY: a slot's bytes are written by the one thread that moved its state
// from EMPTY to FILLING, and read only once it is FILLED (release/acquire).
unsafe impl Sync for Image {}

impl Image {
    fn new(key: ImageKey, pages: Vec<u64>, page_size: usize) -> Image {
        debug_assert!(pages.windows(2).all(|w| w[0] < w[1]));
        assert!(pages.len() < IMAGE_MAX_PAGES, "an image of {} pages", pages.len());
        let mut data = Vec::with_capacity(pages.len() * page_size);
        // In 4 KiB pages: a fresh huge page costs several times more per byte to
        // fault in than 4 KiB ones on a VM that hands freed memory back
        // to its host, and a pass reads the image in page order, where
        // huge pages save few TLB misses (docs/PERFORMANCE.md).
        crate::mem::advise_small(&data);
        // SAFETY: MaybeUninit needs no initialisation; the pages stay
        // untouched (and unbacked) until a pass fills them.
        unsafe { data.set_len(pages.len() * page_size) };
        let data: Vec<UnsafeCell<MaybeUninit<u8>>> = data;
        let state = pages.iter().map(|_| AtomicU8::new(EMPTY)).collect();
        let credit = AtomicI64::new(pages.len().div_ceil(FILL_BASE_SHARE) as i64);
        Image { key, pages, state, data: data.into_boxed_slice(), page_size, credit }
    }

    /// Budget bytes the image takes: its pages and their bookkeeping.
    fn bytes(&self) -> usize {
        image_bytes(self.pages.len(), self.page_size)
    }

    /// The slot of each page, None if one is not in the image.
    fn slots(&self, pages: &[u64]) -> Option<Vec<u32>> {
        let mut at = Vec::with_capacity(pages.len());
        let mut guess = 0;
        for &p in pages {
            // Passes ask for runs of consecutive slots.
            let i = if self.pages.get(guess) == Some(&p) { guess } else { self.pages.binary_search(&p).ok()? };
            at.push(i as u32);
            guess = i + 1;
        }
        Some(at)
    }

    pub(crate) fn filled(&self, slot: u32) -> bool {
        self.state[slot as usize].load(Acquire) == FILLED
    }

    /// The page in `slot`, which must be filled.
    pub fn page(&self, slot: u32) -> &[u8] {
        assert!(self.filled(slot), "image slot {slot} read before it was filled");
        let at = slot as usize * self.page_size;
        let cells = &self.data[at..at + self.page_size];
        // SAFETY: the slot is filled (its bytes initialised and never
        // written again); UnsafeCell<MaybeUninit<u8>> has u8's layout.
        unsafe { std::slice::from_raw_parts(cells.as_ptr().cast::<u8>(), self.page_size) }
    }

    /// Marks `slot` seen on its first read; copies `page` in on a later one
    /// if the credit allows (and no other thread is at it).
    fn fill(&self, slot: u32, page: &[u8]) {
        assert_eq!(page.len(), self.page_size);
        let state = &self.state[slot as usize];
        if state.compare_exchange(EMPTY, SEEN, Relaxed, Relaxed).is_ok() || state.load(Relaxed) != SEEN {
            return;
        }
        if self.credit.fetch_sub(1, Relaxed) <= 0 {
            self.credit.fetch_add(1, Relaxed);
            return;
        }
        if state.compare_exchange(SEEN, FILLING, Relaxed, Relaxed).is_err() {
            self.credit.fetch_add(1, Relaxed);
            return;
        }
        let at = slot as usize * self.page_size;
        // SAFETY: this thread alone moved the slot to FILLING, so nobody
        // reads or writes these bytes until the release below.
        unsafe { std::ptr::copy_nonoverlapping(page.as_ptr(), self.data[at].get().cast::<u8>(), self.page_size) };
        self.state[slot as usize].store(FILLED, Release);
    }

    /// Credits the image with `pages` it served: as many more may be copied in.
    fn served(&self, pages: usize) {
        self.credit.fetch_add(pages as i64, Relaxed);
    }
}

/// Which direction an image holds: the base's epoch, the direction's
/// first page in its translation table and its number of pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ImageKey {
    pub epoch: u64,
    pub first: u64,
    pub pages: usize,
}

/// Budget bytes of an image of `pages` pages.
pub(crate) fn image_bytes(pages: usize, page_size: usize) -> usize {
    pages * (page_size + size_of::<u64>() + 1)
}

/// How a batch's pages stand against the images.
pub(crate) enum Resident {
    /// Every page is in one image, at these slots: read the filled ones
    /// there, the others from the volume (then `fill` the image).
    In(Arc<Image>, Vec<u32>),
    /// Not in an image: the page cache proper.
    No,
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
    /// Whole directions held for passes (at most a few: out, in, lower).
    images: RwLock<Vec<Arc<Image>>>,
    /// Their `Image::bytes`, charged to the budget.
    image_bytes: AtomicUsize,
    /// Directions the budget did not hold besides the other images.
    refused: Mutex<Vec<ImageKey>>,
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
            images: RwLock::new(Vec::new()),
            image_bytes: AtomicUsize::new(0),
            refused: Mutex::new(Vec::new()),
        }
    }

    /// Bytes the entries may take: the budget less the doorkeeper's and
    /// the images'.
    fn entry_budget(&self) -> usize {
        self.budget.saturating_sub(self.door_bytes + self.image_bytes.load(Relaxed))
    }

    /// Makes sure an image of `pages` (a direction's, sorted and distinct)
    /// of `epoch` exists, if the budget holds it besides the images of the
    /// same epoch (and it has fewer than `IMAGE_MAX_PAGES` pages); images of
    /// other epochs are dropped first. Entries of the
    /// page cache proper make room (they would hold the same pages).
    /// `key` names the direction (and epoch): a pass asks once per range,
    /// and `pages` is built only when no image or refusal has that key.
    pub(crate) fn image_for(&self, key: ImageKey, pages: impl FnOnce() -> Vec<u64>) {
        let have = |imgs: &[Arc<Image>]| imgs.iter().any(|i| i.key == key);
        if have(&self.images.read_locked()) || self.refused.locked().contains(&key) {
            return;
        }
        let mut imgs = self.images.write_locked();
        if have(&imgs) {
            return;
        }
        imgs.retain(|i| i.key.epoch == key.epoch);
        let held: usize = imgs.iter().map(|i| i.bytes()).sum();
        let want = image_bytes(key.pages, self.page_size);
        if held + want + self.door_bytes > self.budget || key.pages >= IMAGE_MAX_PAGES {
            self.image_bytes.store(held, Relaxed);
            let mut refused = self.refused.locked();
            refused.retain(|k| k.epoch == key.epoch);
            refused.push(key);
            return;
        }
        let pages = pages();
        assert!(pages.len() <= key.pages, "an image of {} pages for a direction of {}", pages.len(), key.pages);
        imgs.push(Arc::new(Image::new(key, pages, self.page_size)));
        self.image_bytes.store(held + want, Relaxed);
        // The entries' budget shrank: start the page cache proper afresh
        // (pinned pages live on with their holders).
        *self.inner.locked() = Sieve::new(self.entry_budget() / charge(self.page_size));
    }

    /// Where `pages` stand against the images (`Resident`).
    pub(crate) fn resident(&self, pages: &[u64]) -> Resident {
        if pages.is_empty() || self.image_bytes.load(Relaxed) == 0 {
            return Resident::No;
        }
        let imgs = self.images.read_locked();
        for img in imgs.iter() {
            if let Some(at) = img.slots(pages) {
                return Resident::In(img.clone(), at);
            }
        }
        Resident::No
    }

    /// Counts a batch's `served` distinct pages read from `img` as hits and
    /// credits the image with them.
    pub(crate) fn served(&self, img: &Image, served: usize) {
        img.served(served);
        self.hits.fetch_add(served as u64, Relaxed);
    }

    /// Copies pages read from the volume into their image's slots, as far
    /// as the image's credit goes (`Image`).
    pub(crate) fn fill<'p>(&self, img: &Image, at: &[u32], page: impl Fn(usize) -> &'p [u8]) {
        for (k, &slot) in at.iter().enumerate() {
            if !img.filled(slot) {
                img.fill(slot, page(k));
            }
        }
        let mut distinct = at.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        self.misses.fetch_add(distinct.len() as u64, Relaxed);
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
            bytes: (self.inner.locked().bytes + self.door_bytes + self.image_bytes.load(Relaxed)) as u64,
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
        {
            let mut imgs = self.images.write_locked();
            imgs.retain(|i| !pages.iter().any(|p| i.pages.binary_search(p).is_ok()));
            self.image_bytes.store(imgs.iter().map(|i| i.bytes()).sum(), Relaxed);
        }
        let mut s = self.inner.locked();
        for &p in pages {
            s.remove(p);
        }
    }

    /// Drops every unpinned page and every image (benchmarks start cold
    /// with this).
    pub fn clear(&self) {
        let mut imgs = self.images.write_locked();
        imgs.clear();
        self.image_bytes.store(0, Relaxed);
        self.refused.locked().clear();
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
    fn an_image_fills_on_second_read_and_charges_the_budget() {
        let ps = 16;
        let c = PageCache::new(8 * image_bytes(4, ps) + Doorkeeper::bytes_for(8), ps);
        let key = ImageKey { epoch: 1, first: 10, pages: 4 };
        c.image_for(key, || vec![10, 11, 12, 13]);
        assert_eq!(c.image_bytes.load(Relaxed), image_bytes(4, ps));
        assert!(matches!(c.resident(&[5]), Resident::No), "a page outside the image");
        let Resident::In(img, at) = c.resident(&[11, 12]) else { panic!("pages of the image") };
        assert_eq!(at, [1, 2]);
        // A 4-page image starts with a credit of one page: the second read
        // fills one, and serving it earns another.
        for _ in 1..=2 {
            c.fill(&img, &at, |k| if k == 0 { &[11u8; 16][..] } else { &[12u8; 16][..] });
        }
        assert_eq!([img.filled(1), img.filled(2)], [true, false], "the credit allowed one copy");
        c.served(&img, 1);
        c.fill(&img, &at, |k| if k == 0 { &[11u8; 16][..] } else { &[12u8; 16][..] });
        assert!(img.filled(2), "a page served earns one copy");
        let Resident::In(img, at) = c.resident(&[12, 11]) else { panic!("pages of the image") };
        assert_eq!((img.page(at[0])[0], img.page(at[1])[0]), (12, 11));
        assert!(!img.filled(3), "a page read never is not filled");
        // A direction too large for what is left is refused, and nothing changes.
        c.image_for(ImageKey { epoch: 1, first: 20, pages: 1000 }, || (20..1020).collect());
        assert_eq!(c.image_bytes.load(Relaxed), image_bytes(4, ps));
        // An image holding a page that gets new contents is dropped.
        c.invalidate(&[13]);
        assert!(matches!(c.resident(&[11]), Resident::No));
        assert_eq!(c.image_bytes.load(Relaxed), 0);
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
