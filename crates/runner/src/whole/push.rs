//! The push pass of a level whose edge ops are all linear aggregations
//! (`spmm` / `spmm_gemm` with sum or mean, no edge values: GCN, GraphSAGE's
//! mean, GIN, NGCF): the lower level's rows are read once per destination
//! range, in source order, and each source row is scattered into the
//! accumulators of the destinations it has edges to.
//!
//! The destinations are cut into ranges whose accumulators fit the level's
//! memory (`chunk_bytes / 2 + row_cache_bytes`: the pull path's pinned
//! pages are not needed here). Per range, one pass over the out-lists in
//! source chunks (`Store::read_range`, `chunk_bytes / 4` each) reads the rows of
//! the sources with an edge into the range (and of the range's own
//! vertices, for self-loops), so with one range the lower level's rows are
//! read once, and with k ranges each pass reads only the sources it needs
//! while the out-lists are read k times. The accumulators are cut into
//! stripes of destinations, one rayon task each, so no two threads add into
//! one row. Then the level's other ops run per destination chunk (`chunk_bytes
//! / 4`) on the accumulated rows, as in the pull path. Max and attention
//! (`sddmm`, `edge_softmax`, edge values) are not linear and keep the pull path.

use rayon::prelude::*;

use super::*;
use crate::block::EdgeView;
use crate::dfg::Reduce;

/// One linear aggregation step of a pushed level.
pub(super) struct Agg {
    step: usize,
    src: SlotKey,
    cols: usize,
    loops: SelfLoops,
    weighted: bool,
    sym: bool,
    mean: bool,
}

/// The level's aggregations when every op of it that reads edges is a linear
/// aggregation of a lower level's rows run by a built-in kernel; None: the pull path.
/// (A plugin's aggregation kernel is only run by the pull path.)
pub(super) fn aggregations(model: &Model, sched: &Schedule, l: usize) -> Option<Vec<Agg>> {
    let plan = model.plan();
    let mut aggs = Vec::new();
    for (s, step) in plan.steps.iter().enumerate().filter(|(s, _)| sched.level[*s] == l) {
        let Some((_, loops, weighted, norm)) = step.op.edges() else { continue };
        let reduce = match &step.op {
            Op::Spmm { reduce, edge_values: None, .. } | Op::SpmmGemm { reduce, .. } => *reduce,
            _ => return None,
        };
        let builtin = matches!(model.kernel(s).name(), "cpu" | "reference");
        let src = match step.args[0] {
            Slot::Input(i) => SlotKey::Input(i),
            Slot::Value(v) if sched.level[v] < l => SlotKey::Value(v),
            _ => return None,
        };
        if reduce == Reduce::Max || !builtin {
            return None;
        }
        let cols = match src {
            SlotKey::Input(i) => model.inputs()[i].cols,
            SlotKey::Value(v) => plan.steps[v].info.cols,
        };
        aggs.push(Agg { step: s, src, cols, loops, weighted, sym: norm == Norm::Sym, mean: reduce == Reduce::Mean });
    }
    (!aggs.is_empty()).then_some(aggs)
}

/// Whether any aggregation of `aggs` adds self-loops weighted by the store's edge weights.
pub(super) fn weighted_loops(aggs: &[Agg]) -> bool {
    aggs.iter().any(|a| a.loops == SelfLoops::Add && a.weighted)
}

/// `1 / sqrt(deg)` (0 where deg is 0) per vertex, for GCN's symmetric normalisation.
fn inverse_sqrt(degs: &SrcDegrees, key: (SelfLoops, bool)) -> Vec<f32> {
    let (_, d) = degs.iter().find(|(k, _)| *k == key).expect("the degree pass covers every symmetric view of the levels left");
    d.iter().map(|&d| if d > 0.0 { 1.0 / d.sqrt() } else { 0.0 }).collect()
}

/// One edge of a source chunk into a stripe: source row in the chunk's
/// gather, destination offset in the range, edge weight.
type Edge = (u32, u32, f32);

/// Runs level `l` by pushing (see the module docs); the caller has checked
/// `aggs` with [`aggregations`]. Returns the destination ranges and the bytes written.
pub(super) fn run_level(
    lv: &mut Level<'_>,
    aggs: &[Agg],
    loop_weights: &[f32],
    o: &WholeOptions,
    writers: &mut [(usize, RowWriter)],
    progress: &mut dyn FnMut(Progress),
) -> Result<(u64, u64)> {
    let n = lv.store.num_nodes();
    let acc_row: u64 = aggs.iter().map(|a| a.cols as u64 * 4).sum::<u64>() + 8;
    let acc_budget = o.chunk_bytes as u64 / 2 + o.row_cache_bytes;
    let range_rows = (acc_budget / acc_row).max(1);
    let inv: Vec<Option<Vec<f32>>> = aggs.iter().map(|a| a.sym.then(|| inverse_sqrt(lv.degrees, (a.loops, a.weighted)))).collect();
    let (mut ranges, mut written) = (0u64, 0u64);
    let mut lo = 0;
    while lo < n {
        let hi = (lo + range_rows).min(n);
        let acc = accumulate(lv, aggs, &inv, loop_weights, lo, hi, o.chunk_bytes as u64 / 4)?;
        written += finish_range(lv, aggs, acc, lo, hi, o.chunk_bytes as u64 / 4, writers, progress)?;
        ranges += 1;
        lo = hi;
    }
    Ok((ranges, written))
}

/// The accumulated rows of destinations `lo..hi` per aggregation (sum, or
/// mean already divided), and the edge counts behind them.
struct Acc {
    sums: Vec<Tensor>,
    /// Per destination, in-edges that are not loops and loop edges (for means).
    counts: Option<(Vec<u32>, Vec<u32>)>,
}

/// One pass over the out-lists and the sources' rows for destinations `lo..hi`.
#[allow(clippy::too_many_arguments)]
fn accumulate(lv: &mut Level<'_>, aggs: &[Agg], inv: &[Option<Vec<f32>>], loop_weights: &[f32], lo: u64, hi: u64, chunk: u64) -> Result<Acc> {
    let store = lv.store;
    let n = store.num_nodes();
    let m = (hi - lo) as usize;
    let weighted = aggs.iter().any(|a| a.weighted);
    let loops = aggs.iter().any(|a| a.loops == SelfLoops::Add);
    let mut acc =
        Acc { sums: aggs.iter().map(|a| Tensor::zeros(m, a.cols)).collect(), counts: aggs.iter().any(|a| a.mean).then(|| (vec![0u32; m], vec![0u32; m])) };
    let stripes = (rayon::current_num_threads() * 4).clamp(1, m.max(1));
    let stripe_rows = m.div_ceil(stripes).max(1);
    let mut buckets: Vec<(Vec<Edge>, Vec<u32>)> = (0..m.div_ceil(stripe_rows)).map(|_| (Vec::new(), Vec::new())).collect();
    let per_src: u64 = aggs.iter().map(|a| a.cols as u64 * 4).sum::<u64>() + 24;
    let limit = ChunkLimit { pages: CHUNK_PAGES, edges: (chunk / 24).max(1), vertices: (chunk / per_src).max(1) };
    let mut spare = Csr::default();
    for (slo, shi) in store.chunk_ranges(Direction::Out, limit).map_err(EngineError::from)? {
        let csr = store.read_range(Direction::Out, slo, shi, weighted, false, spare).map_err(EngineError::from)?;
        check_csr(&csr, slo, shi, n)?;
        let into = |d: u64| (lo..hi).contains(&d);
        // The sources this range needs, in id order: an edge into it, or a loop of its own.
        let mut ids: Vec<u64> = Vec::new();
        for (i, s) in (slo..shi).enumerate() {
            let es = &csr.indices[csr.indptr[i] as usize..csr.indptr[i + 1] as usize];
            if (loops && into(s)) || es.iter().any(|&d| into(d)) {
                ids.push(s);
            }
        }
        if ids.is_empty() {
            spare = csr;
            continue;
        }
        for (edges, own) in &mut buckets {
            edges.clear();
            own.clear();
        }
        for (k, &s) in ids.iter().enumerate() {
            let i = (s - slo) as usize;
            for e in csr.indptr[i] as usize..csr.indptr[i + 1] as usize {
                let d = csr.indices[e];
                if into(d) {
                    let off = (d - lo) as usize;
                    let w = csr.weights.as_ref().map_or(1.0, |w| w[e]);
                    buckets[off / stripe_rows].0.push((k as u32, off as u32, w));
                }
            }
            if loops && into(s) {
                buckets[(s - lo) as usize / stripe_rows].1.push(k as u32);
            }
        }
        let rows = gather(lv, aggs, &ids)?;
        scatter(&mut acc, aggs, &rows, &ids, &buckets, inv, loop_weights, lo, stripe_rows);
        spare = csr;
    }
    if let Some((plain, own)) = &acc.counts {
        for (a, sum) in aggs.iter().zip(&mut acc.sums) {
            if a.mean {
                for (i, row) in sum.data.chunks_exact_mut(a.cols).enumerate() {
                    let c = plain[i] + if a.loops == SelfLoops::Add { 1 } else { own[i] };
                    if c > 1 {
                        let inv = 1.0 / c as f32;
                        row.iter_mut().for_each(|x| *x *= inv);
                    }
                }
            }
        }
    }
    Ok(acc)
}

/// The rows of `ids` of each aggregation's source operand, once per operand.
fn gather(lv: &mut Level<'_>, aggs: &[Agg], ids: &[u64]) -> Result<HashMap<SlotKey, Tensor>> {
    let mut rows = HashMap::new();
    for a in aggs {
        if rows.contains_key(&a.src) {
            continue;
        }
        let t = match a.src {
            SlotKey::Input(i) => {
                let r = lv.store.tensor(&lv.features[i], ids).map_err(EngineError::from)?;
                Tensor::from_rows(&lv.model.inputs()[i].name, &r)?
            }
            SlotKey::Value(v) => lv.readers[&v].read(ids)?,
        };
        lv.row_bytes += (t.data.len() * 4) as u64;
        rows.insert(a.src, t);
    }
    Ok(rows)
}

/// One stripe's slice of every accumulator, and of the edge and loop counts (for means).
type StripeParts<'a> = (Vec<&'a mut [f32]>, Option<(&'a mut [u32], &'a mut [u32])>);

/// Adds one source chunk's edges into the accumulators, a rayon task per stripe of destinations.
#[allow(clippy::too_many_arguments)]
fn scatter(
    acc: &mut Acc,
    aggs: &[Agg],
    rows: &HashMap<SlotKey, Tensor>,
    ids: &[u64],
    buckets: &[(Vec<Edge>, Vec<u32>)],
    inv: &[Option<Vec<f32>>],
    loop_weights: &[f32],
    lo: u64,
    stripe_rows: usize,
) {
    // Per stripe: its slice of every accumulator and of the counts.
    let mut parts: Vec<StripeParts> = buckets.iter().map(|_| (Vec::new(), None)).collect();
    for (a, sum) in aggs.iter().zip(&mut acc.sums) {
        for (k, part) in sum.data.chunks_mut(stripe_rows * a.cols).enumerate() {
            parts[k].0.push(part);
        }
    }
    if let Some((plain, own)) = &mut acc.counts {
        for (k, (p, q)) in plain.chunks_mut(stripe_rows).zip(own.chunks_mut(stripe_rows)).enumerate() {
            parts[k].1 = Some((p, q));
        }
    }
    let x: Vec<&Tensor> = aggs.iter().map(|a| &rows[&a.src]).collect();
    parts.into_par_iter().zip(buckets).enumerate().for_each(|(k, ((mut sums, mut counts), (edges, own)))| {
        let base = k * stripe_rows;
        for &(ls, off, w) in edges {
            let (s, d) = (ids[ls as usize], lo + off as u64);
            let r = off as usize - base;
            if let Some((plain, loops)) = counts.as_mut() {
                if s == d { loops[r] += 1 } else { plain[r] += 1 }
            }
            for (j, a) in aggs.iter().enumerate() {
                if s == d && a.loops == SelfLoops::Add {
                    continue; // replaced by the one loop below
                }
                let mut c = if a.weighted { w } else { 1.0 };
                if let Some(inv) = &inv[j] {
                    c *= inv[s as usize] * inv[d as usize];
                }
                axpy(&mut sums[j][r * a.cols..(r + 1) * a.cols], c, x[j].row(ls as usize));
            }
        }
        for &ls in own {
            let d = ids[ls as usize];
            let r = (d - lo) as usize - base;
            for (j, a) in aggs.iter().enumerate().filter(|(_, a)| a.loops == SelfLoops::Add) {
                let mut c = if a.weighted { loop_weights[d as usize] } else { 1.0 };
                if let Some(inv) = &inv[j] {
                    c *= inv[d as usize] * inv[d as usize];
                }
                axpy(&mut sums[j][r * a.cols..(r + 1) * a.cols], c, x[j].row(ls as usize));
            }
        }
    });
}

fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    y.iter_mut().zip(x).for_each(|(y, x)| *y += a * x);
}

/// Runs the level's other ops on destinations `lo..hi` in chunks, from the
/// accumulated rows, and appends what the level writes; returns the bytes written.
#[allow(clippy::too_many_arguments)]
fn finish_range(
    lv: &mut Level<'_>,
    aggs: &[Agg],
    acc: Acc,
    lo: u64,
    hi: u64,
    chunk: u64,
    writers: &mut [(usize, RowWriter)],
    progress: &mut dyn FnMut(Progress),
) -> Result<u64> {
    let (_, per_dst) = row_costs(lv.model, lv.sched, &lv.need, lv.l);
    let per_row = per_dst as u64 + aggs.iter().map(|a| a.cols as u64 * 4).sum::<u64>();
    let step = (chunk / per_row).max(1);
    let mut written = 0u64;
    let mut a = lo;
    while a < hi {
        let b = (a + step).min(hi);
        let m = (b - a) as usize;
        let ids: Vec<u64> = (a..b).collect();
        let block = Block::new(m, m, vec![0; m + 1], Vec::new(), None)?;
        let loaded = lv.load(&ids, m)?;
        let mut pre: HashMap<usize, Tensor> = HashMap::new();
        for (g, sum) in aggs.iter().zip(&acc.sums) {
            let from = (a - lo) as usize * g.cols;
            pre.insert(g.step, Tensor::new(m, g.cols, sum.data[from..from + m * g.cols].to_vec()));
        }
        let mut out = lv.run_chunk(&block, &loaded, &mut pre)?;
        assert!(pre.is_empty(), "every pushed aggregation is consumed by its step");
        for (v, w) in writers.iter_mut() {
            let t = out.remove(v).expect("every written value comes out of the chunk");
            written += (t.data.len() * 4) as u64;
            w.append(&t)?;
        }
        progress(Progress { level: lv.l, levels: lv.sched.levels, done: b, total: lv.store.num_nodes() });
        a = b;
    }
    Ok(written)
}

/// One loop of coefficient 1 per row: `spmm_gemm` over it is the GEMM of rows already aggregated.
pub(super) fn identity(m: usize) -> EdgeView {
    EdgeView { n_dst: m, n_src: m, indptr: (0..=m).collect(), indices: (0..m as u32).collect(), coef: vec![1.0; m] }
}
