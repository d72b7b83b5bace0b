//! GAP (gapbs, Beamer et al.) as a contender of `bench analytics`: the
//! in-memory reference users compare graph engines with. Its source is
//! copied into a scratch directory and built there with `make`; the
//! benchmark's CSR (generator ids, symmetric) becomes gapbs's serialized
//! `.sg` input, so its timed trials exclude any parsing, and its kernels get
//! the same BFS source and PageRank iterations as ours.
//!
//! gapbs holds the whole graph in RAM: it runs without a memory limit and
//! is reported as the in-memory reference. It prints no per-vertex result,
//! so its answers are not compared with ours; it has no k-core kernel.

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
    /// "Trial Time" in seconds, None for k-core (gapbs has none).
    pub(crate) fn run(&self, algo: Algo, source: u64, iterations: u32) -> CliResult<Option<f64>> {
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
            Algo::Kcore => return Ok(None),
        };
        cmd.arg("-f").arg(&self.sg).args(["-n", "1"]);
        let out = run(&mut cmd, "run gapbs")?;
        let secs = out
            .lines()
            .find_map(|l| l.strip_prefix("Trial Time:").and_then(|t| t.trim().parse::<f64>().ok()))
            .ok_or_else(|| BenchError::Invalid(format!("gapbs printed no trial time: {out}")))?;
        Ok(Some(secs))
    }
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
