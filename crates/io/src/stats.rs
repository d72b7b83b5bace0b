//! Per-member I/O counters. Atomics for counts, one histogram per member for
//! latency (recorded once per completed I/O, nanoseconds).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::sync::MutexExt;

pub(crate) struct MemberCounters {
    ios: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
    merged_pages: AtomicU64,
    gap_pages: AtomicU64,
    inflight_hwm: AtomicU64,
    latency: Mutex<Histogram<u64>>,
}

impl MemberCounters {
    pub(crate) fn new() -> MemberCounters {
        MemberCounters {
            ios: AtomicU64::new(0),
            bytes_read: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
            merged_pages: AtomicU64::new(0),
            gap_pages: AtomicU64::new(0),
            inflight_hwm: AtomicU64::new(0),
            // 1 ns .. 100 s at 3 significant digits.
            latency: Mutex::new(Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("histogram bounds")),
        }
    }

    pub(crate) fn record_io(&self, write: bool, bytes: u64, latency: Duration) {
        self.ios.fetch_add(1, Relaxed);
        if write {
            self.bytes_written.fetch_add(bytes, Relaxed);
        } else {
            self.bytes_read.fetch_add(bytes, Relaxed);
        }
        let ns = (latency.as_nanos() as u64).clamp(1, 100_000_000_000);
        self.latency.locked().saturating_record(ns);
    }

    /// Records many completed I/Os at once: one histogram lock per call.
    /// `latencies_ns` holds one entry per I/O.
    pub(crate) fn record_ios(&self, bytes_read: u64, bytes_written: u64, latencies_ns: &[u64]) {
        if latencies_ns.is_empty() {
            return;
        }
        self.ios.fetch_add(latencies_ns.len() as u64, Relaxed);
        if bytes_read > 0 {
            self.bytes_read.fetch_add(bytes_read, Relaxed);
        }
        if bytes_written > 0 {
            self.bytes_written.fetch_add(bytes_written, Relaxed);
        }
        let mut h = self.latency.locked();
        for &ns in latencies_ns {
            h.saturating_record(ns.clamp(1, 100_000_000_000));
        }
    }

    /// `pages` rode along in another I/O, which also read `gap` pages
    /// nobody asked for to reach them.
    pub(crate) fn record_merged(&self, pages: u64, gap: u64) {
        self.merged_pages.fetch_add(pages, Relaxed);
        if gap > 0 {
            self.gap_pages.fetch_add(gap, Relaxed);
        }
    }

    pub(crate) fn record_inflight(&self, n: usize) {
        self.inflight_hwm.fetch_max(n as u64, Relaxed);
    }

    pub(crate) fn snapshot(&self) -> MemberStats {
        let h = self.latency.locked();
        let q = |x: f64| if h.is_empty() { 0.0 } else { h.value_at_quantile(x) as f64 / 1000.0 };
        MemberStats {
            ios: self.ios.load(Relaxed),
            bytes_read: self.bytes_read.load(Relaxed),
            bytes_written: self.bytes_written.load(Relaxed),
            merged_pages: self.merged_pages.load(Relaxed),
            gap_pages: self.gap_pages.load(Relaxed),
            inflight_hwm: self.inflight_hwm.load(Relaxed),
            p50_us: q(0.5),
            p99_us: q(0.99),
            max_us: h.max() as f64 / 1000.0,
        }
    }

    pub(crate) fn reset(&self) {
        self.ios.store(0, Relaxed);
        self.bytes_read.store(0, Relaxed);
        self.bytes_written.store(0, Relaxed);
        self.merged_pages.store(0, Relaxed);
        self.gap_pages.store(0, Relaxed);
        self.inflight_hwm.store(0, Relaxed);
        self.latency.locked().reset();
    }
}

/// A point-in-time copy of one member's counters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemberStats {
    /// I/O operations completed (a merged run counts once).
    pub ios: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Pages that rode along in another page's I/O instead of their own.
    pub merged_pages: u64,
    /// Pages read only to join two runs into one I/O (in `bytes_read`).
    pub gap_pages: u64,
    /// Highest number of I/Os in flight at once on this member.
    pub inflight_hwm: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}
