//! The served stores, by name: a request names one of these and nothing
//! else, so a name can never reach a path outside the served set.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use solidgraph_store::{OpenOptions, Store, StoreError};
use tonic::Status;

pub struct Stores {
    map: BTreeMap<String, Served>,
}

pub struct Served {
    pub store: Arc<Store>,
    pub writable: bool,
}

impl Stores {
    /// Opens every store in `paths` with `opts`, named by its directory name.
    pub fn open(paths: &[impl AsRef<Path>], opts: &OpenOptions) -> Result<Stores, StoreError> {
        let mut map = BTreeMap::new();
        for p in paths {
            let p = p.as_ref();
            let name = store_name(p)?;
            if map.contains_key(&name) {
                return Err(StoreError::Invalid(format!("{}: another served store is also named {name:?}", p.display())));
            }
            let store = Arc::new(Store::open(p, opts)?);
            map.insert(name, Served { store, writable: opts.writable });
        }
        if map.is_empty() {
            return Err(StoreError::Invalid("no store to serve".into()));
        }
        Ok(Stores { map })
    }

    pub fn names(&self) -> Vec<String> {
        self.map.keys().cloned().collect()
    }

    pub fn all(&self) -> impl Iterator<Item = (&String, &Served)> {
        self.map.iter()
    }

    /// The store named `name`; "" names the only store of a server that
    /// serves one.
    pub fn get(&self, name: &str) -> Result<&Served, Status> {
        if name.is_empty() {
            if self.map.len() == 1 {
                return Ok(self.map.values().next().expect("one store"));
            }
            return Err(Status::invalid_argument(format!("this server serves {} stores; name one of: {}", self.map.len(), self.names().join(", "))));
        }
        self.map.get(name).ok_or_else(|| Status::not_found(format!("no store named {name:?} is served here (served: {})", self.names().join(", "))))
    }
}

fn store_name(p: &Path) -> Result<String, StoreError> {
    let canon = p.canonicalize().map_err(|source| StoreError::File { path: p.to_path_buf(), source })?;
    canon
        .file_name()
        .and_then(|n| n.to_str())
        .map(str::to_owned)
        .ok_or_else(|| StoreError::Invalid(format!("{}: a store's directory name must be valid UTF-8", p.display())))
}
