//! `solidgraph apply PATH --updates FILE`: applies a text file of updates.
//!
//! Lines: `+e u v [w]` add edge, `-e u v` delete edge, `w u v w` set a weight,
//! `+v id` add vertex (ids must come in order: the next free id), `-v id`
//! delete vertex; `#` comments. Consecutive lines of one kind form one batch
//! (one WAL record); everything is made durable before the command returns.
//! A bad line stops the run with its line number; batches before it stay.
//!
//! `solidgraph merge PATH`: folds the pending updates into pages.

use std::io::BufRead;
use std::path::PathBuf;

use clap::Args;
use solidgraph_store::{Front, OpenOptions, Store};

use crate::util::CliResult;

#[derive(Args)]
pub struct MergeArgs {
    pub path: PathBuf,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn merge_cmd(a: MergeArgs) -> CliResult {
    let s = Store::open(&a.path, &OpenOptions { writable: true, cache_bytes: 64 << 20, delta_budget: 0, ..Default::default() })?;
    let r = s.merge()?;
    if a.json {
        println!(
            "{}",
            serde_json::json!({"updates": r.updates, "lists": r.lists, "pages_written": r.pages_written, "bytes_written": r.bytes_written,
                "pages_retired": r.pages_retired, "total_pages": r.total_pages, "free_pages": r.free_pages, "epoch": r.epoch, "seconds": r.seconds})
        );
    } else if r.updates == 0 {
        println!("nothing to merge: no pending updates");
    } else {
        println!(
            "merged {} update batches: {} lists rewritten, {} pages written ({:.1} MiB), {} pages freed; epoch {}, {} pages ({} free) in {:.2} s",
            r.updates,
            r.lists,
            r.pages_written,
            r.bytes_written as f64 / (1u64 << 20) as f64,
            r.pages_retired,
            r.epoch,
            r.total_pages,
            r.free_pages,
            r.seconds
        );
    }
    Ok(())
}

#[derive(Args)]
pub struct ApplyArgs {
    pub path: PathBuf,
    /// The update file (lines `+e u v [w]`, `-e u v`, `w u v w`, `+v id`, `-v id`; `#` comments).
    #[arg(long)]
    pub updates: PathBuf,
}

#[derive(PartialEq, Clone, Copy, Debug)]
enum Kind {
    AddEdge,
    DelEdge,
    Weight,
    AddVertex,
    DelVertex,
}

#[derive(Default)]
struct Batch {
    a: Vec<u64>,
    b: Vec<u64>,
    w: Vec<f32>,
    has_w: bool,
    first_line: u64,
}

fn flush(s: &Store, kind: Kind, batch: &mut Batch, file: &str) -> CliResult<u64> {
    if batch.a.is_empty() {
        return Ok(0);
    }
    let at = |e: solidgraph_store::StoreError| format!("{file}: batch starting at line {}: {}", batch.first_line, e.message(Front::Cli));
    // Ids in the file are the user's; a store imported with a degree order
    // numbers vertices its own way.
    if kind != Kind::AddVertex {
        s.to_internal(&mut batch.a).map_err(at)?;
        s.to_internal(&mut batch.b).map_err(at)?;
    }
    match kind {
        Kind::AddEdge => s.add_edges(&batch.a, &batch.b, batch.has_w.then_some(&batch.w[..]), None, false).map_err(at)?,
        Kind::DelEdge => s.delete_edges(&batch.a, &batch.b, false).map_err(at)?,
        Kind::Weight => s.update_edge_weights(&batch.a, &batch.b, &batch.w, false).map_err(at)?,
        Kind::AddVertex => {
            let next = s.num_nodes();
            if let Some((i, &bad)) = batch.a.iter().enumerate().find(|&(i, &v)| v != next + i as u64) {
                return Err(format!("{file}:{}: +v {bad}: the next vertex id is {}", batch.first_line + i as u64, next + i as u64).into());
            }
            s.add_vertices(batch.a.len() as u64, &[], false).map_err(at)?;
        }
        Kind::DelVertex => s.delete_vertices(&batch.a, false).map_err(at)?,
    }
    let n = batch.a.len() as u64;
    *batch = Batch::default();
    Ok(n)
}

pub fn apply_cmd(a: ApplyArgs) -> CliResult {
    let s = Store::open(&a.path, &OpenOptions { writable: true, cache_bytes: 64 << 20, ..Default::default() })?;
    let name = a.updates.display().to_string();
    let f = std::fs::File::open(&a.updates).map_err(|e| format!("{name}: {e}"))?;
    let mut kind: Option<Kind> = None;
    let mut batch = Batch::default();
    let mut applied = 0u64;
    for (i, line) in std::io::BufReader::new(f).lines().enumerate() {
        let no = i as u64 + 1;
        let line = line.map_err(|e| format!("{name}:{no}: {e}"))?;
        let t: Vec<&str> = line.split_whitespace().collect();
        if t.is_empty() || t[0].starts_with('#') {
            continue;
        }
        let bad = |why: &str| format!("{name}:{no}: {why}: {line:?}");
        let id = |k: usize| -> Result<u64, String> { t.get(k).ok_or_else(|| bad("missing vertex id"))?.parse().map_err(|_| bad("not a vertex id")) };
        let (k, x, y, w) = match t[0] {
            "+e" => (Kind::AddEdge, id(1)?, id(2)?, t.get(3).map(|w| w.parse::<f32>().map_err(|_| bad("not a weight"))).transpose()?),
            "-e" => (Kind::DelEdge, id(1)?, id(2)?, None),
            "w" => (Kind::Weight, id(1)?, id(2)?, Some(t.get(3).ok_or_else(|| bad("missing weight"))?.parse().map_err(|_| bad("not a weight"))?)),
            "+v" => (Kind::AddVertex, id(1)?, 0, None),
            "-v" => (Kind::DelVertex, id(1)?, 0, None),
            _ => return Err(bad("unknown update (expected +e, -e, w, +v or -v)").into()),
        };
        if kind != Some(k) {
            if let Some(prev) = kind {
                applied += flush(&s, prev, &mut batch, &name)?;
            }
            kind = Some(k);
        }
        if batch.a.is_empty() {
            batch.first_line = no;
        }
        batch.a.push(x);
        batch.b.push(y);
        batch.has_w |= w.is_some();
        batch.w.push(w.unwrap_or(1.0));
    }
    if let Some(k) = kind {
        applied += flush(&s, k, &mut batch, &name)?;
    }
    s.flush()?;
    println!("applied {applied} updates durably; the graph now has {} vertices and {} edges", s.num_nodes(), s.num_edges());
    Ok(())
}
