//! The served stores, by name: a request names one of these and nothing
//! else, so a name can never reach a path outside the served set.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use solidgraph_store::{OpenOptions, Store, StoreError};
use tonic::Status;

/// Longest name of a store built through UpdateGraph.
pub const MAX_NAME: usize = 64;

pub struct Stores {
    map: RwLock<BTreeMap<String, Arc<Served>>>,
    /// Where UpdateGraph builds new stores (`--data-dir`); without it the
    /// served set is fixed.
    data_dir: Option<PathBuf>,
    opts: OpenOptions,
}

pub struct Served {
    pub store: Arc<Store>,
    pub writable: bool,
    /// Whether the store's page cache has been missing on fewer than
    /// 1 in `WARM_MISS_RATIO` lookups lately (see `track_warmth`): then a
    /// small read almost surely does no I/O and runs on the reactor.
    pub warm: AtomicBool,
}

/// Most misses per lookup for a store to count as warm: 1 in this many.
const WARM_MISS_RATIO: u64 = 1000;

impl Served {
    pub fn is_warm(&self) -> bool {
        self.warm.load(Ordering::Relaxed)
    }
}

/// Updates every store's `warm` flag every `every` from its page cache's
/// hits and misses over that interval; an interval without lookups keeps
/// the flag. Stores start cold, so a fresh server's first reads go to the
/// blocking pool.
pub async fn track_warmth(stores: Arc<Stores>, every: Duration) {
    let mut last: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    loop {
        for (name, s) in stores.all() {
            let c = s.store.stats().cache;
            let (h0, m0) = last.insert(name, (c.hits, c.misses)).unwrap_or((c.hits, c.misses));
            let (hits, misses) = (c.hits.saturating_sub(h0), c.misses.saturating_sub(m0));
            if hits + misses > 0 {
                s.warm.store(misses.saturating_mul(WARM_MISS_RATIO) < hits + misses, Ordering::Relaxed);
            }
        }
        tokio::time::sleep(every).await;
    }
}

impl Stores {
    /// Opens every store in `paths` with `opts`, named by its directory
    /// name, and every store in `data_dir`. A build an UpdateGraph left
    /// unfinished there (the server died during it) is removed.
    pub fn open(paths: &[impl AsRef<Path>], data_dir: Option<&Path>, opts: &OpenOptions) -> Result<Stores, StoreError> {
        let stores = Stores { map: RwLock::new(BTreeMap::new()), data_dir: data_dir.map(Path::to_path_buf), opts: opts.clone() };
        let mut all: Vec<PathBuf> = paths.iter().map(|p| p.as_ref().to_path_buf()).collect();
        if let Some(dir) = data_dir {
            let entries = std::fs::read_dir(dir).map_err(|source| StoreError::File { path: dir.to_path_buf(), source })?;
            let mut found = Vec::new();
            for e in entries {
                let e = e.map_err(|source| StoreError::File { path: dir.to_path_buf(), source })?;
                let (path, name) = (e.path(), e.file_name().to_string_lossy().into_owned());
                if name.contains(".partial-") {
                    tracing::warn!(path = %path.display(), "removing an unfinished UpdateGraph build");
                    std::fs::remove_dir_all(&path).map_err(|source| StoreError::File { path: path.clone(), source })?;
                } else if path.is_dir() {
                    found.push(path);
                }
            }
            found.sort();
            all.extend(found);
        }
        for p in &all {
            stores.add(&store_name(p)?, p)?;
        }
        if all.is_empty() && data_dir.is_none() {
            return Err(StoreError::Invalid("no store to serve".into()));
        }
        Ok(stores)
    }

    /// Opens the store at `path` and serves it as `name`, unless that name
    /// is taken.
    pub fn add(&self, name: &str, path: &Path) -> Result<Arc<Served>, StoreError> {
        let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
        if map.contains_key(name) {
            return Err(StoreError::Invalid(format!("{}: another served store is also named {name:?}", path.display())));
        }
        let served = Arc::new(Served { store: Arc::new(Store::open(path, &self.opts)?), writable: self.opts.writable, warm: AtomicBool::new(false) });
        map.insert(name.to_string(), served.clone());
        Ok(served)
    }

    pub fn data_dir(&self) -> Option<&Path> {
        self.data_dir.as_deref()
    }

    pub fn contains(&self, name: &str) -> bool {
        self.map.read().unwrap_or_else(|p| p.into_inner()).contains_key(name)
    }

    pub fn names(&self) -> Vec<String> {
        self.map.read().unwrap_or_else(|p| p.into_inner()).keys().cloned().collect()
    }

    pub fn all(&self) -> Vec<(String, Arc<Served>)> {
        self.map.read().unwrap_or_else(|p| p.into_inner()).iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// The store named `name`; "" names the only store of a server that
    /// serves one.
    pub fn get(&self, name: &str) -> Result<Arc<Served>, Status> {
        let map = self.map.read().unwrap_or_else(|p| p.into_inner());
        if name.is_empty() {
            if map.len() == 1 {
                return Ok(map.values().next().expect("one store").clone());
            }
            let names: Vec<&str> = map.keys().map(String::as_str).collect();
            return Err(Status::invalid_argument(format!("this server serves {} stores; name one of: {}", map.len(), names.join(", "))));
        }
        map.get(name).cloned().ok_or_else(|| {
            let names: Vec<&str> = map.keys().map(String::as_str).collect();
            Status::not_found(format!("no store named {name:?} is served here (served: {})", names.join(", ")))
        })
    }
}

/// A name UpdateGraph may create: a plain directory name (letters, digits,
/// `.`, `_`, `-`; not starting with `.`), so it cannot leave the data dir.
pub fn check_new_name(name: &str) -> Result<(), Status> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && !name.starts_with('.')
        && !name.contains(".partial-")
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-');
    if !ok {
        return Err(Status::invalid_argument(format!("store name {name:?} must be 1..={MAX_NAME} letters, digits, '.', '_' or '-', not starting with '.'")));
    }
    Ok(())
}

fn store_name(p: &Path) -> Result<String, StoreError> {
    let canon = p.canonicalize().map_err(|source| StoreError::File { path: p.to_path_buf(), source })?;
    canon
        .file_name()
        .and_then(|n| n.to_str())
        .map(str::to_owned)
        .ok_or_else(|| StoreError::Invalid(format!("{}: a store's directory name must be valid UTF-8", p.display())))
}
