//! `spareval::QueryableDataset` over a snapshot: internal terms are our u64
//! term ids, so joins compare integers and only results are decoded. Terms
//! not in the dictionary (query constants, BIND results) get ids in a
//! per-query side table, with the top bit set so they never equal a
//! dictionary id (and match no stored quad).
//!
//! Canonical integer, boolean, date and dateTime literals are inlined
//! values (inline.rs): stored quads hold their term ids, which list reads
//! turn into inlined ids in batches (and constants back), so FILTER and
//! ORDER BY on them read no term.
//!
//! Result terms of a SELECT are decoded in batches: spareval asks for one
//! term at a time (`externalize_term`), so in that mode it gets a
//! placeholder IRI naming the id, and the query's row iterator replaces the
//! placeholders of 1024 rows with one batched dictionary call
//! ([`Decoder`]). Expressions (FILTER, ORDER BY, aggregates) get real terms.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Arc, RwLock};

use oxrdf::Term;
use rustc_hash::FxHashMap;
use spareval::{CancellationToken, ExpressionTerm, InternalQuad, QueryableDataset};
use std::time::Duration;

use crate::dict::Dict;
use crate::error::{RdfError, Result};
use crate::inline;
use crate::path::{Eval, Path, Rewritten};
use crate::state::{GraphSel, Snapshot};
use crate::term;

/// Side-table ids have this bit set.
pub const SIDE: u64 = 1 << 63;

pub struct QueryData {
    pub snap: Snapshot,
    pub dict: Arc<RwLock<Dict>>,
    side: Rc<RefCell<SideTable>>,
    /// Set: `externalize_term` returns placeholders with this prefix.
    placeholders: Option<Rc<str>>,
    /// Property paths the query's rewrite replaced, by the side id of the
    /// IRI that stands for each (see `path::rewrite`).
    paths: FxHashMap<u64, (Path, bool)>,
    cancel: CancellationToken,
    timeout: Option<Duration>,
    /// Set: a pattern over "any graph" includes the default graph, so that
    /// spareval's union default graph is every graph of the store, the
    /// default one included (pyoxigraph's `use_default_graph_as_union`).
    /// spareval drops default-graph quads itself where a `GRAPH ?g` asks
    /// for named graphs only.
    union: bool,
}

#[derive(Default)]
struct SideTable {
    terms: Vec<Term>,
    ids: FxHashMap<Vec<u8>, u64>,
}

impl QueryData {
    pub fn new(snap: Snapshot, dict: Arc<RwLock<Dict>>) -> QueryData {
        QueryData {
            snap,
            dict,
            side: Rc::default(),
            placeholders: None,
            paths: FxHashMap::default(),
            cancel: CancellationToken::new(),
            timeout: None,
            union: false,
        }
    }

    /// The query's cancellation: `cancel` (fired at the deadline `timeout`)
    /// stops a scan over every list between batches and a path evaluation
    /// between levels.
    pub fn set_cancel(&mut self, cancel: CancellationToken, timeout: Option<Duration>) {
        self.cancel = cancel;
        self.timeout = timeout;
    }

    /// Makes the union of all graphs, the default one included, what a
    /// pattern over any graph reads (see the field).
    pub fn set_union_default_graph(&mut self, union: bool) {
        self.union = union;
    }

    /// The query's timeout error once it is cancelled.
    fn check(&self) -> Result<()> {
        if self.cancel.is_cancelled() {
            return Err(RdfError::Timeout(self.timeout.unwrap_or_default()));
        }
        Ok(())
    }

    /// Registers the paths `path::rewrite` took out of the query: path `i`
    /// is answered for the predicate IRI `prefix` + `i`.
    pub fn set_paths(&mut self, prefix: &str, paths: &[Rewritten]) -> Result<()> {
        for (i, r) in paths.iter().enumerate() {
            let path = Path::compile(&r.expr, &mut |n| self.id(&Term::NamedNode(n.clone())))?;
            // The IRI is the query's own (a random prefix): a side term
            // without a dictionary lookup.
            let t = Term::NamedNode(oxrdf::NamedNode::new_unchecked(format!("{prefix}{i}")));
            let mut side = self.side.borrow_mut();
            let id = SIDE | side.terms.len() as u64;
            side.ids.insert(term::to_bytes(&t), id);
            side.terms.push(t);
            drop(side);
            self.paths.insert(id, (path, r.bag));
        }
        Ok(())
    }

    /// Stored quads matching a pattern (nothing matches a side id).
    fn quads(&self, s: Option<&u64>, p: Option<&u64>, o: Option<&u64>, graph: Option<Option<&u64>>) -> Result<Vec<InternalQuad<u64>>> {
        let sel = match graph {
            None if self.union => GraphSel::All,
            None => GraphSel::AnyNamed,
            Some(None) => GraphSel::Default,
            Some(Some(&g)) => GraphSel::Named(g),
        };
        if [s, p, o, graph.flatten()].into_iter().flatten().any(|&x| x & SIDE != 0) {
            return Ok(Vec::new());
        }
        let Some((s, o)) = self.stored(s.copied(), o.copied())? else { return Ok(Vec::new()) };
        let mut found = self.snap.find_checked(s, p.copied(), o, sel, &|| self.check())?;
        let mut ends: Vec<u64> = found.iter().flat_map(|q| [q[0], q[2]]).collect();
        solidgraph_store_read(&self.dict).to_query_ids(&mut ends)?;
        for (q, e) in found.iter_mut().zip(ends.chunks_exact(2)) {
            (q[0], q[2]) = (e[0], e[1]);
        }
        Ok(found.into_iter().map(|[s, p, o, g]| InternalQuad { subject: s, predicate: p, object: o, graph_name: (g != 0).then_some(g) }).collect())
    }

    /// A pattern's subject and object as the stored quads hold them: an
    /// inlined value's term id, other ids as they are; `None` (the pattern
    /// matches nothing) when no stored term has an inlined value given.
    fn stored(&self, s: Option<u64>, o: Option<u64>) -> Result<Option<(Option<u64>, Option<u64>)>> {
        let vs: Vec<u64> = [s, o].into_iter().flatten().filter(|&v| inline::is_inline(v)).collect();
        if vs.is_empty() {
            return Ok(Some((s, o)));
        }
        let mut found = solidgraph_store_read(&self.dict).ids_of_inline(&vs)?.into_iter();
        let mut term = |x: Option<u64>| match x {
            Some(v) if inline::is_inline(v) => found.next().flatten().map(Some),
            x => Some(x),
        };
        let (s, o) = (term(s), term(o));
        Ok(s.zip(o))
    }

    /// The quads (start, `p`, end, graph) of the path `p` stands for.
    fn path_quads(&self, p: u64, (path, bag): &(Path, bool), s: Option<u64>, o: Option<u64>, graph: Option<Option<&u64>>) -> Result<Vec<InternalQuad<u64>>> {
        let graphs: Vec<(GraphSel, Option<u64>)> = match graph {
            Some(None) => vec![(GraphSel::Default, None)],
            Some(Some(&g)) if g & SIDE != 0 => Vec::new(),
            Some(Some(&g)) => vec![(GraphSel::Named(g), Some(g))],
            None => self.snap.graphs()?.into_iter().map(|g| (GraphSel::Named(g), Some(g))).collect(),
        };
        let Some((s, o)) = self.stored(s, o)? else { return Ok(Vec::new()) };
        let mut out = Vec::new();
        for (graph, name) in graphs {
            let eval = Eval { snap: &self.snap, graph, cancel: &self.cancel, timeout: self.timeout };
            let pairs = eval.pairs(path, s, o, *bag)?;
            let mut ends: Vec<u64> = pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
            solidgraph_store_read(&self.dict).to_query_ids(&mut ends)?;
            for e in ends.chunks_exact(2) {
                out.push(InternalQuad { subject: e[0], predicate: p, object: e[1], graph_name: name });
            }
        }
        Ok(out)
    }

    /// Makes `externalize_term` return placeholders, decoded later in
    /// batches by the returned [`Decoder`].
    pub fn defer_terms(&mut self, prefix: &str) -> Decoder {
        let prefix: Rc<str> = Rc::from(prefix);
        self.placeholders = Some(prefix.clone());
        Decoder { dict: self.dict.clone(), side: self.side.clone(), prefix }
    }

    /// Decodes the ids `ids` (side ids too); the dictionary's pages for
    /// all of them are read in one batch.
    pub fn terms(&self, ids: &[u64]) -> Result<Vec<Option<Term>>> {
        decode(&self.dict, &self.side, ids)
    }

    fn term(&self, id: u64) -> Result<Term> {
        self.terms(&[id])?.pop().flatten().ok_or_else(|| RdfError::Evaluation(format!("no term with id {id}")))
    }

    /// The id of `t`: its inlined id, else its dictionary id, else a side id.
    pub fn id(&self, t: &Term) -> Result<u64> {
        if let Some(v) = inline::encode_term(t) {
            return Ok(v);
        }
        let b = term::to_bytes(t);
        if let Some(&id) = self.side.borrow().ids.get(&b) {
            return Ok(id);
        }
        if let Some(id) = solidgraph_store_read(&self.dict).get(&b)? {
            return Ok(id);
        }
        let mut side = self.side.borrow_mut();
        let id = SIDE | side.terms.len() as u64;
        side.terms.push(t.clone());
        side.ids.insert(b, id);
        Ok(id)
    }
}

/// Decodes `ids` (side ids from `side`); the dictionary's pages for all
/// of them are read in one batch.
fn decode(dict: &RwLock<Dict>, side: &RefCell<SideTable>, ids: &[u64]) -> Result<Vec<Option<Term>>> {
    let mut out: Vec<Option<Term>> = vec![None; ids.len()];
    let mut dict_ids = Vec::new();
    let mut at = Vec::new();
    {
        let side = side.borrow();
        for (i, &id) in ids.iter().enumerate() {
            if id & SIDE != 0 {
                let t = side.terms.get((id & !SIDE) as usize).cloned();
                out[i] = Some(t.ok_or_else(|| RdfError::Evaluation(format!("unknown side term {id}")))?);
            } else if inline::is_inline(id) {
                out[i] = Some(inline::canonical(id).ok_or_else(|| RdfError::Evaluation(format!("damaged inlined id {id:#x}")))?.into());
            } else {
                dict_ids.push(id);
                at.push(i);
            }
        }
    }
    solidgraph_store_read(dict).terms(&dict_ids, &mut |k, b| {
        let t = term::decode(b).map_err(|e| RdfError::Evaluation(format!("term {}: {e}", dict_ids[k])))?;
        out[at[k]] = Some(t);
        Ok(())
    })?;
    Ok(out)
}

/// Decodes the placeholders a deferred query's rows hold (see the module
/// comment), many rows at a time.
pub struct Decoder {
    dict: Arc<RwLock<Dict>>,
    side: Rc<RefCell<SideTable>>,
    prefix: Rc<str>,
}

impl Decoder {
    /// Replaces every placeholder in `rows` by its term: one batched
    /// dictionary call for all of them.
    pub fn decode_rows(&self, rows: &mut [Vec<Option<Term>>]) -> Result<()> {
        let mut ids = Vec::new();
        for t in rows.iter().flatten().flatten() {
            if let Some(id) = self.id_of(t) {
                ids.push(id);
            }
        }
        if ids.is_empty() {
            return Ok(());
        }
        ids.sort_unstable();
        ids.dedup();
        let terms = decode(&self.dict, &self.side, &ids)?;
        for t in rows.iter_mut().flatten().flatten() {
            if let Some(id) = self.id_of(t) {
                let k = ids.binary_search(&id).map_err(|_| RdfError::Evaluation(format!("no term with id {id}")))?;
                *t = terms[k].clone().ok_or_else(|| RdfError::Evaluation(format!("no term with id {id}")))?;
            }
        }
        Ok(())
    }

    fn id_of(&self, t: &Term) -> Option<u64> {
        let Term::NamedNode(n) = t else { return None };
        u64::from_str_radix(n.as_str().strip_prefix(&*self.prefix)?, 16).ok()
    }
}

/// A read lock on the dictionary; a poisoned lock (a panic while adding
/// terms) is a bug, so it panics with a message as the rest of the code base does.
pub fn solidgraph_store_read(d: &RwLock<Dict>) -> std::sync::RwLockReadGuard<'_, Dict> {
    d.read().expect("dictionary lock poisoned by an earlier panic; reopen the store")
}

impl QueryableDataset<'static> for QueryData {
    type InternalTerm = u64;
    type Error = RdfError;

    fn internal_quads_for_pattern(
        &self,
        subject: Option<&u64>,
        predicate: Option<&u64>,
        object: Option<&u64>,
        graph_name: Option<Option<&u64>>,
    ) -> impl Iterator<Item = Result<InternalQuad<u64>>> + use<> {
        let found = match predicate.and_then(|p| Some((*p, self.paths.get(p)?))) {
            Some((p, path)) => self.path_quads(p, path, subject.copied(), object.copied(), graph_name),
            None => self.quads(subject, predicate, object, graph_name),
        };
        let (ok, err) = match found {
            Ok(v) => (v, None),
            Err(e) => (Vec::new(), Some(e)),
        };
        err.map(Err).into_iter().chain(ok.into_iter().map(Ok))
    }

    fn internal_named_graphs(&self) -> impl Iterator<Item = Result<u64>> + use<> {
        let r = self.snap.graphs();
        let (ok, err) = match r {
            Ok(v) => (v, None),
            Err(e) => (Vec::new(), Some(e)),
        };
        err.map(Err).into_iter().chain(ok.into_iter().map(Ok))
    }

    fn contains_internal_graph_name(&self, g: &u64) -> Result<bool> {
        if g & SIDE != 0 || inline::is_inline(*g) {
            return Ok(false);
        }
        Ok(!self.snap.find_checked(None, None, None, GraphSel::Named(*g), &|| self.check())?.is_empty())
    }

    fn internalize_term(&self, term: Term) -> Result<u64> {
        self.id(&term)
    }

    fn externalize_term(&self, id: u64) -> Result<Term> {
        match &self.placeholders {
            Some(_) if inline::is_inline(id) => self.term(id),
            Some(prefix) => Ok(Term::NamedNode(oxrdf::NamedNode::new_unchecked(format!("{prefix}{id:x}")))),
            None => self.term(id),
        }
    }

    fn externalize_expression_term(&self, id: u64) -> Result<ExpressionTerm> {
        if inline::is_inline(id) {
            return inline::decode(id).ok_or_else(|| RdfError::Evaluation(format!("damaged inlined id {id:#x}")));
        }
        Ok(self.term(id)?.into())
    }

    fn internalize_expression_term(&self, term: ExpressionTerm) -> Result<u64> {
        match inline::encode_expr(&term) {
            Some(v) => Ok(v),
            None => self.id(&term.into()),
        }
    }
}
