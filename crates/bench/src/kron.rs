//! Graph500 Kronecker graphs (the reference `kronecker_generator.m`):
//! initiator A=0.57, B=0.19, C=0.19, `edge_factor * 2^scale` edges, then one
//! random permutation of the vertex ids so that ids carry no locality.
//!
//! The reference also shuffles the edge order; we skip that because every
//! consumer here (the import) sorts the edges anyway.
//!
//! Edges are generated in fixed-size chunks, each with its own generator
//! seeded from (seed, chunk), so the bytes depend on the seed only, not on
//! the number of threads.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use solidgraph_io::sync::MutexExt;

const A: f64 = 0.57;
const B: f64 = 0.19;
const C: f64 = 0.19;
const CHUNK_EDGES: u64 = 1 << 20;
/// Keeps the permutation's random stream apart from the edges' streams.
const PERMUTATION_STREAM: u64 = 0x7065_726d_7574_6521;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kronecker {
    pub scale: u32,
    pub edge_factor: u64,
    pub seed: u64,
}

impl Kronecker {
    pub fn new(scale: u32, edge_factor: u64, seed: u64) -> Result<Kronecker, String> {
        if !(1..=36).contains(&scale) {
            return Err(format!("scale {scale} must be in 1..=36"));
        }
        if !(1..=1024).contains(&edge_factor) {
            return Err(format!("edge factor {edge_factor} must be in 1..=1024"));
        }
        Ok(Kronecker { scale, edge_factor, seed })
    }

    pub fn num_nodes(&self) -> u64 {
        1 << self.scale
    }

    pub fn num_edges(&self) -> u64 {
        self.edge_factor << self.scale
    }

    /// The permutation applied to vertex ids (Fisher-Yates).
    fn permutation(&self) -> Vec<u64> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(self.seed ^ PERMUTATION_STREAM);
        let mut p: Vec<u64> = (0..self.num_nodes()).collect();
        for i in (1..p.len()).rev() {
            let j = (rng.next_u64() % (i as u64 + 1)) as usize;
            p.swap(i, j);
        }
        p
    }

    /// Unpermuted endpoints of edges `start..start + src.len()`.
    fn chunk(&self, index: u64, src: &mut [u64], dst: &mut [u64]) {
        // 32-bit thresholds: a level costs one 64-bit draw for both bits.
        let t = |p: f64| (p * 4_294_967_296.0) as u32;
        let (t_ab, t_a, t_c) = (t(A + B), t(A / (A + B)), t(C / (1.0 - A - B)));
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(self.seed ^ (index + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        for (s, d) in src.iter_mut().zip(dst.iter_mut()) {
            let (mut i, mut j) = (0u64, 0u64);
            for level in 0..self.scale {
                let r = rng.next_u64();
                let ii = (r as u32) > t_ab;
                let jj = ((r >> 32) as u32) > if ii { t_c } else { t_a };
                i |= (ii as u64) << level;
                j |= (jj as u64) << level;
            }
            *s = i;
            *d = j;
        }
    }

    /// Writes the edges as a (2, E) int64 `.npy` file (sources, then
    /// destinations). `progress` gets the number of edges just written.
    pub fn write_npy(&self, path: &Path, progress: &(dyn Fn(u64) + Sync)) -> std::io::Result<()> {
        let e = self.num_edges();
        let mut header = Vec::new();
        solidgraph_store::import::npy::write_header(&mut header, "<i8", &[2, e])?;
        let base = header.len() as u64;
        let mut f = File::create(path)?;
        f.write_all(&header)?;
        f.set_len(base + 16 * e)?;
        let perm = self.permutation();
        let chunks = e.div_ceil(CHUNK_EDGES);
        let next = AtomicU64::new(0);
        let first_err: Mutex<Option<std::io::Error>> = Mutex::new(None);
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    let mut src = vec![0u64; CHUNK_EDGES as usize];
                    let mut dst = vec![0u64; CHUNK_EDGES as usize];
                    let mut bytes = Vec::with_capacity(8 * CHUNK_EDGES as usize);
                    loop {
                        let c = next.fetch_add(1, Ordering::Relaxed);
                        if c >= chunks || first_err.locked().is_some() {
                            return;
                        }
                        let start = c * CHUNK_EDGES;
                        let n = (e - start).min(CHUNK_EDGES) as usize;
                        self.chunk(c, &mut src[..n], &mut dst[..n]);
                        let mut put = |ids: &[u64], at: u64| {
                            bytes.clear();
                            bytes.extend(ids.iter().flat_map(|&v| (perm[v as usize] as i64).to_le_bytes()));
                            f.write_all_at(&bytes, at)
                        };
                        let res = put(&src[..n], base + 8 * start).and_then(|()| put(&dst[..n], base + 8 * (e + start)));
                        if let Err(err) = res {
                            first_err.locked().get_or_insert(err);
                            return;
                        }
                        progress(n as u64);
                    }
                });
            }
        });
        if let Some(err) = first_err.into_inner_locked() {
            return Err(err);
        }
        f.sync_all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quadrant_shares_match_the_initiator() {
        let k = Kronecker { scale: 1, edge_factor: 1 << 16, seed: 7 };
        let n = 1 << 17;
        let (mut src, mut dst) = (vec![0; n], vec![0; n]);
        k.chunk(0, &mut src, &mut dst);
        let share = |a: u64, b: u64| src.iter().zip(&dst).filter(|&(&s, &d)| s == a && d == b).count() as f64 / n as f64;
        for (got, want) in [(share(0, 0), A), (share(0, 1), B), (share(1, 0), C), (share(1, 1), 1.0 - A - B - C)] {
            assert!((got - want).abs() < 0.01, "quadrant share {got}, want {want}");
        }
    }

    #[test]
    fn same_seed_same_file_and_a_permutation() {
        let dir = std::env::temp_dir().join(format!("sg-kron-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let k = Kronecker::new(10, 4, 3).unwrap();
        let (a, b) = (dir.join("a.npy"), dir.join("b.npy"));
        k.write_npy(&a, &|_| {}).unwrap();
        k.write_npy(&b, &|_| {}).unwrap();
        let (da, db) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
        assert_eq!(da, db);
        let h = solidgraph_store::import::npy::read_header(&a).unwrap();
        assert_eq!(h.shape, vec![2, 4 << 10]);
        let mut p = k.permutation();
        p.sort_unstable();
        assert_eq!(p, (0..1 << 10).collect::<Vec<_>>());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
