"""PyG remote backend over a SolidGraph store (needs torch_geometric).

    fs, gs = FeatureStore(g), GraphStore(g)
    loader = torch_geometric.loader.NodeLoader(
        data=(fs, gs), node_sampler=NeighborSampler(g, [10, 5]), input_nodes=train_idx, batch_size=512)

`NeighborSampler` implements `BaseSampler.sample_from_nodes` with the
engine's sampler (no pyg-lib or torch-sparse, and no CSC copy of the graph in
RAM, which PyG's own sampler builds from a GraphStore). `FeatureStore`
serves node tensors, one batched store read per tensor in
`_multi_get_tensor`. `GraphStore` describes the graph and hands out its
edges whole only for small graphs.
"""

from __future__ import annotations

import os
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch_geometric.data as pyg_data
from torch_geometric.data.feature_store import TensorAttr
from torch_geometric.data.graph_store import EdgeAttr, EdgeLayout
from torch_geometric.sampler import BaseSampler, NodeSamplerInput, SamplerOutput

from solidgraph._native import Graph, InvalidArgumentError
from solidgraph.torch import _fanouts, _no_tensor

__all__ = ["FeatureStore", "GraphStore", "NeighborSampler"]


def _index(index: Any, num_nodes: int) -> Optional[np.ndarray]:
    """A TensorAttr index as int64 ids; None for all rows."""
    if index is None:
        return None
    if isinstance(index, slice):
        return np.arange(num_nodes, dtype=np.int64)[index]
    if isinstance(index, int):
        return np.array([index], np.int64)
    if isinstance(index, torch.Tensor):
        index = index.detach().cpu().numpy()
    a = np.asarray(index)
    if a.dtype == bool:
        return np.flatnonzero(a)
    return a.reshape(-1)


class FeatureStore(pyg_data.FeatureStore):
    """The node tensors of a store as a read-only PyG FeatureStore. Tensors
    have `group_name=None` (homogeneous) and their store name as
    `attr_name`. `tensors` limits the ones listed by `get_all_tensor_attrs`
    (which PyG's loaders gather for every batch); default: all."""

    def __init__(self, g: Graph, tensors: Optional[Sequence[str]] = None):
        super().__init__()
        self.graph = g
        have = g.tensors
        names = list(have) if tensors is None else list(tensors)
        for name in names:
            if name not in have:
                raise _no_tensor(name, have)
        self._names = names

    def _read(self, attr: TensorAttr) -> torch.Tensor:
        n = self.graph.num_nodes
        ids = _index(attr.index, n)
        a = self.graph.tensor(attr.attr_name, np.arange(n) if ids is None else ids)
        return torch.from_numpy(a)

    def _check(self, attr: TensorAttr) -> bool:
        return attr.group_name is None and attr.attr_name in self.graph.tensors

    def _get_tensor(self, attr: TensorAttr) -> Optional[torch.Tensor]:
        if not self._check(attr):
            return None
        return self._read(attr)

    def _multi_get_tensor(self, attrs: List[TensorAttr]) -> List[Optional[torch.Tensor]]:
        # One store call per tensor: the engine reads each page once for the
        # whole batch of rows.
        return [self._get_tensor(attr) for attr in attrs]

    def _get_tensor_size(self, attr: TensorAttr) -> Optional[Tuple[int, ...]]:
        if not self._check(attr):
            return None
        dtype, dim = self.graph.tensors[attr.attr_name]
        rows = self.graph.num_nodes
        ids = _index(attr.index, rows) if attr.is_set("index") else None
        if ids is not None:
            rows = len(ids)
        return (rows,) if dim == 1 else (rows, dim)

    def get_all_tensor_attrs(self) -> List[TensorAttr]:
        return [TensorAttr(group_name=None, attr_name=name) for name in self._names]

    def _put_tensor(self, tensor, attr: TensorAttr) -> bool:
        raise NotImplementedError("a SolidGraph FeatureStore is read-only: write tensors with solidgraph.import_graph")

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        raise NotImplementedError("a SolidGraph FeatureStore is read-only")

    def __repr__(self) -> str:
        return f"solidgraph.pyg.FeatureStore({self.graph.path}, tensors={self._names})"


class GraphStore(pyg_data.GraphStore):
    """The graph of a store as a read-only PyG GraphStore (homogeneous:
    `edge_type=None`). CSR is the out-lists; CSC (in-lists) is listed when
    the store is undirected or keeps in-edges. `get_edge_index` builds the
    whole edge index in RAM, which is what SolidGraph exists to avoid, so it
    refuses graphs above `max_edges` (sample with `NeighborSampler`
    instead)."""

    def __init__(self, g: Graph, max_edges: int = 1 << 24):
        super().__init__()
        self.graph = g
        self.max_edges = max_edges

    def _has_in(self) -> bool:
        return self.graph.has_in_edges

    def get_all_edge_attrs(self) -> List[EdgeAttr]:
        n = self.graph.num_nodes
        attrs = [EdgeAttr(None, EdgeLayout.CSR, size=(n, n))]
        if self._has_in():
            attrs.insert(0, EdgeAttr(None, EdgeLayout.CSC, size=(n, n)))
        return attrs

    def _get_edge_index(self, edge_attr: EdgeAttr) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
        if edge_attr.edge_type is not None:
            return None
        m = self.graph.num_edges
        if m > self.max_edges:
            raise InvalidArgumentError(
                f"the graph has {m} edges, more than max_edges={self.max_edges}: building its whole edge index in RAM "
                "is what a SolidGraph store avoids; sample with solidgraph.pyg.NeighborSampler, or raise max_edges"
            )
        n = self.graph.num_nodes
        layout = EdgeLayout(edge_attr.layout)
        ids = np.arange(n, dtype=np.int64)
        if layout == EdgeLayout.CSC:
            if not self._has_in():
                return None
            colptr, row = self.graph.neighbors(ids, "in")[:2]
            return torch.from_numpy(colptr), torch.from_numpy(row)
        indptr, col = self.graph.neighbors(ids, "out")[:2]
        if layout == EdgeLayout.CSR:
            return torch.from_numpy(indptr), torch.from_numpy(col)
        row = np.repeat(ids, np.diff(indptr))
        return torch.from_numpy(row), torch.from_numpy(col)

    def _put_edge_index(self, edge_index, edge_attr: EdgeAttr) -> bool:
        raise NotImplementedError("a SolidGraph GraphStore is read-only: import edges with solidgraph.import_graph")

    def _remove_edge_index(self, edge_attr: EdgeAttr) -> bool:
        raise NotImplementedError("a SolidGraph GraphStore is read-only")

    def __repr__(self) -> str:
        return f"solidgraph.pyg.GraphStore({self.graph.path})"


class NeighborSampler(BaseSampler):
    """GraphSAGE neighbor sampling in the engine, as a PyG BaseSampler for
    `torch_geometric.loader.NodeLoader`. `g`: a Graph (or one of our
    stores). `seed`: None for fresh randomness per batch; an int makes the
    sequence of batches reproducible (one engine seed drawn per call)."""

    def __init__(
        self,
        g: Any,
        num_neighbors: Sequence[int],
        replace: bool = False,
        weighted: bool = False,
        direction: str = "in",
        seed: Optional[int] = None,
        max_fanout: int = 10000,
    ):
        if isinstance(g, tuple):
            g = g[-1]
        self.graph: Graph = getattr(g, "graph", g)
        self.num_neighbors = _fanouts(num_neighbors)
        self.replace = replace
        self.weighted = weighted
        self.direction = direction
        self.max_fanout = max_fanout
        self._rng = None if seed is None else np.random.default_rng(seed)

    def _seed(self) -> int:
        if self._rng is None:
            return int.from_bytes(os.urandom(8), "little")
        return int(self._rng.integers(0, 2**63))

    def sample_from_nodes(self, index: NodeSamplerInput, **kwargs) -> SamplerOutput:
        if index.input_type is not None:
            raise InvalidArgumentError("solidgraph.pyg.NeighborSampler samples homogeneous graphs (input_type must be None)")
        if index.time is not None:
            raise InvalidArgumentError("temporal sampling (seed times) is not supported")
        s = self.graph.sample_neighbors(
            index.node.numpy(),
            self.num_neighbors,
            replace=self.replace,
            weighted=self.weighted,
            direction=self.direction,
            seed=self._seed(),
            max_fanout=self.max_fanout,
        )
        return SamplerOutput(
            node=torch.from_numpy(s.node),
            row=torch.from_numpy(s.row),
            col=torch.from_numpy(s.col),
            edge=torch.from_numpy(s.edge),
            batch=None,
            num_sampled_nodes=s.num_sampled_nodes.tolist(),
            num_sampled_edges=s.num_sampled_edges.tolist(),
            metadata=(index.input_id, index.time),
        )

    def sample_from_edges(self, index, neg_sampling=None):
        raise NotImplementedError("link-level sampling (LinkNeighborLoader) is not supported yet; use NodeLoader")
