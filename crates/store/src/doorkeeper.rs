//! A doorkeeper (TinyLFU's first stage): a full cache takes a miss in only
//! when the same key missed before within a window, so keys asked for once
//! (a sampled leaf's feature row, a cold vertex's list page) do not push out
//! entries that are asked for again. Keys offered while the cache has room
//! are marked too, so an entry that is evicted and then missed again comes
//! straight back.
//!
//! One bit per hashed key, `BITS_PER_ENTRY` bits per cache entry; all bits
//! are cleared after `WINDOW_PER_ENTRY` x entries marks, so the false
//! positive rate stays under ~12% (1 - e^(-2/16)) and stale marks age out
//! (trace replays: docs/PERFORMANCE.md).

pub const BITS_PER_ENTRY: usize = 16;
const WINDOW_PER_ENTRY: usize = 2;

pub struct Doorkeeper {
    bits: Vec<u64>,
    /// Keys hash to their top `64 - shift` bits after a multiply.
    shift: u32,
    marks: usize,
    window: usize,
}

impl Doorkeeper {
    /// For a cache of `entries` entries.
    pub fn new(entries: usize) -> Doorkeeper {
        let nbits = Doorkeeper::bits_for(entries);
        Doorkeeper { bits: vec![0; nbits / 64], shift: 64 - nbits.trailing_zeros(), marks: 0, window: WINDOW_PER_ENTRY * entries.max(1) }
    }

    fn bits_for(entries: usize) -> usize {
        (BITS_PER_ENTRY * entries.max(1)).next_power_of_two().max(64)
    }

    /// Bytes a doorkeeper for `entries` entries takes.
    pub fn bytes_for(entries: usize) -> usize {
        Doorkeeper::bits_for(entries) / 8
    }

    /// Marks `key`; returns whether it was marked already.
    pub fn check_and_mark(&mut self, key: u64) -> bool {
        let h = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize;
        let (w, b) = (h / 64, 1u64 << (h % 64));
        if self.bits[w] & b != 0 {
            return true;
        }
        self.bits[w] |= b;
        self.marks += 1;
        if self.marks >= self.window {
            self.bits.fill(0);
            self.marks = 0;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_sight_passes_and_the_window_forgets() {
        let mut d = Doorkeeper::new(1000);
        assert!(!d.check_and_mark(7));
        assert!(d.check_and_mark(7), "a key seen before passes");
        assert_eq!(Doorkeeper::bytes_for(1000), d.bits.len() * 8);
        // Fill the window with other keys: the marks are cleared.
        let mut k = 1_000_000u64;
        while d.marks != 0 {
            d.check_and_mark(k);
            k += 1;
        }
        assert!(!d.check_and_mark(7), "marks outlived the window");
    }

    #[test]
    fn false_positives_stay_low_across_the_window() {
        let entries = 10_000;
        let mut d = Doorkeeper::new(entries);
        // Just before a reset: the fullest the bits get.
        for k in 0..(WINDOW_PER_ENTRY * entries - 1) as u64 {
            d.check_and_mark(k * 2_654_435_761);
        }
        let probes = 20_000u64;
        let fp = (0..probes).filter(|&k| d.check_and_mark((1 << 40) + k * 7919)).count();
        assert!(fp * 100 < probes as usize * 13, "{fp} false positives in {probes}");
    }
}
