//! SPARQL Update: INSERT DATA, DELETE DATA, DELETE/INSERT ... WHERE (its
//! WHERE evaluated by spareval over the working snapshot), CLEAR, DROP,
//! CREATE (graphs exist while they hold quads, so CREATE records nothing).
//! LOAD is refused (no network access). Each operation sees the ones
//! before it; the whole request is logged as one record.

use std::sync::Arc;

use oxrdf::{BlankNode, GraphName, NamedOrBlankNode, Quad, Term};
use rustc_hash::FxHashMap;
use spareval::{DeleteInsertQuad, QueryEvaluator};
use spargebra::algebra::GraphTarget;
use spargebra::term::{GraphName as SGraphName, GroundTerm};
use spargebra::{GraphUpdateOperation, SparqlParser, Update};

use crate::dataset::QueryData;
use crate::error::{RdfError, Result};
use crate::query::eval_error;
use crate::state::{Delta, GraphSel, Snapshot};
use crate::store::RdfStore;
use crate::wal::Change;
use crate::{QueryOptions, UpdateReport};

pub fn parse(sparql: &str, base: Option<&str>) -> Result<Update> {
    let mut p = SparqlParser::new();
    if let Some(b) = base {
        p = p.with_base_iri(b).map_err(|e| RdfError::Invalid(format!("bad base IRI {b:?}: {e}")))?;
    }
    p.parse_update(sparql).map_err(|e| RdfError::QuerySyntax(e.to_string()))
}

fn graph(g: &SGraphName) -> GraphName {
    match g {
        SGraphName::NamedNode(n) => GraphName::NamedNode(n.clone()),
        SGraphName::DefaultGraph => GraphName::DefaultGraph,
    }
}

pub fn run(store: &RdfStore, u: &Update, snap: &Snapshot, delta: &mut Delta, changes: &mut Vec<Change>, o: &QueryOptions) -> Result<UpdateReport> {
    let mut r = UpdateReport::default();
    for op in &u.operations {
        let view = Snapshot { base: snap.base.clone(), delta: Arc::new(delta.clone()) };
        let mut apply = |insert: bool, q: &Quad, r: &mut UpdateReport| -> Result<()> {
            if store.change(&view, delta, changes, insert, q)? {
                if insert { r.inserted += 1 } else { r.deleted += 1 }
            }
            Ok(())
        };
        match op {
            GraphUpdateOperation::InsertData { data } => {
                // Blank nodes of the request are fresh in the store.
                let mut fresh: FxHashMap<BlankNode, BlankNode> = FxHashMap::default();
                let mut bnode = |b: &BlankNode| fresh.entry(b.clone()).or_default().clone();
                for q in data {
                    let subject = match &q.subject {
                        NamedOrBlankNode::BlankNode(b) => NamedOrBlankNode::BlankNode(bnode(b)),
                        s => s.clone(),
                    };
                    let object = match &q.object {
                        Term::BlankNode(b) => Term::BlankNode(bnode(b)),
                        t => t.clone(),
                    };
                    apply(true, &Quad { subject, predicate: q.predicate.clone(), object, graph_name: graph(&q.graph_name) }, &mut r)?;
                }
            }
            GraphUpdateOperation::DeleteData { data } => {
                for q in data {
                    let object = match &q.object {
                        GroundTerm::NamedNode(n) => Term::NamedNode(n.clone()),
                        GroundTerm::Literal(l) => Term::Literal(l.clone()),
                    };
                    apply(
                        false,
                        &Quad { subject: q.subject.clone().into(), predicate: q.predicate.clone(), object, graph_name: graph(&q.graph_name) },
                        &mut r,
                    )?;
                }
            }
            GraphUpdateOperation::DeleteInsert { delete, insert, using, pattern } => {
                let evaluator = QueryEvaluator::new();
                let base = u.base_iri.clone().or_else(|| o.base_iri.as_deref().and_then(|b| oxiri::Iri::parse(b.to_owned()).ok()));
                let prepared = evaluator.prepare_delete_insert(delete.clone(), insert.clone(), base, using.clone(), pattern);
                let data = QueryData::new(view.clone(), store.inner.dict.clone());
                let found: Vec<DeleteInsertQuad> =
                    prepared.execute(data).map_err(|e| eval_error(e, None))?.collect::<std::result::Result<_, _>>().map_err(|e| eval_error(e, None))?;
                for q in found.iter().filter_map(|q| if let DeleteInsertQuad::Delete(q) = q { Some(q) } else { None }) {
                    apply(false, q, &mut r)?;
                }
                for q in found.iter().filter_map(|q| if let DeleteInsertQuad::Insert(q) = q { Some(q) } else { None }) {
                    apply(true, q, &mut r)?;
                }
            }
            GraphUpdateOperation::Load { silent, source, .. } => {
                if !silent {
                    return Err(RdfError::Unsupported(format!(
                        "LOAD <{}>: the store does not fetch from the network; load files with `solidgraph rdf load`",
                        source.as_str()
                    )));
                }
            }
            GraphUpdateOperation::Clear { silent, graph } | GraphUpdateOperation::Drop { silent, graph } => {
                let sel = match graph {
                    GraphTarget::NamedNode(n) => {
                        let found = store.quads_in(&view, Some(&GraphName::NamedNode(n.clone())))?;
                        if found.is_empty() && !silent {
                            return Err(RdfError::Evaluation(format!("graph <{}> does not exist", n.as_str())));
                        }
                        found
                    }
                    GraphTarget::DefaultGraph => store.quads_in(&view, Some(&GraphName::DefaultGraph))?,
                    GraphTarget::NamedGraphs => store.quads_sel(&view, GraphSel::AnyNamed)?,
                    GraphTarget::AllGraphs => store.quads_sel(&view, GraphSel::All)?,
                };
                for q in &sel {
                    apply(false, q, &mut r)?;
                }
            }
            GraphUpdateOperation::Create { silent, graph } => {
                if !silent && !store.quads_in(&view, Some(&GraphName::NamedNode(graph.clone())))?.is_empty() {
                    return Err(RdfError::Evaluation(format!("graph <{}> already exists", graph.as_str())));
                }
            }
        }
    }
    Ok(r)
}
