//! The I/O benchmark behind `solidgraph-bench io` and the Python
//! package's `solidgraph.bench_io`: one submitting thread drives a volume
//! with batches of random or sequential block I/Os and reports IOPS,
//! bandwidth and per-I/O latency from the volume's own counters.
//!
//! It lives here, not in the solidgraph-bench crate, because the Python
//! package exposes it to users to size a device, and it needs nothing but
//! the volume.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::backend::BackendKind;
use crate::buf::AlignedBuf;
use crate::error::{IoError, Result};
use crate::volume::{BackendChoice, Volume, VolumeOptions};

const PAGE: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    RandRead,
    RandWrite,
    Read,
}

impl std::str::FromStr for Pattern {
    type Err = IoError;
    fn from_str(s: &str) -> Result<Pattern> {
        match s {
            "randread" => Ok(Pattern::RandRead),
            "randwrite" => Ok(Pattern::RandWrite),
            "read" => Ok(Pattern::Read),
            _ => Err(IoError::Config(format!("unknown pattern {s:?} (randread, randwrite or read)"))),
        }
    }
}

/// How random block offsets are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Dist {
    /// Every block equally likely (each batch holds distinct blocks).
    #[default]
    Uniform,
    /// Zipf with exponent theta (> 0, != 1), ranks scattered over the
    /// volume by a hash, as fio's `random_distribution=zipf:THETA`. A batch
    /// is topped up with more draws until it holds its number of distinct
    /// blocks (a repeat would be read once).
    Zipf(f64),
}

impl std::str::FromStr for Dist {
    type Err = IoError;
    fn from_str(s: &str) -> Result<Dist> {
        if s == "uniform" || s == "random" {
            return Ok(Dist::Uniform);
        }
        if let Some(t) = s.strip_prefix("zipf:") {
            let theta: f64 = t.parse().map_err(|_| IoError::Config(format!("bad zipf exponent {t:?}")))?;
            if !(theta > 0.0 && theta.is_finite() && (theta - 1.0).abs() > 1e-9) {
                return Err(IoError::Config(format!("zipf exponent {theta} must be > 0 and != 1")));
            }
            return Ok(Dist::Zipf(theta));
        }
        Err(IoError::Config(format!("unknown distribution {s:?} (uniform or zipf:THETA)")))
    }
}

/// Zipf ranks over `n` blocks after Gray et al., "Quickly generating
/// billion-record synthetic databases" (the generator fio uses).
struct Zipf {
    n: u64,
    theta: f64,
    zetan: f64,
    alpha: f64,
    eta: f64,
    off: u64,
}

impl Zipf {
    fn new(n: u64, theta: f64, seed: u64) -> Zipf {
        // Like fio, cap the zeta sum at 10M terms (its tail adds little).
        let terms = n.min(10_000_000);
        let zetan: f64 = (1..=terms).map(|i| (i as f64).powf(-theta)).sum();
        let zeta2 = 1.0 + 0.5f64.powf(theta);
        let alpha = 1.0 / (1.0 - theta);
        let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
        let mut s = seed;
        Zipf { n, theta, zetan, alpha, eta, off: splitmix(&mut s) % n.max(1) }
    }

    fn next(&self, seed: &mut u64) -> u64 {
        let u = (splitmix(seed) >> 11) as f64 / (1u64 << 53) as f64;
        let z = u * self.zetan;
        let rank = if z < 1.0 {
            0
        } else if z < 1.0 + 0.5f64.powf(self.theta) {
            1
        } else {
            (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
        };
        // Scatter ranks so the hot blocks are not all at the start.
        let mut h = rank;
        (splitmix(&mut h).wrapping_add(self.off)) % self.n
    }
}

#[derive(Debug, Clone)]
pub struct IoBenchConfig {
    /// One path per member; missing files are created and filled.
    pub paths: Vec<PathBuf>,
    /// Total bytes over all members.
    pub size: u64,
    pub block: usize,
    pub depth: usize,
    pub seconds: f64,
    pub pattern: Pattern,
    pub backend: Option<BackendKind>,
    /// Stripe unit in bytes (a multiple of the block).
    pub stripe_bytes: usize,
    pub seed: u64,
}

#[derive(Debug, Clone)]
pub struct IoBenchResult {
    pub backend: &'static str,
    pub members: usize,
    pub ios: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub iops: f64,
    pub mib_s: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

fn splitmix(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Opens the volume for the benchmark, creating and filling members that do
/// not exist yet (a sparse file would be read from nowhere). `progress` gets
/// (bytes done, bytes total) while filling.
pub fn prepare(cfg: &IoBenchConfig, progress: &mut dyn FnMut(u64, u64)) -> Result<Volume> {
    if cfg.block < PAGE || !cfg.block.is_multiple_of(PAGE) || cfg.block > (16 << 20) {
        return Err(IoError::Config(format!("block {} must be a multiple of 4096 up to 16 MiB", cfg.block)));
    }
    if !cfg.stripe_bytes.is_multiple_of(cfg.block) {
        return Err(IoError::Config(format!("stripe {} must be a multiple of the block {}", cfg.stripe_bytes, cfg.block)));
    }
    if cfg.depth == 0 || cfg.depth > 4096 {
        return Err(IoError::Config(format!("depth {} must be in 1..=4096", cfg.depth)));
    }
    // Register enough chunks with io_uring to hold one whole batch: reads
    // into fixed buffers skip pinning user pages on every I/O. (Chunks are
    // at least 256 KiB; see VolumeOptions::max_io_bytes.)
    let chunk = cfg.block.max(256 << 10);
    let batch_bytes = batch_blocks(cfg, cfg.paths.len(), u64::MAX) * cfg.block;
    let opts = VolumeOptions {
        page_size: PAGE,
        stripe_pages: (cfg.stripe_bytes / PAGE) as u64,
        backend: cfg.backend.map_or(BackendChoice::Auto, BackendChoice::Force),
        inflight_per_member: cfg.depth,
        max_io_bytes: cfg.block.max(PAGE),
        // Random blocks stay one I/O each, whatever lies between them.
        read_gap_pages: 0,
        registered_chunks: (batch_bytes.div_ceil(chunk) + 1).clamp(16, 1024),
        posix_threads: cfg.depth.min(256),
        writable: true,
        ..Default::default()
    };
    let existing = cfg.paths.iter().filter(|p| p.exists()).count();
    if existing == cfg.paths.len() {
        let v = Volume::open(&cfg.paths, opts)?;
        if v.num_pages() * PAGE as u64 >= cfg.size {
            return Ok(v);
        }
        return Err(IoError::Config(format!(
            "existing volume has {} bytes, less than --size {}; remove it or pass a smaller size",
            v.num_pages() * PAGE as u64,
            cfg.size
        )));
    }
    if existing > 0 {
        return Err(IoError::Config("some members exist and some do not; remove them or name all".into()));
    }
    let pages = cfg.size / PAGE as u64;
    let v = Volume::create(&cfg.paths, pages, VolumeOptions { max_io_bytes: 1 << 20, ..opts.clone() })?;
    let step = 4096u64; // 16 MiB per batch
    let mut data = AlignedBuf::zeroed(step as usize * PAGE);
    let mut seed = cfg.seed;
    for w in data.chunks_mut(8) {
        w.copy_from_slice(&splitmix(&mut seed).to_le_bytes());
    }
    let total = v.num_pages();
    let mut ids: Vec<u64> = Vec::with_capacity(step as usize);
    let mut p = 0;
    while p < total {
        let n = step.min(total - p);
        ids.clear();
        ids.extend(p..p + n);
        v.write(&ids, &data[..n as usize * PAGE])?;
        p += n;
        progress(p * PAGE as u64, total * PAGE as u64);
    }
    v.sync(true)?;
    drop(v);
    Volume::open(&cfg.paths, opts)
}

/// Blocks per `Volume::read`/`write` call. Depth 1 is one synchronous I/O
/// per call; deeper runs hand the volume batches large enough that the drain
/// at a batch's end costs little (32 times the in-flight total), but at most
/// 256 MiB of buffers.
fn batch_blocks(cfg: &IoBenchConfig, members: usize, blocks: u64) -> usize {
    if cfg.depth <= 1 {
        return 1;
    }
    let by_depth = cfg.depth * 32 * members.max(1);
    let by_bytes = ((256usize << 20) / cfg.block).max(cfg.depth * members.max(1) * 4);
    (by_depth.min(by_bytes) as u64).min(blocks) as usize
}

/// Runs the timed loop on a prepared volume with uniform random offsets.
pub fn run(v: &Volume, cfg: &IoBenchConfig) -> Result<IoBenchResult> {
    run_dist(v, cfg, Dist::Uniform)
}

/// Runs the timed loop with random offsets drawn from `dist` (ignored by the
/// sequential pattern).
pub fn run_dist(v: &Volume, cfg: &IoBenchConfig, dist: Dist) -> Result<IoBenchResult> {
    let ppb = (cfg.block / PAGE) as u64;
    let blocks = v.num_pages().min(cfg.size / PAGE as u64) / ppb;
    if blocks == 0 {
        return Err(IoError::Config("volume holds no whole block".into()));
    }
    let per_batch = batch_blocks(cfg, v.stripe().members as usize, blocks);
    let zipf = match dist {
        Dist::Zipf(theta) => Some(Zipf::new(blocks, theta, cfg.seed)),
        Dist::Uniform => None,
    };
    let mut data = AlignedBuf::zeroed(per_batch * cfg.block);
    data.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
    let mut seed = cfg.seed ^ 0x5eed;
    let mut starts: Vec<u64> = Vec::with_capacity(per_batch);
    let mut pages: Vec<u64> = Vec::with_capacity(per_batch * ppb as usize);
    let mut seq_next = 0u64;
    v.reset_stats();
    let t0 = Instant::now();
    let limit = Duration::from_secs_f64(cfg.seconds.max(0.01));
    while t0.elapsed() < limit {
        starts.clear();
        match cfg.pattern {
            Pattern::Read => {
                for _ in 0..per_batch {
                    starts.push(seq_next);
                    seq_next = (seq_next + 1) % blocks;
                }
            }
            _ => {
                // `per_batch` distinct blocks: the volume would read a repeat
                // once anyway, and a skewed draw full of repeats would make
                // small batches (a few rounds at most).
                for _ in 0..8 {
                    let want = per_batch - starts.len();
                    match &zipf {
                        None => (0..want).for_each(|_| starts.push(splitmix(&mut seed) % blocks)),
                        Some(z) => (0..want).for_each(|_| starts.push(z.next(&mut seed))),
                    }
                    starts.sort_unstable();
                    starts.dedup();
                    if starts.len() >= per_batch {
                        break;
                    }
                }
            }
        }
        pages.clear();
        for &b in &starts {
            pages.extend(b * ppb..(b + 1) * ppb);
        }
        match cfg.pattern {
            Pattern::RandWrite => v.write(&pages, &data[..pages.len() * PAGE])?,
            _ => drop(v.read(&pages)?),
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let stats = v.stats();
    let ios: u64 = stats.iter().map(|s| s.ios).sum();
    let bytes: u64 = stats.iter().map(|s| s.bytes_read + s.bytes_written).sum();
    // Latency over all members: the busiest member's percentiles weigh most,
    // take the I/O-weighted mean of the per-member percentiles.
    let w = |f: fn(&crate::MemberStats) -> f64| {
        if ios == 0 { 0.0 } else { stats.iter().map(|s| f(s) * s.ios as f64).sum::<f64>() / ios as f64 }
    };
    Ok(IoBenchResult {
        backend: v.backend().name(),
        members: stats.len(),
        ios,
        bytes,
        seconds: secs,
        iops: ios as f64 / secs,
        mib_s: bytes as f64 / secs / (1 << 20) as f64,
        p50_us: w(|s| s.p50_us),
        p99_us: w(|s| s.p99_us),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dist_parses() {
        assert_eq!("uniform".parse::<Dist>().unwrap(), Dist::Uniform);
        assert_eq!("zipf:1.2".parse::<Dist>().unwrap(), Dist::Zipf(1.2));
        assert!("zipf:1".parse::<Dist>().is_err());
        assert!("zipf:-2".parse::<Dist>().is_err());
        assert!("pareto:0.2".parse::<Dist>().is_err());
    }

    #[test]
    fn zipf_is_skewed_and_in_range() {
        for theta in [0.8, 1.2] {
            let n = 100_000u64;
            let z = Zipf::new(n, theta, 7);
            let mut seed = 3;
            let mut counts = std::collections::HashMap::new();
            for _ in 0..200_000 {
                let b = z.next(&mut seed);
                assert!(b < n);
                *counts.entry(b).or_insert(0u32) += 1;
            }
            let mut c: Vec<u32> = counts.into_values().collect();
            c.sort_unstable_by(|a, b| b.cmp(a));
            let top100: u32 = c.iter().take(100).sum();
            // Uniform would put ~0.1% of draws on the 100 hottest blocks.
            assert!(top100 > 200_000 / 20, "theta {theta}: top 100 blocks got {top100}");
        }
    }
}
