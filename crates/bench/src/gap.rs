//! GAP (gapbs, Beamer et al.) as a contender of `bench analytics`: the
//! in-memory reference users compare graph engines with. Its source is
//! copied into a scratch directory and built there with `make`; the
//! benchmark's CSR (generator ids, symmetric) becomes gapbs's serialized
//! `.sg` input, so its timed trials exclude any parsing, and its kernels get
//! the same BFS source and PageRank iterations as ours.
//!
//! gapbs holds the whole graph in RAM: it runs without a memory limit and
//! is reported as the in-memory reference. It prints no per-vertex result,
//! so its answers are not compared with ours. It has no k-core kernel: for
//! k-core the reference is Batagelj-Zaversnik's O(m) peeling, run by the
//! bench on the same `.sg` loaded into RAM (one thread; loading not timed),
//! whose core numbers are compared with ours.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use solidgraph_cli::util::CliResult;

use super::analytics::Algo;
use super::common::{BenchError, Layout, file_err};

/// gapbs's source, next to the repository (`../shared/peers/gapbs`).
pub(crate) const DEFAULT_SOURCE: &str = "/work/shared/peers/gapbs";

/// Built gapbs kernels and the graph in their input format.
pub(crate) struct Gap {
    bin: PathBuf,
    sg: PathBuf,
}

impl Gap {
    /// Copies `src` into `work/gapbs`, builds its bfs, cc and pr with
    /// `make`, and writes `work/graph.sg` from the benchmark's CSR (once).
    pub(crate) fn prepare(src: &Path, work: &Path, l: &Layout, nodes: u64, edges: u64) -> CliResult<Gap> {
        let bin = work.join("gapbs");
        std::fs::create_dir_all(work).map_err(file_err(work))?;
        if !bin.join("pr").exists() {
            run(Command::new("cp").arg("-rT").arg(src).arg(&bin), "copy gapbs")?;
            run(Command::new("make").arg("-C").arg(&bin).args(["-j2", "bfs", "cc", "pr"]), "build gapbs")?;
        }
        let sg = work.join("graph.sg");
        if !sg.exists() {
            write_sg(l, nodes, edges, &sg)?;
        }
        Ok(Gap { bin, sg })
    }

    /// Runs one trial of `algo` (BFS from `source`, PageRank `iterations`
    /// Jacobi iterations with tolerance 0 so none stops early); its
    /// "Trial Time" in seconds. k-core, which gapbs lacks, runs `kcore`
    /// and writes its core numbers to `out`.
    pub(crate) fn run(&self, algo: Algo, source: u64, iterations: u32, out: &Path) -> CliResult<f64> {
        let mut cmd = match algo {
            Algo::Bfs => {
                let mut c = Command::new(self.bin.join("bfs"));
                c.arg("-r").arg(source.to_string());
                c
            }
            Algo::Wcc => Command::new(self.bin.join("cc")),
            Algo::Pagerank => {
                let mut c = Command::new(self.bin.join("pr"));
                c.args(["-i", &iterations.to_string(), "-t", "0"]);
                c
            }
            Algo::Kcore => return self.kcore(out),
        };
        cmd.arg("-f").arg(&self.sg).args(["-n", "1"]);
        let out = run(&mut cmd, "run gapbs")?;
        let secs = out
            .lines()
            .find_map(|l| l.strip_prefix("Trial Time:").and_then(|t| t.trim().parse::<f64>().ok()))
            .ok_or_else(|| BenchError::Invalid(format!("gapbs printed no trial time: {out}")))?;
        Ok(secs)
    }

    /// The k-core reference: the `.sg` read into RAM (not timed), then
    /// Batagelj-Zaversnik's peeling timed; the core numbers (u32 per
    /// vertex, generator ids) go to `out`. Seconds of the peeling.
    fn kcore(&self, out: &Path) -> CliResult<f64> {
        let (rp, ci) = read_sg(&self.sg)?;
        let t = std::time::Instant::now();
        let core = super::analytics::baseline::kcore(&rp, &ci);
        let secs = t.elapsed().as_secs_f64();
        drop((rp, ci));
        let f = File::create(out).map_err(file_err(out))?;
        let mut w = BufWriter::with_capacity(1 << 20, f);
        core.iter().try_for_each(|c| w.write_all(&c.to_le_bytes())).and_then(|()| w.flush()).map_err(file_err(out))?;
        Ok(secs)
    }
}

/// Most vertices and edge entries `read_sg` takes (it holds them in RAM).
const SG_MAX: u64 = 1 << 34;

/// An undirected `.sg` (see `write_sg`) as in-memory CSR arrays: offsets
/// and neighbors, checked (monotone offsets ending at the edge count,
/// neighbors below the vertex count).
fn read_sg(path: &Path) -> CliResult<(Vec<u64>, Vec<u32>)> {
    let bad = |why: String| BenchError::Invalid(format!("{}: {why}", path.display()));
    let f = File::open(path).map_err(file_err(path))?;
    // SAFETY: the bench wrote the file and nothing writes it while mapped.
    let m = unsafe { memmap2::Mmap::map(&f) }.map_err(file_err(path))?;
    if m.len() < 17 || m[0] != 0 {
        return Err(bad("not an undirected .sg".into()).into());
    }
    let word = |at: usize| i64::from_le_bytes(m[at..at + 8].try_into().expect("8 bytes"));
    let (edges, nodes) = (word(1), word(9));
    if !(0..SG_MAX as i64).contains(&edges) || !(1..SG_MAX as i64).contains(&nodes) {
        return Err(bad(format!("{nodes} vertices, {edges} edge entries")).into());
    }
    let (edges, nodes) = (edges as usize, nodes as usize);
    let (rp_at, ci_at) = (17, 17 + 8 * (nodes + 1));
    if m.len() < ci_at + 4 * edges {
        return Err(bad(format!("{} bytes, short of {nodes} vertices and {edges} edges", m.len())).into());
    }
    let rp: Vec<u64> = solidgraph_engine::state::from_fn(nodes + 1, |i| word(rp_at + 8 * i) as u64);
    let ci: Vec<u32> = solidgraph_engine::state::from_fn(edges, |i| u32::from_le_bytes(m[ci_at + 4 * i..ci_at + 4 * i + 4].try_into().expect("4 bytes")));
    if rp[0] != 0 || rp[nodes] != edges as u64 || rp.windows(2).any(|w| w[0] > w[1]) {
        return Err(bad("offsets not monotone from 0 to the edge count".into()).into());
    }
    if ci.iter().any(|&u| u as usize >= nodes) {
        return Err(bad("a neighbor past the vertex count".into()).into());
    }
    Ok((rp, ci))
}

/// Runs `cmd`; its stdout, or an error with its stderr.
fn run(cmd: &mut Command, what: &str) -> CliResult<String> {
    let out = cmd.output().map_err(|e| BenchError::Invalid(format!("{what}: {e}")))?;
    if !out.status.success() {
        return Err(BenchError::Invalid(format!("{what} failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr))).into());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// gapbs's `.sg` (reader.h, `ReadSerializedGraph`): directed flag (1 byte),
/// i64 edge entries, i64 vertices, n + 1 i64 offsets, then i32 neighbors;
/// the benchmark's CSR files hold the same offsets (u64) and neighbors
/// (u32, all below 2^31 here), so they are copied as they are.
fn write_sg(l: &Layout, nodes: u64, edges: u64, path: &Path) -> CliResult {
    if nodes >= 1 << 31 {
        return Err(BenchError::Invalid("gapbs's .sg holds 32-bit signed ids".into()).into());
    }
    let tmp = path.with_extension("sg.tmp");
    let f = File::create(&tmp).map_err(file_err(&tmp))?;
    let mut w = BufWriter::with_capacity(1 << 20, f);
    let head = [&[0u8][..], &(edges as i64).to_le_bytes(), &(nodes as i64).to_le_bytes()].concat();
    w.write_all(&head).map_err(file_err(&tmp))?;
    for (src, len) in [(l.rowptr(), (nodes + 1) * 8), (l.colidx(4), edges * 4)] {
        // The files may be padded past their values.
        let mut r = File::open(&src).map_err(file_err(&src))?.take(len);
        let copied = std::io::copy(&mut r, &mut w).map_err(file_err(&src))?;
        if copied != len {
            return Err(BenchError::Invalid(format!("{}: {copied} bytes where {len} were expected", src.display())).into());
        }
    }
    w.flush().map_err(file_err(&tmp))?;
    drop(w);
    std::fs::rename(&tmp, path).map_err(file_err(path))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An undirected `.sg` of the symmetric edge list `edges` on `n` vertices.
    fn sg(path: &Path, n: usize, edges: &[(u32, u32)]) {
        let mut rows = vec![Vec::new(); n];
        for &(a, b) in edges {
            rows[a as usize].push(b);
            rows[b as usize].push(a);
        }
        let m: usize = rows.iter().map(Vec::len).sum();
        let mut bytes = vec![0u8];
        bytes.extend((m as i64).to_le_bytes());
        bytes.extend((n as i64).to_le_bytes());
        let mut off = 0u64;
        bytes.extend(off.to_le_bytes());
        for r in &rows {
            off += r.len() as u64;
            bytes.extend(off.to_le_bytes());
        }
        rows.iter().flatten().for_each(|&u| bytes.extend(u.to_le_bytes()));
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn kcore_reference_peels_a_clique_with_a_tail() {
        let dir = std::env::temp_dir().join(format!("sg-kcore-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("g.sg");
        // A 4-clique (1-4), a path 4-5-6 (5 is in the 2-core: both its
        // neighbors are), a triangle 6-7-8, a pendant 9 on 8, 0 alone.
        let edges = [(1, 2), (1, 3), (1, 4), (2, 3), (2, 4), (3, 4), (4, 5), (5, 6), (6, 7), (7, 8), (8, 6), (8, 9)];
        sg(&path, 10, &edges);
        let (rp, ci) = read_sg(&path).unwrap();
        assert_eq!(super::super::analytics::baseline::kcore(&rp, &ci), [0, 3, 3, 3, 3, 2, 2, 2, 2, 1]);
        // A header naming fewer vertices than the lists use is refused.
        let mut b = std::fs::read(&path).unwrap();
        b[9..17].copy_from_slice(&9i64.to_le_bytes());
        std::fs::write(&path, &b).unwrap();
        assert!(read_sg(&path).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
