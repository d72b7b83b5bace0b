//! The request path's cost model: once a full-neighbourhood request's reach
//! is expanded, it estimates the reads of streaming the reach's rows (exact:
//! the rows' pages in store order, merged the way the volume merges them)
//! against reading them batch by batch (each batch's share of the reach, the
//! batches' reaches overlapping as random subsets of the graph would), and
//! prices both with per-I/O and per-page costs measured on the device
//! (docs/PERFORMANCE.md, Inference: the path cost model). The stream's
//! I/Os are priced lower than the batched path's: four readers keep the
//! device's queue full with reads straight off the volume, while a batch's
//! reads go through the caches and wait for its neighbourhood's hops in turn.

/// Measured costs, in microseconds: an I/O of the stream, an I/O of the
/// batched path, and a page read by either.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Costs {
    pub stream_io_us: f64,
    pub batched_io_us: f64,
    pub page_us: f64,
}

impl Default for Costs {
    fn default() -> Self {
        Costs { stream_io_us: 27.0, batched_io_us: 45.0, page_us: 4.5 }
    }
}

/// The volume's merge of a batch of reads: a page at most this many pages
/// past the previous read extends it, and a read carries at most this many
/// pages (`VolumeOptions`' defaults).
const GAP_PAGES: u64 = 4;
const MAX_IO_PAGES: u64 = 64;

/// Reads (I/Os and pages) of one path.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Reads {
    pub ios: f64,
    pub pages: f64,
}

/// Why a request ran the way it did: both paths' estimated reads and costs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Choice {
    pub stream: Reads,
    pub batched: Reads,
    pub stream_us: f64,
    pub batched_us: f64,
}

impl Choice {
    pub fn streams(&self) -> bool {
        self.stream_us <= self.batched_us
    }

    /// One line for the request report.
    pub fn reason(&self) -> String {
        let (won, lost) = if self.streams() { ("stream", "batches") } else { ("batches", "stream") };
        format!(
            "{won}: estimated stream {:.2} s ({:.0} I/Os, {:.0} pages) vs batches {:.2} s ({:.0} I/Os, {:.0} pages); {lost} dearer",
            self.stream_us / 1e6,
            self.stream.ios,
            self.stream.pages,
            self.batched_us / 1e6,
            self.batched.ios,
            self.batched.pages
        )
    }
}

/// The shape of a request for the model: the reach's rows (internal ids),
/// the graph's rows and the tensor's layout, and the batches it would run as.
pub struct Request<'a> {
    pub ids: &'a [u64],
    pub rows: u64,
    pub row_bytes: u64,
    /// Payload bytes of a tensor page.
    pub payload: u64,
    pub batches: usize,
}

/// Both paths' estimated costs for `r`.
pub fn choose(r: &Request<'_>, c: &Costs) -> Choice {
    let stream = stream_reads(r);
    let batched = batched_reads(r);
    let price = |x: Reads, io: f64| x.ios * io + x.pages * c.page_us;
    Choice { stream, batched, stream_us: price(stream, c.stream_io_us), batched_us: price(batched, c.batched_io_us) }
}

/// The stream's reads: the distinct pages of the reach's rows, merged.
fn stream_reads(r: &Request<'_>) -> Reads {
    assert!(r.payload > 0 && r.row_bytes > 0, "a tensor has rows and pages");
    let mut pages: Vec<u64> = Vec::with_capacity(r.ids.len() + 1);
    for &id in r.ids.iter().filter(|&&id| id < r.rows) {
        let (lo, hi) = (id * r.row_bytes / r.payload, ((id + 1) * r.row_bytes).div_ceil(r.payload));
        pages.extend(lo..hi);
    }
    pages.sort_unstable();
    pages.dedup();
    let (mut ios, mut read, mut run) = (0u64, 0u64, 0u64);
    let mut last: Option<u64> = None;
    for &p in &pages {
        match last {
            Some(l) if p - l <= GAP_PAGES + 1 && run + (p - l) <= MAX_IO_PAGES => {
                read += p - l;
                run += p - l;
            }
            _ => {
                ios += 1;
                read += 1;
                run = 1;
            }
        }
        last = Some(p);
    }
    Reads { ios: ios as f64, pages: read as f64 }
}

/// The batched path's reads: `batches` batches each reaching a random
/// subset of the graph's rows such that together they reach the request's
/// reach (`n (1 - (1 - s/n)^b) = m`); each batch reads the pages its rows
/// touch, merged as a random set of that density would be.
fn batched_reads(r: &Request<'_>) -> Reads {
    let n = r.rows.max(1) as f64;
    let m = (r.ids.len() as f64).min(n);
    let b = r.batches.max(1) as f64;
    let share = 1.0 - (1.0 - m / n).max(0.0).powf(1.0 / b);
    let total_pages = (r.rows * r.row_bytes).div_ceil(r.payload) as f64;
    let rows_per_page = r.payload as f64 / r.row_bytes as f64;
    // Pages one batch touches: a page holds rows_per_page rows, each in the
    // batch with chance `share`; a row longer than a page touches about
    // row_bytes / payload + 1 pages.
    let touched =
        if rows_per_page >= 1.0 { total_pages * (1.0 - (1.0 - share).powf(rows_per_page)) } else { (n * share * (1.0 / rows_per_page + 1.0)).min(total_pages) };
    let d = (touched / total_pages.max(1.0)).min(1.0);
    // A touched page starts a new I/O when the next GAP_PAGES + 1 pages are untouched; the gaps it bridges are read.
    let starts = touched * (1.0 - d).powf((GAP_PAGES + 1) as f64) + touched / MAX_IO_PAGES as f64;
    let bridged: f64 = (1..=GAP_PAGES).map(|g| touched * d * (1.0 - d).powi(g as i32) * g as f64).sum();
    Reads { ios: b * starts.max(1.0).min(touched.max(1.0)), pages: b * (touched + bridged) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(ids: &[u64], batches: usize) -> Request<'_> {
        Request { ids, rows: 2_000_000, row_bytes: 2048, payload: 4064, batches }
    }

    #[test]
    fn stream_reads_merge_near_pages() {
        // 2 KiB rows, 4,064-byte payloads: row 0 is on page 0, row 1 on pages 0-1, row 2 on page 1.
        assert_eq!(stream_reads(&request(&[0, 1, 2], 1)), Reads { ios: 1.0, pages: 2.0 });
        // Row 1,000 is on pages 503-504: 500 pages past the last, a second I/O.
        assert_eq!(stream_reads(&request(&[0, 1_000], 1)), Reads { ios: 2.0, pages: 3.0 });
        // Rows 100 and 110 are on pages 50 and 55: the 4 pages between are bridged.
        assert_eq!(stream_reads(&request(&[100, 110], 1)), Reads { ios: 1.0, pages: 6.0 });
    }

    #[test]
    fn the_cheaper_path_wins() {
        let mut x = 7u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % 2_000_000
        };
        let sparse: Vec<u64> = (0..100_000).map(|_| next()).collect();
        let dense: Vec<u64> = (0..1_100_000).map(|_| next()).collect();
        let c = Costs::default();
        // The measured costs: the stream is cheaper at 64 targets' reach (5% of rows) and at 1,024's (55%).
        assert!(choose(&request(&sparse, 4), &c).streams(), "{:?}", choose(&request(&sparse, 4), &c));
        assert!(choose(&request(&dense, 64), &c).streams(), "{:?}", choose(&request(&dense, 64), &c));
        // A device where a page costs as much as an I/O and merged reads gain nothing (no queue to fill):
        // a sparse reach batches (the stream reads the gaps it bridges too), a dense one still streams
        // (the batches' reaches overlap, and their rows are read again).
        let flat = Costs { stream_io_us: 100.0, batched_io_us: 100.0, page_us: 100.0 };
        let sparse_choice = choose(&request(&sparse, 4), &flat);
        assert!(!sparse_choice.streams() && sparse_choice.reason().starts_with("batches"), "{sparse_choice:?}");
        assert!(choose(&request(&dense, 64), &flat).streams(), "{:?}", choose(&request(&dense, 64), &flat));
    }
}
