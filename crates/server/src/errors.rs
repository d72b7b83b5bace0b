//! Store and engine errors as gRPC statuses: the code keeps the error's
//! kind (a client maps it back to its exception class), the message is the
//! error's own, which names the vertex, tensor or page.

use solidgraph_engine::EngineError;
use solidgraph_store::{Front, StoreError};
use tonic::{Code, Status};

pub fn store_status(e: &StoreError) -> Status {
    let code = match e {
        StoreError::Invalid(_)
        | StoreError::VertexOutOfRange { .. }
        | StoreError::Parse { .. }
        | StoreError::BadInput { .. }
        | StoreError::NoDirection(_)
        | StoreError::Lacks { .. } => Code::InvalidArgument,
        StoreError::NoSuchTensor { .. } => Code::NotFound,
        StoreError::Corrupt { .. } => Code::DataLoss,
        // The store is intact; a reopen reads it.
        StoreError::Stale { .. } => Code::Aborted,
        StoreError::ReadOnly | StoreError::Locked { .. } | StoreError::NewerFormat { .. } | StoreError::OlderFormat { .. } | StoreError::NotAStore { .. } => {
            Code::FailedPrecondition
        }
        StoreError::Exists { .. } => Code::AlreadyExists,
        StoreError::File { source, .. } if source.raw_os_error() == Some(28) => Code::ResourceExhausted,
        StoreError::Io(_) | StoreError::File { .. } => Code::Internal,
    };
    Status::new(code, e.message(Front::Neutral))
}

pub fn engine_status(e: &EngineError) -> Status {
    match e {
        EngineError::Store(s) => store_status(s),
        EngineError::Invalid(m) | EngineError::Unsupported(m) => Status::invalid_argument(m.clone()),
        EngineError::OverBudget { .. } => Status::resource_exhausted(e.to_string()),
        EngineError::Cancelled => Status::cancelled("cancelled: the call was dropped or its deadline passed"),
    }
}

/// `?` on a store or engine result inside a request body.
pub trait OrStatus<T> {
    fn or_status(self) -> Result<T, Status>;
}

impl<T> OrStatus<T> for Result<T, StoreError> {
    fn or_status(self) -> Result<T, Status> {
        self.map_err(|e| store_status(&e))
    }
}

impl<T> OrStatus<T> for Result<T, EngineError> {
    fn or_status(self) -> Result<T, Status> {
        self.map_err(|e| engine_status(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_map_to_codes() {
        assert_eq!(store_status(&StoreError::Invalid("x".into())).code(), Code::InvalidArgument);
        assert_eq!(store_status(&StoreError::NoSuchTensor { name: "x".into(), have: "y".into() }).code(), Code::NotFound);
        assert_eq!(store_status(&StoreError::Corrupt { page: 3, reason: "crc".into() }).code(), Code::DataLoss);
        assert_eq!(store_status(&StoreError::ReadOnly).code(), Code::FailedPrecondition);
        let s = store_status(&StoreError::VertexOutOfRange { vertex: 9, num_nodes: 3 });
        assert_eq!(s.code(), Code::InvalidArgument);
        assert!(s.message().contains("vertex 9"), "{}", s.message());
    }
}
