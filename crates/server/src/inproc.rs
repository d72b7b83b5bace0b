//! The Graph and Updates services as `serve` routes them (the Graph
//! service's replies framed by `replies`, the message size limits), over
//! given stores and without a network, auth, health or reflection: for
//! callers in the same process, such as the fuzz targets, that send
//! HTTP/2 requests' bodies through the same decoding and checks.

use std::sync::Arc;

use tonic::service::Routes;

use crate::gate::Gate;
use crate::graph::GraphService;
use crate::limits::Limits;
use crate::proto::updates_server::UpdatesServer;
use crate::replies::Replies;
use crate::stores::Stores;
use crate::updates::UpdatesService;

/// The routes of the Graph and Updates services over `stores`.
pub fn routes(stores: Arc<Stores>, limits: Limits) -> Routes {
    let max = limits.max_message_bytes;
    let gate = Arc::new(Gate::new(limits));
    let graph = Replies::new(
        Arc::new(GraphService { stores: stores.clone(), gate: gate.clone(), shm: Arc::new(crate::shm::ShmRegions::new(Default::default())) }),
        max,
    );
    let updates = UpdatesServer::new(UpdatesService { stores, gate }).max_decoding_message_size(max).max_encoding_message_size(max);
    Routes::new(graph).add_service(updates)
}
