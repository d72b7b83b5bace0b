//! A cache of tensor rows (feature vectors), with a byte budget and SIEVE
//! eviction, as the page cache (`cache.rs`) but shaped for rows: every row
//! of a tensor has the same size, so each tensor's rows live in one slab of
//! equal slots, and a lookup copies hits straight into the caller's buffer.
//!
//! Why not the page cache: an entry there is an `Arc<[u8]>` of its own,
//! about 90 bytes of overhead beside a row (its node, map slot, reference
//! counts and allocator header), a malloc and a free per row that enters
//! and leaves, and an atomic count per hit. Here a row costs its bytes plus
//! about 40 (slot key, SIEVE links and bit, map slot), so the same budget
//! holds more rows. Lookups take a read lock (the SIEVE bit is atomic), so
//! sampler threads copy their hits at the same time; only inserts take the
//! write lock.
//!
//! A loader that samples batches ahead of gathering their rows tells the
//! cache which rows those batches will ask for (`expect`, counted in
//! `Upcoming`). The cached ones are marked visited, so the hand passes over
//! them once more, and, unless the admission is `Only`, a miss among them
//! enters on its first miss: Belady's rule over the future the loader
//! knows, as Ginex does with the batches of a superbatch, at a bounded cost.
//! The hand never looks the upcoming set up, so its work per eviction stays
//! O(1) over time however much of the cache is upcoming.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, RwLock};

use rustc_hash::FxHashMap;
use solidgraph_io::sync::RwLockExt;

use crate::cache::CacheStats;
use crate::doorkeeper::{self, Doorkeeper};

const NIL: u32 = u32::MAX;

/// Per slot beside the row: its key, SIEVE links and visited bit.
const SLOT_OVERHEAD: usize = size_of::<u64>() + 2 * size_of::<u32>() + size_of::<AtomicBool>();

/// Bytes of a map sized for `slots` entries, as hashbrown sizes it: buckets
/// for 8/7 of them rounded up to a power of two, each an entry and a control
/// byte. The map is sized once, when the cache is made.
fn map_bytes(slots: usize) -> usize {
    if slots == 0 {
        return 0;
    }
    (slots * 8 / 7).max(4).next_power_of_two() * (size_of::<(u64, u32)>() + 1)
}

/// Bytes `slots` rows of `rb` bytes take, map and doorkeeper included.
/// The doorkeeper is charged whatever the admission, so the slot count, and
/// with it the rows warmed at open, do not depend on the policy compared.
fn bytes_for(slots: usize, rb: usize) -> usize {
    slots * (rb + SLOT_OVERHEAD) + map_bytes(slots) + if slots == 0 { 0 } else { Doorkeeper::bytes_for(slots) }
}

/// Which missed rows a cache takes in.
pub enum Admit {
    /// Every one (plain SIEVE).
    All,
    /// Once full, only a row that missed before within the doorkeeper's
    /// window (`doorkeeper.rs`); rows offered while there is room enter and
    /// are marked, so the rows warmed at open come back on their first miss.
    Seen,
    /// Only the rows (by id) this accepts, full or not.
    Only(Box<dyn Fn(u64) -> bool + Send + Sync>),
}

/// One tensor's rows. Slot i holds row `key[i]` at `data[i * rb..]`; the
/// SIEVE list runs from `head` (newest) by `next` to `tail`, and the hand
/// walks from the tail toward the head by `prev`.
struct Slab {
    rb: usize,
    slots: usize,
    map: FxHashMap<u64, u32>,
    data: Vec<u8>,
    key: Vec<u64>,
    /// Set by a hit or an announcement (`RowCache::expect`); the hand
    /// passes over a set slot once, clearing it.
    visited: Vec<AtomicBool>,
    prev: Vec<u32>,
    next: Vec<u32>,
    head: u32,
    tail: u32,
    hand: u32,
    /// With `Admit::Seen`.
    door: Option<Doorkeeper>,
}

impl Slab {
    fn new(rb: usize, slots: usize, door: bool) -> Slab {
        // Reserved now so the slab never moves; its pages fault in as rows
        // arrive, in huge pages.
        let data = Vec::with_capacity(slots * rb);
        crate::mem::advise_huge(&data);
        Slab {
            rb,
            slots,
            map: FxHashMap::with_capacity_and_hasher(slots, Default::default()),
            data,
            key: Vec::with_capacity(slots),
            visited: Vec::with_capacity(slots),
            prev: Vec::with_capacity(slots),
            next: Vec::with_capacity(slots),
            head: NIL,
            tail: NIL,
            hand: NIL,
            door: (door && slots > 0).then(|| Doorkeeper::new(slots)),
        }
    }

    fn unlink(&mut self, i: u32) {
        let (p, n) = (self.prev[i as usize], self.next[i as usize]);
        if p != NIL {
            self.next[p as usize] = n
        } else {
            self.head = n
        }
        if n != NIL { self.prev[n as usize] = p } else { self.tail = p }
    }

    fn push_head(&mut self, i: u32) {
        self.prev[i as usize] = NIL;
        self.next[i as usize] = self.head;
        if self.head != NIL {
            self.prev[self.head as usize] = i;
        }
        self.head = i;
        if self.tail == NIL {
            self.tail = i;
        }
    }

    /// Frees the first unvisited slot the hand reaches, clearing visited
    /// bits on its way (SIEVE). Every step past the first clears a bit that
    /// a hit or an announcement (`RowCache::expect`) set, so the steps of
    /// all evictions are at most the evictions plus the bits set: O(1) per
    /// eviction over time, and one sweep of the slab at worst. Returns the
    /// slot and the steps taken.
    fn evict_one(&mut self) -> (u32, u64) {
        let mut h = if self.hand != NIL { self.hand } else { self.tail };
        let mut steps = 1;
        while self.visited[h as usize].swap(false, Relaxed) {
            h = if self.prev[h as usize] != NIL { self.prev[h as usize] } else { self.tail };
            steps += 1;
        }
        self.hand = self.prev[h as usize];
        self.unlink(h);
        self.map.remove(&self.key[h as usize]);
        (h, steps)
    }

    /// Caches `row` as `id` (not yet cached); returns the hand's steps (0
    /// when a free slot took it).
    fn insert(&mut self, id: u64, row: &[u8]) -> u64 {
        debug_assert_eq!(row.len(), self.rb);
        let used = self.key.len();
        let (i, steps) = if used < self.slots {
            self.data.extend_from_slice(row);
            self.key.push(id);
            self.visited.push(AtomicBool::new(false));
            self.prev.push(NIL);
            self.next.push(NIL);
            (used as u32, 0)
        } else {
            let (i, steps) = self.evict_one();
            let at = i as usize * self.rb;
            self.data[at..at + self.rb].copy_from_slice(row);
            self.key[i as usize] = id;
            self.visited[i as usize].store(false, Relaxed);
            (i, steps)
        };
        self.push_head(i);
        self.map.insert(id, i);
        steps
    }

    /// Sets the visited bit of the cached rows among `ids`.
    fn mark(&self, ids: &[u64]) {
        for id in ids {
            if let Some(&i) = self.map.get(id) {
                self.visited[i as usize].store(true, Relaxed);
            }
        }
    }
}

/// Whether the distinct upcoming rows are at most twice a slab's `slots`.
/// Past that (a small cache, a long lookahead) admitting every upcoming row
/// on its first miss is admitting nearly every row, which the doorkeeper
/// exists to prevent, and the cache cannot hold them until their use
/// anyway: admission and `upcoming_uncached` then ignore them.
fn fits(distinct: usize, slots: usize) -> bool {
    distinct <= 2 * slots
}

/// How many upcoming batches ask for each row (by vertex id): a multiset
/// a loader adds a batch's rows to when it samples the batch and takes
/// them out of (`Expected`'s drop) just before gathering them. Bounded by
/// the loader's lookahead times its batches' nodes.
#[derive(Default)]
pub struct Upcoming {
    counts: RwLock<FxHashMap<u64, u32>>,
    /// Rows added and not yet taken out, duplicates counted.
    held: AtomicUsize,
}

impl Upcoming {
    fn add(&self, ids: &[u64]) {
        let mut c = self.counts.write_locked();
        for &id in ids {
            *c.entry(id).or_insert(0) += 1;
        }
        self.held.fetch_add(ids.len(), Relaxed);
    }

    fn remove(&self, ids: &[u64]) {
        let mut c = self.counts.write_locked();
        for id in ids {
            let Some(n) = c.get_mut(id) else { continue };
            *n -= 1;
            if *n == 0 {
                c.remove(id);
            }
        }
        self.held.fetch_sub(ids.len(), Relaxed);
    }

    /// Rows added and not yet taken out, duplicates counted.
    pub fn held(&self) -> usize {
        self.held.load(Relaxed)
    }
}

/// The rows one upcoming batch will ask for, counted in its cache's
/// `Upcoming` while this lives. Drop it just before the batch's gather, so
/// the rows only this batch wants are admitted as any other miss.
pub struct Expected {
    upcoming: Option<Arc<Upcoming>>,
    ids: Vec<u64>,
}

impl Expected {
    pub(crate) fn new(upcoming: Option<Arc<Upcoming>>, ids: Vec<u64>) -> Expected {
        if let Some(u) = &upcoming {
            u.add(&ids);
        }
        Expected { upcoming, ids }
    }
}

impl Drop for Expected {
    fn drop(&mut self) {
        if let Some(u) = &self.upcoming {
            u.remove(&self.ids);
        }
    }
}

pub struct RowCache {
    budget: usize,
    /// One per tensor, in the superblock's order.
    slabs: Vec<RwLock<Slab>>,
    admit: Admit,
    /// Rows upcoming batches will ask for; not charged to the budget (the
    /// loader's lookahead bounds it, as its prefetch bounds the batches).
    upcoming: Arc<Upcoming>,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
    /// Slots the eviction hand visited (`Slab::evict_one`).
    hand_steps: AtomicU64,
}

impl RowCache {
    /// A cache of `budget` bytes over tensors whose rows take `row_bytes`,
    /// each given the same number of rows (a sampled vertex needs its row of
    /// every tensor).
    pub fn new(budget: usize, row_bytes: &[usize], admit: Admit) -> RowCache {
        let slots = RowCache::rows_held(budget, row_bytes);
        let door = matches!(admit, Admit::Seen);
        RowCache {
            budget,
            slabs: row_bytes.iter().map(|&rb| RwLock::new(Slab::new(rb, slots, door))).collect(),
            admit,
            upcoming: Arc::default(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            hand_steps: AtomicU64::new(0),
        }
    }

    /// How many vertices' rows (one of each tensor) `budget` bytes hold:
    /// every tensor gets that many slots, since a sampled vertex needs its
    /// row of each, and a budget split by row size would leave a small
    /// tensor's share unable to pay its per-slot overhead.
    pub fn rows_held(budget: usize, row_bytes: &[usize]) -> usize {
        if row_bytes.is_empty() {
            return 0;
        }
        // A first guess from the per-row costs (row, slot, map entry and
        // control byte, doorkeeper bits), then down to what fits exactly.
        let per: usize = row_bytes.iter().map(|&rb| rb + SLOT_OVERHEAD + size_of::<(u64, u32)>() + 1 + doorkeeper::BITS_PER_ENTRY / 8).sum();
        let mut n = budget / per;
        while n > 0 && RowCache::budget_for(n, row_bytes) > budget {
            n -= n / 64 + 1;
        }
        n
    }

    /// The smallest budget that holds `rows` vertices' rows.
    pub fn budget_for(rows: usize, row_bytes: &[usize]) -> usize {
        row_bytes.iter().map(|&rb| bytes_for(rows, rb)).sum()
    }

    /// Copies the cached rows among `ids` (rows of tensor `ti`) into row
    /// `at[j]` of `out` (rows of `rb` bytes); returns the positions j that
    /// missed, in order.
    pub fn lookup_into(&self, ti: usize, ids: &[u64], at: &[usize], out: &mut [u8]) -> Vec<usize> {
        debug_assert_eq!(ids.len(), at.len());
        let mut missed = Vec::new();
        {
            let s = self.slabs[ti].read_locked();
            let rb = s.rb;
            for (j, id) in ids.iter().enumerate() {
                match s.map.get(id) {
                    Some(&i) => {
                        let (src, dst) = (i as usize * rb, at[j] * rb);
                        out[dst..dst + rb].copy_from_slice(&s.data[src..src + rb]);
                        s.visited[i as usize].store(true, Relaxed);
                    }
                    None => missed.push(j),
                }
            }
        }
        self.hits.fetch_add((ids.len() - missed.len()) as u64, Relaxed);
        self.misses.fetch_add(missed.len() as u64, Relaxed);
        missed
    }

    /// Maps in the slabs' reserved row memory ahead of the rows, outside
    /// their locks, so the kernel's zeroing of fresh pages does not run
    /// inside a slab's write lock while the warm-up fills it.
    pub fn prefault(&self) {
        for s in &self.slabs {
            let (addr, bytes) = {
                let s = s.read_locked();
                (s.data.as_ptr() as usize, s.data.capacity())
            };
            let half = (bytes / 2).next_multiple_of(2 << 20).min(bytes);
            std::thread::scope(|sc| {
                sc.spawn(|| crate::mem::populate(addr + half, bytes - half));
                crate::mem::populate(addr, half);
            });
        }
    }

    /// Offers loaded rows `ids` of tensor `ti` (distinct), `row(j)` the
    /// bytes of `ids[j]`; the admitted ones not cached yet are kept.
    pub fn insert<'a>(&self, ti: usize, ids: &[u64], row: impl Fn(usize) -> &'a [u8]) {
        let mut s = self.slabs[ti].write_locked();
        if s.slots == 0 {
            return;
        }
        // Slab, then upcoming: `Upcoming` takes no slab lock. The upcoming
        // set is only read here, once per row offered, never per hand step.
        let counts = self.upcoming.counts.read_locked();
        let upcoming = fits(counts.len(), s.slots).then_some(&*counts);
        let (mut evictions, mut steps) = (0, 0);
        for (j, &id) in ids.iter().enumerate() {
            if s.map.contains_key(&id) {
                continue;
            }
            let admitted = match &self.admit {
                Admit::All => true,
                Admit::Only(f) => f(id),
                Admit::Seen => {
                    let room = s.key.len() < s.slots;
                    s.door.as_mut().expect("Seen slabs have a doorkeeper").check_and_mark(id) || room || upcoming.is_some_and(|u| u.contains_key(&id))
                }
            };
            if admitted {
                let n = s.insert(id, row(j));
                evictions += (n > 0) as u64;
                steps += n;
            }
        }
        self.evictions.fetch_add(evictions, Relaxed);
        self.hand_steps.fetch_add(steps, Relaxed);
    }

    /// Counts `ids` (vertex ids) as rows an upcoming batch will ask for
    /// until the result drops. While the upcoming rows fit (`fits`) and a
    /// slab is full, its cached rows among them are marked visited, so the
    /// hand passes over them once more before it may take them: one lookup
    /// per announced row, and the hand's work stays O(1) per eviction
    /// (`Slab::evict_one`) however much of the cache is upcoming. A slab
    /// with room evicts nothing, and past `fits` marking every announced
    /// row would leave the visited bits meaning nothing: no marks then.
    pub fn expect(&self, ids: Vec<u64>) -> Expected {
        let expected = Expected::new(Some(self.upcoming.clone()), ids);
        let distinct = self.upcoming.counts.read_locked().len();
        for s in &self.slabs {
            let s = s.read_locked();
            if s.key.len() == s.slots && fits(distinct, s.slots) {
                s.mark(&expected.ids);
            }
        }
        expected
    }

    /// Positions of the rows among `ids` (of tensor `ti`) that upcoming
    /// batches ask for and the cache does not hold.
    pub fn upcoming_uncached(&self, ti: usize, ids: &[u64]) -> Vec<usize> {
        if self.upcoming.held() == 0 {
            return Vec::new();
        }
        let s = self.slabs[ti].read_locked();
        let up = self.upcoming.counts.read_locked();
        if !fits(up.len(), s.slots) {
            return Vec::new();
        }
        (0..ids.len()).filter(|&j| up.contains_key(&ids[j]) && !s.map.contains_key(&ids[j])).collect()
    }

    pub fn upcoming(&self) -> &Upcoming {
        &self.upcoming
    }

    pub fn stats(&self) -> CacheStats {
        let bytes = self
            .slabs
            .iter()
            .map(|s| {
                let s = s.read_locked();
                s.key.len() * (s.rb + SLOT_OVERHEAD) + map_bytes(s.slots) + s.door.as_ref().map_or(0, |_| Doorkeeper::bytes_for(s.slots))
            })
            .sum::<usize>();
        CacheStats {
            hits: self.hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
            evictions: self.evictions.load(Relaxed),
            hand_steps: self.hand_steps.load(Relaxed),
            bytes: bytes as u64,
            budget: self.budget as u64,
        }
    }

    pub fn reset_stats(&self) {
        self.hits.store(0, Relaxed);
        self.misses.store(0, Relaxed);
        self.evictions.store(0, Relaxed);
        self.hand_steps.store(0, Relaxed);
    }

    /// Drops every row (benchmarks start cold with this).
    pub fn clear(&self) {
        for s in &self.slabs {
            let mut s = s.write_locked();
            *s = Slab::new(s.rb, s.slots, s.door.is_some());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: u64) -> Vec<u8> {
        vec![id as u8; 16]
    }

    fn get(c: &RowCache, ids: &[u64]) -> (Vec<u8>, Vec<usize>) {
        let mut out = vec![0u8; ids.len() * 16];
        let at: Vec<usize> = (0..ids.len()).collect();
        let missed = c.lookup_into(0, ids, &at, &mut out);
        let rows: Vec<Vec<u8>> = missed.iter().map(|&j| row(ids[j])).collect();
        let mut miss_ids: Vec<u64> = missed.iter().map(|&j| ids[j]).collect();
        miss_ids.dedup();
        c.insert(0, &miss_ids, |j| &rows[missed.iter().position(|&m| ids[m] == miss_ids[j]).unwrap()]);
        (out, missed)
    }

    /// Tensors of very different row sizes share one slot count, and it
    /// is the most the budget holds.
    #[test]
    fn rows_held_fills_the_budget_across_tensor_sizes() {
        for rbs in [&[512usize, 8, 1][..], &[16], &[4, 4096], &[1]] {
            for budget in [0usize, 1000, 1 << 20, 51 << 20] {
                let n = RowCache::rows_held(budget, rbs);
                assert!(RowCache::budget_for(n, rbs) <= budget, "{rbs:?} {budget}: {n} rows overflow");
                assert!(RowCache::budget_for(n + n / 32 + 2, rbs) > budget, "{rbs:?} {budget}: {n} rows leave room");
                let c = RowCache::new(budget, rbs, Admit::All);
                assert!(c.stats().budget as usize == budget);
            }
        }
        // The x/y/mask case: x gets most of the budget, the rest going to
        // slots and maps.
        let n = RowCache::rows_held(51 << 20, &[512, 8, 1]);
        assert!(n * 512 > (51 << 20) * 7 / 10, "{n} rows of x");
    }

    #[test]
    fn budget_holds_and_visited_rows_survive() {
        let c = RowCache::new(RowCache::budget_for(4, &[16]), &[16], Admit::All);
        assert_eq!(RowCache::rows_held(RowCache::budget_for(4, &[16]), &[16]), 4);
        get(&c, &[1, 2, 3, 4]);
        // Touch 1 and 2: they are visited and should outlive 3 and 4.
        let (out, missed) = get(&c, &[1, 2]);
        assert!(missed.is_empty());
        assert_eq!(out, [row(1), row(2)].concat(), "hits are copied in request order");
        get(&c, &[5, 6]);
        let s = c.stats();
        assert!(s.bytes <= s.budget, "{s:?}");
        assert_eq!((s.hits, s.misses, s.evictions), (2, 6, 2));
        assert!(get(&c, &[1, 2]).1.is_empty(), "visited rows were evicted");
        assert_eq!(get(&c, &[3, 4]).1, [0, 1], "unvisited rows were kept over visited ones");
        c.clear();
        assert_eq!(get(&c, &[1]).1, [0], "clear keeps nothing");
    }

    #[test]
    fn admission_and_many_tensors() {
        let c = RowCache::new(RowCache::budget_for(8, &[16, 4]), &[16, 4], Admit::Only(Box::new(|id| id % 2 == 0)));
        assert!(RowCache::rows_held(c.budget, &[16, 4]) >= 8);
        get(&c, &[1, 2, 3, 4]);
        assert_eq!(get(&c, &[1, 2, 3, 4]).1, [0, 2], "only admitted rows are kept");
        // Tensor 1 is a slab of its own: nothing of tensor 0 shows there.
        let mut out = vec![0u8; 4];
        assert_eq!(c.lookup_into(1, &[2], &[0], &mut out), [0]);
    }

    #[test]
    fn seen_admits_a_row_on_its_second_miss_once_full() {
        let c = RowCache::new(RowCache::budget_for(4, &[16]), &[16], Admit::Seen);
        assert_eq!(get(&c, &[1, 2, 3, 4]).1.len(), 4, "cold");
        assert!(get(&c, &[1, 2, 3, 4]).1.is_empty(), "rows offered while there is room enter at once");
        get(&c, &[5]);
        assert_eq!(c.stats().evictions, 0, "a first miss entered a full cache");
        assert!(get(&c, &[1, 2, 3, 4]).1.is_empty());
        get(&c, &[5]);
        assert_eq!(c.stats().evictions, 1, "a second miss did not enter");
        assert!(get(&c, &[5]).1.is_empty());
        // The row it evicted was marked when it entered: it comes straight back.
        let gone = (1..=4).find(|&r| !get(&c, &[r]).1.is_empty()).unwrap();
        assert!(get(&c, &[gone]).1.is_empty(), "an evicted row's next miss did not bring it back");
        let s = c.stats();
        assert!(s.bytes <= s.budget, "{s:?}");
        c.clear();
        assert_eq!(get(&c, &[5]).1, [0]);
        assert!(get(&c, &[5]).1.is_empty(), "a cleared cache has room again");
    }

    #[test]
    fn upcoming_rows_stay_and_enter_on_their_first_miss() {
        let c = RowCache::new(RowCache::budget_for(4, &[16]), &[16], Admit::Seen);
        get(&c, &[1, 2, 3, 4]);
        let e = c.expect(vec![1, 9, 9]);
        assert_eq!(c.upcoming().held(), 3);
        // Rows seen twice take the slots of 2, 3 and 4, never of 1.
        for r in [5, 6, 7, 5, 6, 7] {
            get(&c, &[r]);
        }
        assert!(get(&c, &[1]).1.is_empty(), "an upcoming row was evicted");
        assert_eq!(get(&c, &[9]).1, [0], "cold");
        assert!(get(&c, &[9]).1.is_empty(), "an upcoming row's first miss did not enter a full cache");
        drop(e);
        assert_eq!(c.upcoming().held(), 0);
        get(&c, &[10]);
        assert_eq!(get(&c, &[10]).1, [0], "a row no longer upcoming entered on its first miss");
        // More upcoming rows than slots: eviction still finds a victim.
        let _e = c.expect((20..40).collect());
        for r in 20..40 {
            get(&c, &[r]);
        }
        let s = c.stats();
        assert!(s.bytes <= s.budget, "{s:?}");
    }

    /// The loader's worst case: most cached rows are upcoming and misses
    /// keep evicting. The hand's visits stay within the evictions plus the
    /// visited bits set (hits and announced rows), not the hundreds per
    /// eviction of a hand that walks past upcoming rows.
    #[test]
    fn hand_work_stays_linear_when_the_cache_is_mostly_upcoming() {
        let slots = 1000u64;
        let c = RowCache::new(RowCache::budget_for(slots as usize, &[16]), &[16], Admit::Seen);
        let warm: Vec<u64> = (0..slots).collect();
        get(&c, &warm);
        c.reset_stats();
        let mut announced = 0;
        let mut held = Vec::new();
        for round in 0..20u64 {
            // Announce 1.5 slots' worth (within `fits`), most of them cached.
            let ids: Vec<u64> = (0..slots * 3 / 2).map(|k| (k * 7 + round * 311) % (slots * 3)).collect();
            announced += ids.len() as u64;
            held.push(c.expect(ids.clone()));
            if held.len() > 4 {
                held.remove(0);
            }
            for chunk in ids.chunks(97) {
                get(&c, chunk);
            }
        }
        let s = c.stats();
        assert!(s.evictions > 10 * slots, "{s:?}: too few evictions to test");
        assert!(s.hand_steps <= s.evictions + s.hits + announced, "{s:?}: the hand scanned ({announced} announced)");
        assert!(s.bytes <= s.budget, "{s:?}");
    }

    #[test]
    fn sieve_under_churn_stays_within_budget_and_consistent() {
        let c = RowCache::new(RowCache::budget_for(64, &[16]), &[16], Admit::All);
        for round in 0..50u64 {
            let ids: Vec<u64> = (0..40).map(|k| (k * 7 + round * 13) % 200).collect();
            let (out, missed) = get(&c, &ids);
            for (j, &id) in ids.iter().enumerate() {
                if !missed.contains(&j) {
                    assert_eq!(out[j * 16..(j + 1) * 16], row(id)[..], "a hit returned another row");
                }
            }
            let s = c.stats();
            assert!(s.bytes <= s.budget, "{s:?}");
        }
    }
}
