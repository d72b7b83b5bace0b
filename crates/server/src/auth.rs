//! Bearer-token auth: `--tokens FILE` holds one `TOKEN read|write` per
//! line; every call carries `authorization: Bearer TOKEN`. Without a token
//! file every caller may write, and the server listens on loopback only.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use solidgraph_store::StoreError;
use tonic::{Request, Status};

/// What a token allows; Write includes Read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    Read,
    Write,
}

/// Tokens and their roles (None: no auth).
#[derive(Clone, Default)]
pub struct Tokens {
    map: Option<Arc<HashMap<String, Role>>>,
}

// Never prints the tokens: they are secrets.
impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tokens({} tokens)", self.map.as_ref().map_or(0, |m| m.len()))
    }
}

/// Tokens are bounded so a huge header costs nothing to check.
const MAX_TOKEN: usize = 512;

impl Tokens {
    pub fn none() -> Tokens {
        Tokens { map: None }
    }

    pub fn enabled(&self) -> bool {
        self.map.is_some()
    }

    pub fn parse(path: &Path, text: &str) -> Result<Tokens, StoreError> {
        let bad = |line: usize, reason: String| StoreError::Parse { path: path.to_path_buf(), line: line as u64 + 1, reason };
        let mut map = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut f = line.split_whitespace();
            let (Some(tok), Some(role), None) = (f.next(), f.next(), f.next()) else {
                return Err(bad(i, "expected `TOKEN read|write`".into()));
            };
            let role = match role {
                "read" => Role::Read,
                "write" => Role::Write,
                r => return Err(bad(i, format!("role must be read or write, not {r:?}"))),
            };
            if tok.len() > MAX_TOKEN {
                return Err(bad(i, format!("a token is at most {MAX_TOKEN} bytes")));
            }
            if map.insert(tok.to_owned(), role).is_some() {
                return Err(bad(i, "this token is listed twice".into()));
            }
        }
        if map.is_empty() {
            return Err(StoreError::BadInput { path: path.to_path_buf(), reason: "no tokens (one `TOKEN read|write` per line)".into() });
        }
        Ok(Tokens { map: Some(Arc::new(map)) })
    }

    pub fn load(path: &Path) -> Result<Tokens, StoreError> {
        let text = std::fs::read_to_string(path).map_err(|source| StoreError::File { path: path.to_path_buf(), source })?;
        Tokens::parse(path, &text)
    }

    /// Whether `req` may do what needs `need`.
    pub fn check<T>(&self, req: &Request<T>, need: Role) -> Result<(), Status> {
        let Some(map) = &self.map else { return Ok(()) };
        let header =
            req.metadata().get("authorization").ok_or_else(|| Status::unauthenticated("this server needs a bearer token (authorization: Bearer TOKEN)"))?;
        let token = header
            .to_str()
            .ok()
            .and_then(|h| h.strip_prefix("Bearer "))
            .filter(|t| t.len() <= MAX_TOKEN)
            .ok_or_else(|| Status::unauthenticated("the authorization header must be `Bearer TOKEN`"))?;
        match map.get(token) {
            None => Err(Status::unauthenticated("unknown token")),
            Some(&role) if role < need => Err(Status::permission_denied("this token may read, not write")),
            Some(_) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(auth: Option<&str>) -> Request<()> {
        let mut r = Request::new(());
        if let Some(a) = auth {
            r.metadata_mut().insert("authorization", a.parse().unwrap());
        }
        r
    }

    #[test]
    fn roles() {
        let t = Tokens::parse(Path::new("t"), "# comment\nr0 read\n\nw0 write\n").unwrap();
        assert!(t.check(&req(Some("Bearer r0")), Role::Read).is_ok());
        assert_eq!(t.check(&req(Some("Bearer r0")), Role::Write).unwrap_err().code(), tonic::Code::PermissionDenied);
        assert!(t.check(&req(Some("Bearer w0")), Role::Write).is_ok());
        assert_eq!(t.check(&req(Some("Bearer nope")), Role::Read).unwrap_err().code(), tonic::Code::Unauthenticated);
        assert_eq!(t.check(&req(None), Role::Read).unwrap_err().code(), tonic::Code::Unauthenticated);
        assert_eq!(t.check(&req(Some("r0")), Role::Read).unwrap_err().code(), tonic::Code::Unauthenticated);
        assert!(Tokens::none().check(&req(None), Role::Write).is_ok());
    }

    #[test]
    fn bad_files_name_the_line() {
        let e = Tokens::parse(Path::new("t"), "a read\nb admin\n").unwrap_err().to_string();
        assert!(e.contains("t:2") && e.contains("admin"), "{e}");
        assert!(Tokens::parse(Path::new("t"), "a read\na write\n").unwrap_err().to_string().contains("twice"));
        assert!(Tokens::parse(Path::new("t"), "# nothing\n").is_err());
    }
}
