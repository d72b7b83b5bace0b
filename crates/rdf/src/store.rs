//! `RdfStore`: open, query, update, load, compact. A store is a directory:
//! `rdf.meta` (names the generation), `dict.<gen>`, `quads.<gen>/` (a page
//! store), `rdf.wal` (updates since), `writer.lock`.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use oxrdf::{GraphName, NamedOrBlankNode, Quad, Term};

use crate::dataset::{QueryData, solidgraph_store_read};
use crate::dict::Dict;
use crate::error::{RdfError, Result, io_err};
use crate::meta::{self, Meta};
use crate::state::{Base, Delta, GraphSel, Snapshot};
use crate::wal::{Change, Wal};
use crate::{LoadOptions, LoadReport, OpenOptions, QueryOptions, QueryOutput, StoreInfo, UpdateReport, load, query, term, update};

/// An RDF store. Cheap to clone (shared state); queries run on snapshots,
/// concurrently with one writer.
#[derive(Clone)]
pub struct RdfStore {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub dir: PathBuf,
    pub opts: OpenOptions,
    pub dict: Arc<RwLock<Dict>>,
    pub snap: RwLock<Snapshot>,
    pub meta: RwLock<Meta>,
    /// The update log; `None` when read-only. Its lock is the writer's lock.
    pub wal: Mutex<Option<Wal>>,
    _lock: Option<File>,
}

fn poisoned<T>(_: T) -> RdfError {
    RdfError::Invalid("store lock poisoned by an earlier panic; reopen the store".into())
}

fn open_base(dir: &Path, meta: &Meta, o: &OpenOptions) -> Result<Base> {
    if meta.quads == 0 {
        return Ok(Base { pairs: meta.pairs.clone(), ..Base::empty() });
    }
    let so = solidgraph_store::OpenOptions { cache_bytes: o.cache_bytes, writable: false, backend: o.quads_backend.clone(), ..Default::default() };
    let store = solidgraph_store::Store::open(&meta.quads_path(dir), &so)?;
    let nodes = store.num_nodes();
    // The load gives the quad store one vertex per term (and id 0): a
    // damaged count would send pattern scans over ids no term has.
    if nodes != meta.terms + 1 {
        return Err(crate::error::corrupt(meta.quads_path(dir), format!("{nodes} vertices, rdf.meta says {} terms", meta.terms)));
    }
    Ok(Base { store: Some(store), pairs: meta.pairs.clone(), nodes, quads: meta.quads, scanned: Default::default() })
}

impl RdfStore {
    /// Builds a new store at `path` from RDF files (see [`LoadOptions`]).
    /// `path` must not exist; on failure nothing is left there.
    pub fn bulk_load(path: &Path, files: &[PathBuf], o: &LoadOptions) -> Result<LoadReport> {
        load::bulk_load(path, files, o)
    }

    /// Creates an empty store at `path` (which must not exist).
    pub fn create(path: &Path) -> Result<()> {
        load::bulk_load(path, &[], &LoadOptions::default()).map(|_| ())
    }

    /// Opens the store at `path`; with `create`, an empty one is made first if
    /// nothing is there.
    pub fn open(path: &Path, o: &OpenOptions) -> Result<RdfStore> {
        if !path.join(meta::FILE).exists() {
            if !path.exists() && o.create {
                RdfStore::create(path)?;
            } else if !path.exists() {
                return Err(io_err(path)(std::io::Error::new(std::io::ErrorKind::NotFound, "no such store")));
            } else {
                return Err(RdfError::NotRdf(path.to_path_buf()));
            }
        }
        let lock = if o.writable {
            let lp = path.join("writer.lock");
            let f = File::create(&lp).map_err(io_err(&lp))?;
            f.try_lock().map_err(|_| RdfError::Invalid(format!("{}: another writer has the store open", path.display())))?;
            Some(f)
        } else {
            None
        };
        let meta = Meta::read(path)?;
        let dict = Dict::open_on(&meta.dict_path(path), o.dict_cache_bytes, o.dict_backend.clone())?;
        if dict.len() != meta.terms {
            return Err(crate::error::corrupt(meta.dict_path(path), format!("{} terms, rdf.meta says {}", dict.len(), meta.terms)));
        }
        let base = Arc::new(open_base(path, &meta, o)?);
        let (wal, records) = Wal::open(path, o.writable)?;
        let dict = Arc::new(RwLock::new(dict));
        let mut delta = Delta::default();
        let snap = Snapshot { base: base.clone(), delta: Arc::new(Delta::default()) };
        {
            // Every term of the log in one dictionary lookup, then the changes in order.
            let changes: Vec<Change> = records.into_iter().flatten().collect();
            let all: Vec<&[u8]> = changes.iter().flat_map(|(_, t)| t.iter().map(Vec::as_slice)).filter(|t| !t.is_empty()).collect();
            let ids = dict.write().map_err(poisoned)?.intern_many(&all)?;
            let mut next = ids.into_iter();
            for (ins, terms) in &changes {
                let mut id = |t: &Vec<u8>| if t.is_empty() { 0 } else { next.next().expect("one id per term") };
                let q = [id(&terms[0]), id(&terms[1]), id(&terms[2]), id(&terms[3])];
                snap.apply(&mut delta, *ins, q)?;
            }
        }
        let snap = Snapshot { base, delta: Arc::new(delta) };
        let inner =
            Inner { dir: path.to_path_buf(), opts: o.clone(), dict, snap: RwLock::new(snap), meta: RwLock::new(meta), wal: Mutex::new(wal), _lock: lock };
        Ok(RdfStore { inner: Arc::new(inner) })
    }

    /// Converts an old store's files to the formats this build reads (a
    /// version 1, 2 or 3 dictionary to version 4, inline pages listed in
    /// its directory), under the writer lock. Returns whether it changed
    /// anything. `solidgraph rdf compact` runs it first.
    pub fn upgrade(path: &Path) -> Result<bool> {
        if !path.join(meta::FILE).exists() {
            return Err(RdfError::NotRdf(path.to_path_buf()));
        }
        let lp = path.join("writer.lock");
        let f = File::create(&lp).map_err(io_err(&lp))?;
        f.try_lock().map_err(|_| RdfError::Invalid(format!("{}: another writer has the store open", path.display())))?;
        let meta = Meta::read(path)?;
        crate::dict::upgrade(&meta.dict_path(path))
    }

    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// Terms decoded (id -> term) from the dictionary file since it was
    /// opened (or last compacted): a test checks that a FILTER or ORDER BY
    /// on inlined values decodes none.
    pub fn dict_term_reads(&self) -> u64 {
        solidgraph_store_read(&self.inner.dict).term_reads()
    }

    /// Lists read by scans over every subject (patterns with subject and
    /// object open) since the store was opened or last compacted: a test
    /// checks that a query's deadline stops such a scan between batches.
    pub fn scanned_lists(&self) -> Result<u64> {
        Ok(self.snapshot()?.base.scanned.load(std::sync::atomic::Ordering::Relaxed))
    }

    pub(crate) fn snapshot(&self) -> Result<Snapshot> {
        Ok(self.inner.snap.read().map_err(poisoned)?.clone())
    }

    /// Runs a SPARQL query on a snapshot of the store.
    pub fn query(&self, sparql: &str, o: &QueryOptions) -> Result<QueryOutput> {
        let q = Self::parse_query(sparql, o.base_iri.as_deref())?;
        self.query_parsed(&q, o)
    }

    /// Parses a SPARQL query once, for [`RdfStore::query_parsed`] to run
    /// many times (`base_iri` resolves its relative IRIs).
    pub fn parse_query(sparql: &str, base_iri: Option<&str>) -> Result<spargebra::Query> {
        query::parse(sparql, base_iri)
    }

    /// Runs a parsed query on a snapshot of the store (`o.base_iri` is not
    /// used: the query's IRIs were resolved when it was parsed).
    pub fn query_parsed(&self, q: &spargebra::Query, o: &QueryOptions) -> Result<QueryOutput> {
        query::run(q, QueryData::new(self.snapshot()?, self.inner.dict.clone()), o)
    }

    /// Runs a SPARQL update; durable when it returns. A failing update changes nothing.
    pub fn update(&self, sparql: &str, o: &QueryOptions) -> Result<UpdateReport> {
        let u = update::parse(sparql, o.base_iri.as_deref())?;
        self.write(|store, snap, delta, changes| update::run(store, &u, snap, delta, changes, o))
    }

    /// Adds the quads of `files` as one durable update.
    pub fn load(&self, files: &[PathBuf], o: &LoadOptions) -> Result<LoadReport> {
        let start = std::time::Instant::now();
        let mut quads = Vec::new();
        let bar = load::progress_bar(files, o);
        let (n, skipped) = load::read_files(files, o, &bar, |q| {
            quads.push(q);
            Ok(())
        })?;
        self.insert(&quads)?;
        let terms = solidgraph_store_read(&self.inner.dict).len();
        Ok(LoadReport { quads: n, skipped, terms, seconds: start.elapsed().as_secs_f64() })
    }

    /// Adds quads, durably.
    pub fn insert(&self, quads: &[Quad]) -> Result<UpdateReport> {
        self.write(|store, snap, delta, changes| {
            let mut r = UpdateReport::default();
            for q in quads {
                if store.change(snap, delta, changes, true, q)? {
                    r.inserted += 1;
                }
            }
            Ok(r)
        })
    }

    /// Removes quads, durably.
    pub fn remove(&self, quads: &[Quad]) -> Result<UpdateReport> {
        self.write(|store, snap, delta, changes| {
            let mut r = UpdateReport::default();
            for q in quads {
                if store.change(snap, delta, changes, false, q)? {
                    r.deleted += 1;
                }
            }
            Ok(r)
        })
    }

    /// Runs `f` as one update: it records changes against a working delta;
    /// they are logged (synced) and then published; on error nothing is.
    fn write(&self, f: impl FnOnce(&RdfStore, &Snapshot, &mut Delta, &mut Vec<Change>) -> Result<UpdateReport>) -> Result<UpdateReport> {
        let mut wal = self.inner.wal.lock().map_err(poisoned)?;
        let Some(wal) = wal.as_mut() else { return Err(RdfError::ReadOnly) };
        let snap = self.snapshot()?;
        let mut delta = (*snap.delta).clone();
        let mut changes = Vec::new();
        let report = f(self, &snap, &mut delta, &mut changes)?;
        if !changes.is_empty() {
            wal.append(&changes)?;
        }
        *self.inner.snap.write().map_err(poisoned)? = Snapshot { base: snap.base.clone(), delta: Arc::new(delta) };
        Ok(report)
    }

    /// Applies one insert or delete of `q` to `delta`, logging it if it changes the store.
    pub(crate) fn change(&self, snap: &Snapshot, delta: &mut Delta, changes: &mut Vec<Change>, insert: bool, q: &Quad) -> Result<bool> {
        let bytes = load::quad_bytes(q)?;
        let n = if bytes[3].is_empty() { 3 } else { 4 };
        let terms: Vec<&[u8]> = bytes[..n].iter().map(Vec::as_slice).collect();
        let ids = if insert {
            let v = self.inner.dict.write().map_err(poisoned)?.intern_many(&terms)?;
            Some([v[0], v[1], v[2], v.get(3).copied().unwrap_or(0)])
        } else {
            let v = solidgraph_store_read(&self.inner.dict).get_many(&terms)?;
            match (v[0], v[1], v[2], v.get(3).copied().unwrap_or(Some(0))) {
                (Some(s), Some(p), Some(o), Some(g)) => Some([s, p, o, g]),
                _ => None,
            }
        };
        let Some(ids) = ids else { return Ok(false) };
        let changed = snap.apply(delta, insert, ids)?;
        if changed {
            changes.push((insert, bytes));
        }
        Ok(changed)
    }

    /// Quads matching a pattern (`None`: any; graph `None`: every graph, the default one included).
    pub fn quads_for_pattern(&self, s: Option<&Term>, p: Option<&Term>, o: Option<&Term>, g: Option<&GraphName>) -> Result<Vec<Quad>> {
        let snap = self.snapshot()?;
        let gt = match g {
            Some(GraphName::NamedNode(n)) => Some(Term::from(n.clone())),
            Some(GraphName::BlankNode(b)) => Some(Term::from(b.clone())),
            _ => None,
        };
        // The pattern's terms in one dictionary lookup.
        let given: Vec<Vec<u8>> = [s, p, o, gt.as_ref()].into_iter().map(|t| t.map(term::to_bytes).unwrap_or_default()).collect();
        let ask: Vec<&[u8]> = given.iter().filter(|b| !b.is_empty()).map(Vec::as_slice).collect();
        let mut found = solidgraph_store_read(&self.inner.dict).get_many(&ask)?.into_iter();
        let mut lookup = |t: Option<&Term>| -> Option<Option<u64>> { t.map(|_| found.next().expect("one id per term")) };
        let (s, p, o, gid) = (lookup(s), lookup(p), lookup(o), lookup(gt.as_ref()));
        let sel = match (g, gid) {
            (None, _) => GraphSel::All,
            (Some(GraphName::DefaultGraph), _) => GraphSel::Default,
            (_, Some(Some(id))) => GraphSel::Named(id),
            _ => return Ok(Vec::new()),
        };
        if [s, p, o].iter().any(|x| matches!(x, Some(None))) {
            return Ok(Vec::new());
        }
        let found = snap.find(s.flatten(), p.flatten(), o.flatten(), sel)?;
        self.decode_quads(found)
    }

    /// What the store holds.
    pub fn info(&self) -> Result<StoreInfo> {
        let snap = self.snapshot()?;
        let bytes = dir_bytes(&self.inner.dir);
        Ok(StoreInfo {
            path: self.inner.dir.clone(),
            quads: snap.len(),
            terms: solidgraph_store_read(&self.inner.dict).len(),
            pending: snap.delta.changes(),
            bytes,
        })
    }

    /// Folds pending updates into a new generation of pages and empties the log.
    pub fn compact(&self) -> Result<()> {
        let mut wal = self.inner.wal.lock().map_err(poisoned)?;
        let Some(wal) = wal.as_mut() else { return Err(RdfError::ReadOnly) };
        let snap = self.snapshot()?;
        if snap.delta.changes() == 0 {
            return Ok(());
        }
        let dict = solidgraph_store_read(&self.inner.dict).clone();
        let old = self.inner.meta.read().map_err(poisoned)?.clone();
        let dir = &self.inner.dir;
        let next = Meta { generation: old.generation + 1, ..Meta::default() };
        dict.write(&next.dict_path(dir))?;
        let meta = load::write_generation(
            dir,
            next.generation,
            dict.len(),
            1 << 30,
            &mut |f| {
                for q in snap.find(None, None, None, GraphSel::All)? {
                    f(q)?;
                }
                Ok(())
            },
            &|_, _, _| {},
        )?;
        wal.reset()?;
        let base = Arc::new(open_base(dir, &meta, &self.inner.opts)?);
        let fresh = Dict::open(&meta.dict_path(dir), self.inner.opts.dict_cache_bytes)?;
        *self.inner.dict.write().map_err(poisoned)? = fresh;
        *self.inner.snap.write().map_err(poisoned)? = Snapshot { base, delta: Arc::new(Delta::default()) };
        *self.inner.meta.write().map_err(poisoned)? = meta;
        // Readers holding the old base keep their open files; removing the names is safe.
        let _ = std::fs::remove_file(old.dict_path(dir));
        let _ = std::fs::remove_dir_all(old.quads_path(dir));
        Ok(())
    }
}

fn dir_bytes(p: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(p) else { return 0 };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

impl RdfStore {
    /// Quads of `view` in graph `g` (every graph if `None`).
    pub(crate) fn quads_in(&self, view: &Snapshot, g: Option<&GraphName>) -> Result<Vec<Quad>> {
        let sel = match g {
            None => GraphSel::All,
            Some(GraphName::DefaultGraph) => GraphSel::Default,
            Some(GraphName::NamedNode(n)) => match solidgraph_store_read(&self.inner.dict).get(&term::to_bytes(&Term::from(n.clone())))? {
                Some(id) => GraphSel::Named(id),
                None => return Ok(Vec::new()),
            },
            Some(GraphName::BlankNode(b)) => match solidgraph_store_read(&self.inner.dict).get(&term::to_bytes(&Term::from(b.clone())))? {
                Some(id) => GraphSel::Named(id),
                None => return Ok(Vec::new()),
            },
        };
        self.quads_sel(view, sel)
    }

    pub(crate) fn quads_sel(&self, view: &Snapshot, sel: GraphSel) -> Result<Vec<Quad>> {
        let found = view.find(None, None, None, sel)?;
        self.decode_quads(found)
    }
}

impl RdfStore {
    /// Decodes id quads, every distinct term once, in one dictionary call.
    pub(crate) fn decode_quads(&self, found: Vec<crate::state::Ids>) -> Result<Vec<Quad>> {
        let data = QueryData::new(self.snapshot()?, self.inner.dict.clone());
        let mut ids: Vec<u64> = found.iter().flat_map(|q| q.iter().copied()).filter(|&x| x != 0).collect();
        ids.sort_unstable();
        ids.dedup();
        let terms = data.terms(&ids)?;
        // A damaged quad page may name id 0 (no term) or an id the dictionary
        // does not decode: an error naming the store, not a panic.
        let term = |id: u64| match ids.binary_search(&id).ok().and_then(|i| terms[i].clone()) {
            Some(t) => Ok(t),
            None => Err(crate::error::corrupt(&self.inner.dir, format!("a quad names term id {id}, which is no term"))),
        };
        found
            .into_iter()
            .map(|[s, p, o, g]| {
                let subject = NamedOrBlankNode::try_from(term(s)?).map_err(|_| RdfError::Evaluation(format!("term {s} is a literal in subject position")))?;
                let predicate = match term(p)? {
                    Term::NamedNode(n) => n,
                    _ => return Err(RdfError::Evaluation(format!("term {p} is not an IRI in predicate position"))),
                };
                let graph_name = match g {
                    0 => GraphName::DefaultGraph,
                    g => match term(g)? {
                        Term::NamedNode(n) => GraphName::NamedNode(n),
                        Term::BlankNode(b) => GraphName::BlankNode(b),
                        _ => return Err(RdfError::Evaluation(format!("term {g} is a literal graph name"))),
                    },
                };
                Ok(Quad { subject, predicate, object: term(o)?, graph_name })
            })
            .collect()
    }
}
