//! Property paths by levels. spareval walks a path one node at a time
//! (a lookup per node, a depth-first closure), so each step of a closure
//! is a dependent page read. Here a path is evaluated for a set of anchor
//! nodes at once: each step reads the lists of the whole frontier in one
//! batched adjacency read (`Snapshot::step`), a closure is a breadth-first
//! search by levels with a visited set of (anchor, node) pairs.
//!
//! The hook: before spareval plans a query, [`rewrite`] replaces each
//! property-path pattern by a triple pattern whose predicate is a per-query
//! IRI naming the path; the dataset answers that triple pattern with
//! [`Eval::pairs`]. The results equal spareval's own path evaluation
//! (same multiplicities: a sequence keeps one result per middle node, an
//! alternative and a closure are distinct per anchor; `p*` and `p?` give
//! the zero-length pair only for a node of the graph).

use rustc_hash::{FxHashMap, FxHashSet};
use solidgraph_store::Direction;
use spareval::CancellationToken;
use spargebra::Query;
use spargebra::algebra::{GraphPattern, PropertyPathExpression};
use spargebra::term::{NamedNode, NamedNodePattern, TriplePattern};

use crate::error::{RdfError, Result};
use crate::state::{GraphSel, Snapshot};

/// Pairs one path evaluation may hold (16 bytes each): a path over a
/// whole graph with both ends open can be quadratic in its nodes.
pub const MAX_PAIRS: usize = 1 << 25;

/// Property paths per query (each is a pattern of the query text).
const MAX_PATHS: usize = 1 << 12;

/// A property path over term ids.
#[derive(Debug, Clone)]
pub enum Path {
    Pred(u64),
    Rev(Box<Path>),
    Seq(Box<Path>, Box<Path>),
    Alt(Box<Path>, Box<Path>),
    Star(Box<Path>),
    Plus(Box<Path>),
    Opt(Box<Path>),
    Neg(Vec<u64>),
}

impl Path {
    /// Compiles `e`, with `id` giving each IRI's term id.
    pub fn compile(e: &PropertyPathExpression, id: &mut dyn FnMut(&NamedNode) -> Result<u64>) -> Result<Path> {
        use PropertyPathExpression as E;
        let b = |p: Path| Box::new(p);
        Ok(match e {
            E::NamedNode(n) => Path::Pred(id(n)?),
            E::Reverse(a) => Path::Rev(b(Path::compile(a, id)?)),
            E::Sequence(x, y) => Path::Seq(b(Path::compile(x, id)?), b(Path::compile(y, id)?)),
            E::Alternative(x, y) => Path::Alt(b(Path::compile(x, id)?), b(Path::compile(y, id)?)),
            E::ZeroOrMore(a) => Path::Star(b(Path::compile(a, id)?)),
            E::OneOrMore(a) => Path::Plus(b(Path::compile(a, id)?)),
            E::ZeroOrOne(a) => Path::Opt(b(Path::compile(a, id)?)),
            E::NegatedPropertySet(ps) => Path::Neg(ps.iter().map(&mut *id).collect::<Result<_>>()?),
        })
    }
}

/// Replaces the property-path patterns of `q` (outside SERVICE, EXISTS
/// and LATERAL, which spareval evaluates itself) by triple patterns whose
/// predicate is `prefix` followed by the path's index; returns the paths
/// in index order. A top-level negated property set stays with spareval:
/// under `GRAPH ?g` with both ends bound it yields one row per quad, not
/// one per graph.
pub fn rewrite(q: &mut Query, prefix: &str) -> Vec<PropertyPathExpression> {
    let mut paths = Vec::new();
    let pattern = match q {
        Query::Select { pattern, .. } | Query::Construct { pattern, .. } | Query::Describe { pattern, .. } | Query::Ask { pattern, .. } => pattern,
    };
    walk(pattern, prefix, &mut paths);
    paths
}

fn walk(p: &mut GraphPattern, prefix: &str, paths: &mut Vec<PropertyPathExpression>) {
    use GraphPattern as G;
    match p {
        G::Path { subject, path, object } => {
            let mut top = &*path;
            while let PropertyPathExpression::Reverse(a) = top {
                top = a;
            }
            if matches!(top, PropertyPathExpression::NegatedPropertySet(_)) || paths.len() >= MAX_PATHS {
                return;
            }
            let predicate = NamedNodePattern::NamedNode(NamedNode::new_unchecked(format!("{prefix}{}", paths.len())));
            paths.push(path.clone());
            *p = G::Bgp { patterns: vec![TriplePattern { subject: subject.clone(), predicate, object: object.clone() }] };
        }
        G::Join { left, right } | G::Union { left, right } | G::Minus { left, right } | G::LeftJoin { left, right, .. } => {
            walk(left, prefix, paths);
            walk(right, prefix, paths);
        }
        G::Filter { inner, .. }
        | G::Graph { inner, .. }
        | G::Extend { inner, .. }
        | G::OrderBy { inner, .. }
        | G::Project { inner, .. }
        | G::Distinct { inner }
        | G::Reduced { inner }
        | G::Slice { inner, .. }
        | G::Group { inner, .. } => walk(inner, prefix, paths),
        _ => {}
    }
}

/// Evaluates paths in one graph of a snapshot.
pub struct Eval<'a> {
    pub snap: &'a Snapshot,
    pub graph: GraphSel,
    pub cancel: &'a CancellationToken,
    /// The query's timeout, for the error when `cancel` fires.
    pub timeout: Option<std::time::Duration>,
}

type Pairs = Vec<(u64, u64)>;

impl Eval<'_> {
    /// The (start, end) pairs of `path`: from `start` if bound, to `end` if
    /// bound (both: at most the one pair), else over the whole graph.
    pub fn pairs(&self, path: &Path, start: Option<u64>, end: Option<u64>) -> Result<Pairs> {
        Ok(match (start, end) {
            (Some(s), Some(e)) => {
                let found = self.eval(path, &[s], true)?.iter().any(|&(_, x)| x == e);
                if found { vec![(s, e)] } else { Vec::new() }
            }
            (Some(s), None) => self.eval(path, &[s], true)?,
            (None, Some(e)) => self.eval(path, &[e], false)?.into_iter().map(|(e, s)| (s, e)).collect(),
            (None, None) => {
                let mut starts = self.candidates(path, true)?;
                starts.sort_unstable();
                starts.dedup();
                self.eval(path, &starts, true)?
            }
        })
    }

    /// (anchor, reached) pairs of `path` from each of `anchors` (distinct):
    /// forward, the anchor is the start; backward, the end.
    fn eval(&self, path: &Path, anchors: &[u64], fwd: bool) -> Result<Pairs> {
        if self.cancel.is_cancelled() {
            return Err(RdfError::Timeout(self.timeout.unwrap_or_default()));
        }
        let out = match path {
            Path::Pred(p) => self.step(anchors, fwd, &|x| x == *p)?,
            Path::Neg(ps) => self.step(anchors, fwd, &|x| !ps.contains(&x))?,
            Path::Rev(a) => self.eval(a, anchors, !fwd)?,
            Path::Seq(a, b) => {
                let (first, second) = if fwd { (a, b) } else { (b, a) };
                let head = self.eval(first, anchors, fwd)?;
                let tail = self.eval(second, &ends(&head), fwd)?;
                join(&head, tail)?
            }
            Path::Alt(a, b) => {
                let mut r = self.eval(a, anchors, fwd)?;
                r.extend(self.eval(b, anchors, fwd)?);
                r.sort_unstable();
                r.dedup();
                r
            }
            Path::Plus(a) => {
                let mut first = self.eval(a, anchors, fwd)?;
                first.sort_unstable();
                first.dedup();
                self.closure(a, first, fwd)?
            }
            Path::Star(a) => {
                let seeds = self.graph_nodes(anchors)?.into_iter().map(|x| (x, x)).collect();
                self.closure(a, seeds, fwd)?
            }
            Path::Opt(a) => {
                let nodes = self.graph_nodes(anchors)?;
                let mut r: Pairs = nodes.iter().map(|&x| (x, x)).collect();
                r.extend(self.eval(a, &nodes, fwd)?);
                r.sort_unstable();
                r.dedup();
                r
            }
        };
        check_size(out.len())?;
        Ok(out)
    }

    /// One step along the predicates `pred` passes, from all of `anchors`
    /// in one batched read.
    fn step(&self, anchors: &[u64], fwd: bool, pred: &dyn Fn(u64) -> bool) -> Result<Pairs> {
        let dir = if fwd { Direction::Out } else { Direction::In };
        Ok(self.snap.step(anchors, dir, pred, self.graph)?.into_iter().map(|[v, n, _, _]| (v, n)).collect())
    }

    /// Breadth-first closure of `a` from the pairs `seeds` (distinct):
    /// every (anchor, node) reachable by repeating `a` from a seed, the
    /// seeds included. Each level is one evaluation of `a` over the
    /// level's distinct nodes.
    fn closure(&self, a: &Path, seeds: Pairs, fwd: bool) -> Result<Pairs> {
        let mut seen: FxHashSet<(u64, u64)> = seeds.iter().copied().collect();
        let mut level = seeds;
        while !level.is_empty() {
            let next = self.eval(a, &ends(&level), fwd)?;
            let mut by_node: FxHashMap<u64, Vec<u64>> = FxHashMap::default();
            for (m, e) in next {
                by_node.entry(m).or_default().push(e);
            }
            let mut fresh = Vec::new();
            for &(x, m) in &level {
                for &e in by_node.get(&m).map(Vec::as_slice).unwrap_or(&[]) {
                    if seen.insert((x, e)) {
                        fresh.push((x, e));
                    }
                }
            }
            check_size(seen.len())?;
            level = fresh;
        }
        Ok(seen.into_iter().collect())
    }

    /// The anchors that are a subject or an object of a quad of the graph
    /// (zero-length paths match only those, as in spareval).
    fn graph_nodes(&self, anchors: &[u64]) -> Result<Vec<u64>> {
        let any = |_: u64| true;
        let mut hit: FxHashSet<u64> = self.snap.step(anchors, Direction::Out, &any, self.graph)?.into_iter().map(|q| q[0]).collect();
        let rest: Vec<u64> = anchors.iter().copied().filter(|x| !hit.contains(x)).collect();
        hit.extend(self.snap.step(&rest, Direction::In, &any, self.graph)?.into_iter().map(|q| q[0]));
        Ok(anchors.iter().copied().filter(|x| hit.contains(x)).collect())
    }

    /// Nodes a path with both ends open can start from (forward) or end at:
    /// every node with a first step, so each is evaluated once.
    fn candidates(&self, path: &Path, fwd: bool) -> Result<Vec<u64>> {
        let ends_of = |p: Option<u64>| -> Result<Vec<u64>> {
            let quads = self.snap.find(None, p, None, self.graph)?;
            Ok(if fwd { quads.iter().map(|q| q[0]).collect() } else { quads.iter().map(|q| q[2]).collect() })
        };
        Ok(match path {
            Path::Pred(p) => ends_of(Some(*p))?,
            Path::Neg(_) => ends_of(None)?,
            Path::Rev(a) => self.candidates(a, !fwd)?,
            Path::Seq(a, b) => self.candidates(if fwd { a } else { b }, fwd)?,
            Path::Alt(a, b) => {
                let mut v = self.candidates(a, fwd)?;
                v.extend(self.candidates(b, fwd)?);
                v
            }
            Path::Plus(a) => self.candidates(a, fwd)?,
            Path::Star(_) | Path::Opt(_) => {
                let quads = self.snap.find(None, None, None, self.graph)?;
                quads.iter().flat_map(|q| [q[0], q[2]]).collect()
            }
        })
    }
}

/// The distinct second members of `pairs`.
fn ends(pairs: &[(u64, u64)]) -> Vec<u64> {
    let mut v: Vec<u64> = pairs.iter().map(|p| p.1).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// (x, e) for each (x, m) of `head` and (m, e) of `tail`, with multiplicity.
fn join(head: &[(u64, u64)], mut tail: Pairs) -> Result<Pairs> {
    tail.sort_unstable();
    let mut out = Vec::new();
    for &(x, m) in head {
        let lo = tail.partition_point(|t| t.0 < m);
        for &(_, e) in tail[lo..].iter().take_while(|t| t.0 == m) {
            out.push((x, e));
        }
        check_size(out.len())?;
    }
    Ok(out)
}

fn check_size(n: usize) -> Result<()> {
    if n > MAX_PAIRS {
        return Err(RdfError::Evaluation(format!("a property path yields more than {MAX_PAIRS} pairs; bind one of its ends")));
    }
    Ok(())
}
