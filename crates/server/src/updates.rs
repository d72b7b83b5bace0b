//! The Updates service: the store's update API (each batch validated whole
//! and logged as one WAL record, so a refused request changes nothing),
//! Flush and Merge. A reply means the batch is applied, and durable unless
//! the request said `nosync`.

use std::sync::Arc;

use solidgraph_store::{DType, Store};
use tonic::{Request, Response, Status};

use crate::arrays;
use crate::errors::OrStatus;
use crate::gate::Gate;
use crate::proto::updates_server::Updates;
use crate::proto::*;
use crate::stores::Stores;
use crate::telemetry;

pub struct UpdatesService {
    pub stores: Arc<Stores>,
    pub gate: Arc<Gate>,
}

fn internal(store: &Store, mut ids: Vec<u64>) -> Result<Vec<u64>, Status> {
    store.to_internal(&mut ids).or_status()?;
    Ok(ids)
}

/// Rows of tensor `name` for `n` vertices, checked against its dtype and dim.
fn tensor_rows(s: &Store, name: &str, a: Option<&Array>, n: u64) -> Result<Vec<u8>, Status> {
    let t = s.tensor_meta(name).or_status()?;
    let dt: DType = t.dtype;
    Ok(arrays::rows(a, &format!("rows of tensor {name:?}"), dt.name(), dt.size(), t.dim, n)?.to_vec())
}

impl UpdatesService {
    fn store(&self, name: &str) -> Result<Arc<Store>, Status> {
        let s = self.stores.get(name)?;
        if !s.writable {
            return Err(Status::failed_precondition("this server serves the store read-only"));
        }
        Ok(s.store.clone())
    }

    /// Runs the update `work` and replies with the pending update count.
    async fn update(
        &self,
        method: &'static str,
        name: &str,
        bytes: u64,
        work: impl FnOnce(&Store) -> Result<(), Status> + Send + 'static,
    ) -> Result<Response<UpdateReply>, Status> {
        let s = self.store(name)?;
        telemetry::request_bytes(method, bytes);
        let pending = self
            .gate
            .run(method, move || {
                work(&s)?;
                Ok(s.pending_updates())
            })
            .await?;
        Ok(Response::new(UpdateReply { pending_updates: pending }))
    }

    fn pairs(&self, src: Option<&Array>, dst: Option<&Array>) -> Result<(Vec<u64>, Vec<u64>), Status> {
        let max = self.gate.limits.max_ids;
        let (s, d) = (arrays::ids(src, "src", max)?, arrays::ids(dst, "dst", max)?);
        if s.len() != d.len() {
            return Err(Status::invalid_argument(format!("{} sources but {} destinations", s.len(), d.len())));
        }
        Ok((s, d))
    }
}

fn size(a: &Option<Array>) -> u64 {
    a.as_ref().map_or(0, |a| a.data.len() as u64)
}

#[tonic::async_trait]
impl Updates for UpdatesService {
    async fn update_graph(&self, req: Request<tonic::Streaming<UpdateGraphRequest>>) -> Result<Response<UpdateGraphReply>, Status> {
        crate::update_graph::update_graph(self.stores.clone(), self.gate.clone(), req).await
    }

    async fn add_vertices(&self, req: Request<AddVerticesRequest>) -> Result<Response<AddVerticesReply>, Status> {
        let r = req.into_inner();
        let s = self.store(&r.store)?;
        if r.count == 0 || r.count > self.gate.limits.max_ids as u64 {
            return Err(Status::invalid_argument(format!("count {} must be in 1..={}", r.count, self.gate.limits.max_ids)));
        }
        let range = self
            .gate
            .run("AddVertices", move || {
                let mut rows = Vec::with_capacity(r.tensors.len());
                for (name, a) in &r.tensors {
                    rows.push((name.clone(), tensor_rows(&s, name, Some(a), r.count)?));
                }
                s.add_vertices(r.count, &rows, !r.nosync).or_status()
            })
            .await?;
        Ok(Response::new(AddVerticesReply { first: range.start, count: range.end - range.start }))
    }

    async fn delete_vertices(&self, req: Request<DeleteVerticesRequest>) -> Result<Response<UpdateReply>, Status> {
        let r = req.into_inner();
        let ids = arrays::ids(r.ids.as_ref(), "ids", self.gate.limits.max_ids)?;
        self.update("DeleteVertices", &r.store, size(&r.ids), move |s| s.delete_vertices(&internal(s, ids)?, !r.nosync).or_status()).await
    }

    async fn add_edges(&self, req: Request<AddEdgesRequest>) -> Result<Response<UpdateReply>, Status> {
        let r = req.into_inner();
        let (src, dst) = self.pairs(r.src.as_ref(), r.dst.as_ref())?;
        let n = src.len();
        let w = r.weights.as_ref().map(|a| arrays::f32s(Some(a), "weights", n)).transpose()?;
        let l = r.labels.as_ref().map(|a| arrays::u32s(Some(a), "labels", n)).transpose()?;
        self.update("AddEdges", &r.store, size(&r.src) * 2, move |s| {
            let (src, dst) = (internal(s, src)?, internal(s, dst)?);
            s.add_edges(&src, &dst, w.as_deref(), l.as_deref(), !r.nosync).or_status()
        })
        .await
    }

    async fn delete_edges(&self, req: Request<DeleteEdgesRequest>) -> Result<Response<UpdateReply>, Status> {
        let r = req.into_inner();
        let (src, dst) = self.pairs(r.src.as_ref(), r.dst.as_ref())?;
        self.update("DeleteEdges", &r.store, size(&r.src) * 2, move |s| {
            let (src, dst) = (internal(s, src)?, internal(s, dst)?);
            s.delete_edges(&src, &dst, !r.nosync).or_status()
        })
        .await
    }

    async fn update_edge_weights(&self, req: Request<UpdateEdgeWeightsRequest>) -> Result<Response<UpdateReply>, Status> {
        let r = req.into_inner();
        let (src, dst) = self.pairs(r.src.as_ref(), r.dst.as_ref())?;
        let w = arrays::f32s(r.weights.as_ref(), "weights", src.len())?;
        self.update("UpdateEdgeWeights", &r.store, size(&r.src) * 3, move |s| {
            let (src, dst) = (internal(s, src)?, internal(s, dst)?);
            s.update_edge_weights(&src, &dst, &w, !r.nosync).or_status()
        })
        .await
    }

    async fn update_tensor(&self, req: Request<UpdateTensorRequest>) -> Result<Response<UpdateReply>, Status> {
        let r = req.into_inner();
        let ids = arrays::ids(r.ids.as_ref(), "ids", self.gate.limits.max_ids)?;
        let bytes = size(&r.rows);
        self.update("UpdateTensor", &r.store, bytes, move |s| {
            let rows = tensor_rows(s, &r.name, r.rows.as_ref(), ids.len() as u64)?;
            s.update_tensor(&r.name, &internal(s, ids)?, &rows, !r.nosync).or_status()
        })
        .await
    }

    async fn flush(&self, req: Request<FlushRequest>) -> Result<Response<UpdateReply>, Status> {
        let r = req.into_inner();
        self.update("Flush", &r.store, 0, |s| s.flush().or_status()).await
    }

    async fn merge(&self, req: Request<MergeRequest>) -> Result<Response<MergeReply>, Status> {
        let r = req.into_inner();
        let s = self.store(&r.store)?;
        let rep = self.gate.run("Merge", move || s.merge().or_status()).await?;
        Ok(Response::new(MergeReply { pages_written: rep.pages_written, updates_merged: rep.updates }))
    }
}
