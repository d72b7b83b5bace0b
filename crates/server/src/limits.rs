//! The server's limits: every request's size and work is bounded, and so
//! is the number running at once.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest request or response message, in bytes.
    pub max_message_bytes: usize,
    /// Most vertex ids (or edges) in one request.
    pub max_ids: usize,
    /// Largest sampling fanout.
    pub max_fanout: i64,
    /// Requests running at once (each holds a blocking thread).
    pub max_concurrent: usize,
    /// Requests waiting for one of those slots; more are refused with
    /// RESOURCE_EXHAUSTED instead of queueing without bound.
    pub max_queued: usize,
    /// Longest a request may run; a client's shorter deadline wins.
    pub deadline: Duration,
    /// Bytes of result per streamed message.
    pub chunk_bytes: usize,
    /// Bytes of edge and tensor chunks one UpdateGraph stream may send (the
    /// server spools them to disk under its data dir until the build).
    pub max_graph_bytes: u64,
    /// Most vertices a store built by UpdateGraph may have (declared, or the
    /// largest id + 1): a few edges naming a huge id would otherwise ask the
    /// build for work and disk in proportion to the id (lower lists and
    /// self-loops cost something per vertex).
    pub max_graph_vertices: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message_bytes: 64 << 20,
            max_ids: 1 << 20,
            max_fanout: 1000,
            max_concurrent: 64,
            max_queued: 4096,
            deadline: Duration::from_secs(300),
            chunk_bytes: 16 << 20,
            max_graph_bytes: 64 << 30,
            max_graph_vertices: 1 << 32,
        }
    }
}

impl Limits {
    /// Checks the limits fit together.
    pub fn check(&self) -> Result<(), String> {
        if self.max_concurrent == 0 || self.max_ids == 0 || self.max_fanout < 1 || self.max_graph_vertices == 0 {
            return Err("limits must be at least 1".into());
        }
        // A message is its chunks' bytes plus their headers (name, dtype,
        // shape, offset: well under 1 KiB each, a few per message).
        if self.chunk_bytes == 0 || self.chunk_bytes + (16 << 10) > self.max_message_bytes {
            return Err(format!("chunks of {} bytes do not fit in messages of {} bytes", self.chunk_bytes, self.max_message_bytes));
        }
        Ok(())
    }
}
