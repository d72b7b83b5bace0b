//! Oversize messages answered with RESOURCE_EXHAUSTED, the gRPC convention
//! for a request over a size limit. tonic refuses a message over
//! `max_decoding_message_size` with OUT_OF_RANGE before any handler runs
//! (a trailers-only response: the status is in the headers), so a layer
//! around every service rewrites that status on the way out.

use tonic::codegen::http;
use tonic::{Code, Status};

/// The start of tonic's message for a message over its size limit (both
/// directions), which is how its OUT_OF_RANGE is told apart from ours.
const TONIC_TOO_LARGE: &str = "message length too large";

/// `status` as gRPC says it: RESOURCE_EXHAUSTED for a message over the
/// size limit, with a message naming the server's limit; anything else
/// unchanged.
pub fn status(status: Status) -> Status {
    if status.code() == Code::OutOfRange && status.message().contains(TONIC_TOO_LARGE) {
        Status::resource_exhausted(format!("{} (the server's --max-message)", status.message()))
    } else {
        status
    }
}

/// The layer's response mapping: a trailers-only response carrying tonic's
/// oversize OUT_OF_RANGE gets RESOURCE_EXHAUSTED instead.
pub fn response<B>(mut r: http::Response<B>) -> http::Response<B> {
    if r.headers().get(Status::GRPC_STATUS).map(|v| v.as_bytes()) != Some(b"11") {
        return r;
    }
    let Some(s) = Status::from_header_map(r.headers()) else { return r };
    let mapped = status(s);
    if mapped.code() != Code::OutOfRange {
        r.headers_mut().remove(Status::GRPC_MESSAGE);
        if mapped.add_header(r.headers_mut()).is_err() {
            // Only a message that cannot be a header value fails; the code
            // alone still tells the client the kind.
            r.headers_mut().insert(Status::GRPC_STATUS, http::HeaderValue::from_static("8"));
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversize_becomes_resource_exhausted() {
        let tonic_says = Status::out_of_range("Error, decoded message length too large: found 96010 bytes, the limit is: 65536 bytes");
        let r = response(tonic_says.clone().into_http::<()>());
        let s = Status::from_header_map(r.headers()).unwrap();
        assert_eq!(s.code(), Code::ResourceExhausted);
        assert!(s.message().contains("found 96010 bytes") && s.message().contains("--max-message"), "{}", s.message());
        assert_eq!(status(tonic_says).code(), Code::ResourceExhausted);
        // Other statuses, our own OUT_OF_RANGE included, pass unchanged.
        for other in [Status::out_of_range("vertex 9 is out of range"), Status::invalid_argument("x"), Status::ok("")] {
            let r = response(other.clone().into_http::<()>());
            let s = Status::from_header_map(r.headers()).unwrap();
            assert_eq!((s.code(), s.message()), (other.code(), other.message()));
        }
        // A response with no status in its headers (a normal reply) is left alone.
        let plain = http::Response::new(());
        assert!(response(plain).headers().is_empty());
    }
}
