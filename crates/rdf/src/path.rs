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
use spargebra::term::{BlankNode, NamedNode, NamedNodePattern, TermPattern, TriplePattern};

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

/// A path the rewrite took out of a query.
#[derive(Debug, Clone)]
pub struct Rewritten {
    pub expr: PropertyPathExpression,
    /// Set for a chain of triple patterns (a BGP's join semantics): with
    /// both ends bound it yields one row per path, not one row.
    pub bag: bool,
}

/// Replaces the property-path patterns of `q` (outside SERVICE, EXISTS
/// and LATERAL, which spareval evaluates itself) and the chains of its
/// basic graph patterns (see [`chains`]) by triple patterns whose
/// predicate is `prefix` followed by the path's index; returns the paths
/// in index order. A top-level negated property set stays with spareval:
/// under `GRAPH ?g` with both ends bound it yields one row per quad, not
/// one per graph.
pub fn rewrite(q: &mut Query, prefix: &str) -> Vec<Rewritten> {
    let mut paths = Vec::new();
    // The query's text counts each blank node's occurrences anywhere in it
    // (a count too high only leaves a chain to spareval).
    let text = q.to_string();
    let pattern = match q {
        Query::Select { pattern, .. } | Query::Construct { pattern, .. } | Query::Describe { pattern, .. } | Query::Ask { pattern, .. } => pattern,
    };
    let mut rw = Rewrite { prefix, text: &text, paths: &mut paths };
    rw.walk(pattern);
    paths
}

struct Rewrite<'a> {
    prefix: &'a str,
    text: &'a str,
    paths: &'a mut Vec<Rewritten>,
}

impl Rewrite<'_> {
    /// A triple pattern standing for path `expr` (None past [`MAX_PATHS`]).
    fn stand_in(&mut self, subject: &TermPattern, expr: PropertyPathExpression, bag: bool, object: &TermPattern) -> Option<TriplePattern> {
        if self.paths.len() >= MAX_PATHS {
            return None;
        }
        let predicate = NamedNodePattern::NamedNode(NamedNode::new_unchecked(format!("{}{}", self.prefix, self.paths.len())));
        self.paths.push(Rewritten { expr, bag });
        Some(TriplePattern { subject: subject.clone(), predicate, object: object.clone() })
    }

    fn walk(&mut self, p: &mut GraphPattern) {
        use GraphPattern as G;
        match p {
            G::Path { subject, path, object } => {
                let mut top = &*path;
                while let PropertyPathExpression::Reverse(a) = top {
                    top = a;
                }
                if matches!(top, PropertyPathExpression::NegatedPropertySet(_)) {
                    return;
                }
                let (subject, path, object) = (subject.clone(), path.clone(), object.clone());
                if let Some(t) = self.stand_in(&subject, path, false, &object) {
                    *p = G::Bgp { patterns: vec![t] };
                }
            }
            G::Bgp { patterns } => self.chains(patterns),
            G::Join { left, right } | G::Union { left, right } | G::Minus { left, right } | G::LeftJoin { left, right, .. } => {
                self.walk(left);
                self.walk(right);
            }
            G::Filter { inner, .. }
            | G::Graph { inner, .. }
            | G::Extend { inner, .. }
            | G::OrderBy { inner, .. }
            | G::Project { inner, .. }
            | G::Distinct { inner }
            | G::Reduced { inner }
            | G::Slice { inner, .. }
            | G::Group { inner, .. } => self.walk(inner),
            _ => {}
        }
    }

    /// Replaces each chain of `patterns` by one path pattern: from a
    /// constant, triple patterns with constant predicates linked by blank
    /// nodes that occur nowhere else (`c p _:a . _:a q _:b . ?y r _:b`,
    /// what the parser makes of `c p/q/^r ?y`) become `c p/q/^r ?y`, which
    /// the batched operator answers level by level from the constant
    /// instead of one lookup per binding of each blank node.
    fn chains(&mut self, patterns: &mut Vec<TriplePattern>) {
        let mut occ: FxHashMap<&BlankNode, Vec<usize>> = FxHashMap::default();
        for (i, t) in patterns.iter().enumerate() {
            for x in [&t.subject, &t.object] {
                if let TermPattern::BlankNode(b) = x {
                    occ.entry(b).or_default().push(i);
                }
            }
        }
        let named = |i: usize| matches!(patterns[i].predicate, NamedNodePattern::NamedNode(_));
        let middle = |x: &TermPattern| -> Option<[usize; 2]> {
            let TermPattern::BlankNode(b) = x else { return None };
            let at = occ.get(b)?;
            (at.len() == 2 && at[0] != at[1] && named(at[0]) && named(at[1]) && occurrences(self.text, b) == 2).then(|| [at[0], at[1]])
        };
        let mut used = vec![false; patterns.len()];
        let mut found = Vec::new();
        for i in 0..patterns.len() {
            if used[i] || !named(i) {
                continue;
            }
            for fwd in [true, false] {
                let t = &patterns[i];
                let (start, next) = if fwd { (&t.subject, &t.object) } else { (&t.object, &t.subject) };
                if !matches!(start, TermPattern::NamedNode(_) | TermPattern::Literal(_)) || middle(next).is_none() {
                    continue;
                }
                let mut hops = vec![(i, fwd)];
                let mut node = next;
                while let Some(at) = middle(node) {
                    let j = if at[0] == hops[hops.len() - 1].0 { at[1] } else { at[0] };
                    if used[j] || hops.iter().any(|h| h.0 == j) {
                        hops.clear();
                        break;
                    }
                    let tj = &patterns[j];
                    let fwd_j = tj.subject == *node;
                    node = if fwd_j { &tj.object } else { &tj.subject };
                    hops.push((j, fwd_j));
                }
                if hops.len() < 2 {
                    continue;
                }
                for h in &hops {
                    used[h.0] = true;
                }
                found.push((start.clone(), hops, node.clone()));
                break;
            }
        }
        if found.is_empty() {
            return;
        }
        let mut out: Vec<TriplePattern> = patterns.iter().enumerate().filter(|(i, _)| !used[*i]).map(|(_, t)| t.clone()).collect();
        for (start, hops, end) in found {
            let expr = hops
                .iter()
                .map(|&(i, fwd)| {
                    let NamedNodePattern::NamedNode(p) = &patterns[i].predicate else { unreachable!("chains hold named predicates only") };
                    let e = PropertyPathExpression::NamedNode(p.clone());
                    if fwd { e } else { PropertyPathExpression::Reverse(Box::new(e)) }
                })
                .reduce(|a, b| PropertyPathExpression::Sequence(Box::new(a), Box::new(b)))
                .expect("a chain has two hops or more");
            match self.stand_in(&start, expr, true, &end) {
                Some(t) => out.push(t),
                // Past the limit: the chain's own patterns stay.
                None => out.extend(hops.iter().map(|h| patterns[h.0].clone())),
            }
        }
        *patterns = out;
    }
}

/// How often blank node `b` occurs in `text` (a query's SPARQL): `_:` and
/// its label, not followed by a label character.
fn occurrences(text: &str, b: &BlankNode) -> usize {
    let needle = format!("_:{}", b.as_str());
    text.match_indices(&needle).filter(|(at, _)| !text[at + needle.len()..].chars().next().is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-')).count()
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
    /// The query's timeout error once it is cancelled.
    fn check(&self) -> Result<()> {
        if self.cancel.is_cancelled() {
            return Err(RdfError::Timeout(self.timeout.unwrap_or_default()));
        }
        Ok(())
    }

    /// The (start, end) pairs of `path`: from `start` if bound, to `end` if
    /// bound (both: at most the one pair, or one per path if `bag`), else
    /// over the whole graph.
    pub fn pairs(&self, path: &Path, start: Option<u64>, end: Option<u64>, bag: bool) -> Result<Pairs> {
        Ok(match (start, end) {
            (Some(s), Some(e)) => {
                let mut found = self.eval(path, &[s], true)?;
                found.retain(|&(_, x)| x == e);
                if !bag {
                    found.truncate(1);
                }
                found
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
        self.check()?;
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
            let quads = self.snap.find_checked(None, p, None, self.graph, &|| self.check())?;
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
                let quads = self.snap.find_checked(None, None, None, self.graph, &|| self.check())?;
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
