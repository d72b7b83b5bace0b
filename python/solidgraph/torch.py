"""PyTorch loaders over a SolidGraph store (needs torch; uses torch_geometric
when it is installed).

`NeighborLoader` is a drop-in for `torch_geometric.loader.NeighborLoader`:
the same batches (`x`, `y`, `edge_index`, `n_id`, `e_id`, `batch_size`,
`num_sampled_nodes`, `num_sampled_edges`, `input_id`), but sampled and
gathered in the engine by Rust threads ahead of the training loop, straight
from the SSD pages, without loading the graph or the features.

    g = solidgraph.open("papers.sg", cache_bytes=4 << 30)
    loader = NeighborLoader(g, train_idx, [15, 10], batch_size=1024, shuffle=True)
    for batch in loader:
        out = model(batch.x, batch.edge_index)[: batch.batch_size]
        loss = F.cross_entropy(out, batch.y[: batch.batch_size])
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional, Sequence, Union

import numpy as np
import torch

from solidgraph._native import Graph, InvalidArgumentError, NotFoundError, loader_memory

__all__ = ["NeighborLoader", "Batch", "to_numpy_ids"]


@dataclass
class Batch:
    """A sampled mini-batch when torch_geometric is not installed; the same
    fields as the `torch_geometric.data.Data` that PyG's NeighborLoader
    yields. Extra feature tensors are in `tensors` (and as attributes)."""

    x: Optional[torch.Tensor]
    y: Optional[torch.Tensor]
    edge_index: torch.Tensor
    n_id: torch.Tensor
    e_id: torch.Tensor
    batch_size: int
    num_sampled_nodes: list
    num_sampled_edges: list
    input_id: torch.Tensor
    tensors: dict = field(default_factory=dict)

    @property
    def num_nodes(self) -> int:
        return int(self.n_id.numel())

    def __getattr__(self, name: str) -> Any:
        tensors = self.__dict__.get("tensors", {})
        if name in tensors:
            return tensors[name]
        raise AttributeError(name)

    def to(self, device, non_blocking: bool = False) -> "Batch":
        move = lambda t: t.to(device, non_blocking=non_blocking) if isinstance(t, torch.Tensor) else t  # noqa: E731
        return Batch(
            move(self.x), move(self.y), move(self.edge_index), move(self.n_id), move(self.e_id), self.batch_size,
            self.num_sampled_nodes, self.num_sampled_edges, move(self.input_id), {k: move(v) for k, v in self.tensors.items()},
        )


def _data_class():
    try:
        from torch_geometric.data import Data
    except ImportError:
        return None
    return Data


def to_numpy_ids(nodes: Any, num_nodes: int) -> np.ndarray:
    """Input nodes as int64 ids: None (all), a bool mask, or ids as a tensor,
    array or sequence."""
    if nodes is None:
        return np.arange(num_nodes, dtype=np.int64)
    if isinstance(nodes, torch.Tensor):
        nodes = nodes.detach().cpu().numpy()
    a = np.asarray(nodes)
    if a.dtype == bool:
        if a.shape != (num_nodes,):
            raise InvalidArgumentError(f"a node mask must have one entry per vertex ({num_nodes}), not shape {a.shape}")
        return np.flatnonzero(a).astype(np.int64)
    if a.ndim != 1:
        raise InvalidArgumentError(f"input nodes must be 1-D, not shape {a.shape}")
    if a.size == 0:
        return np.zeros(0, np.int64)
    if not np.issubdtype(a.dtype, np.integer):
        raise InvalidArgumentError(f"input nodes must be integers or a bool mask, not {a.dtype}")
    return a.astype(np.int64, copy=False)


def _no_tensor(name: str, have: Any) -> NotFoundError:
    """The error for a tensor name the store lacks, as the engine raises it."""
    e = NotFoundError(f"no tensor named {name!r} (the store has: {', '.join(have) or 'none'})")
    e.name = name
    return e


def _fanouts(num_neighbors: Any) -> list:
    values = getattr(num_neighbors, "values", num_neighbors)  # PyG's NumNeighbors
    if isinstance(values, dict):
        raise InvalidArgumentError("per-edge-type fanouts are for heterogeneous graphs; give one list of ints")
    return [int(k) for k in values]


class NeighborLoader:
    """Mini-batches of GraphSAGE neighbor samples with features, as PyG's
    `NeighborLoader(data, num_neighbors, input_nodes=..., batch_size=...)`
    gives them, from a SolidGraph store.

    - `input_nodes`: ids (tensor, array, sequence), a bool mask, or None
      (all vertices). Each epoch yields every input node exactly once as a
      seed (in order, or reshuffled every epoch with `shuffle=True`).
    - `num_neighbors`: fanout per hop (-1: all neighbors).
    - `features`: node tensors gathered for every sampled node; the first is
      `x`, the others keep their names. `labels`: the tensor that becomes `y`
      (None: no labels).
    - `num_workers` Rust threads sample `prefetch` batches ahead; no Python
      multiprocessing. Neighbors are sampled `lookahead` batches ahead of
      the feature gather, so a store opened with a row cache keeps the rows
      those batches will ask for, in groups of `lookahead // 2` that read
      the lists they share once. `direction="in"` samples the nodes that point at each
      node (PyG's default; a directed store needs its in-edges).
    - `seed`: None draws fresh randomness every epoch; an int makes every
      epoch reproducible (epoch k's order and samples depend on (seed, k)).
    - Yields `torch_geometric.data.Data` when torch_geometric is importable,
      else `solidgraph.torch.Batch`. Tensors share the engine's buffers
      (`torch.from_numpy`, no copy).
    - Safe to iterate in a forked child (e.g. a DataLoader worker): the
      store is reopened and the threads restarted there.
    - Memory outside the store's caches is bounded by `memory_bytes`, a
      function of `batch_size`, the fanouts, the gathered rows' bytes,
      `prefetch`, `lookahead` and `num_workers` (`memory` has it by part):
      batches sampled ahead hold ids only, `prefetch` batches hold rows,
      Python holds two. The bound counts every draw as a new node, and a
      batch's first hop as drawing min(degree, fanout) for each of its
      seeds, the `batch_size` seeds of `input_nodes` that draw the most
      (degrees as of the loader's creation).
    - `memory_budget` (bytes): the loader splits it itself between a page
      cache, a row cache and its buffers (a cap on the bytes of the batches
      it holds, at their real sizes, that `prefetch` and `lookahead` then
      run within: room for two batches at their most, a sampling group
      reserving each batch's most from its seeds' degrees; everything above
      the minimum goes to the caches) and samples through its own
      read-only handle on `g`'s store opened with those caches; `g`'s own
      caches are not part of it (open `g` with a small `cache_bytes`). A
      budget below the minimum for these batches is an InvalidArgumentError
      naming the minimum. `memory` then also has the split.
    - `stats`: where the latest epoch's pipeline waited (for the cap, for
      batches) and its store handle's cache hits and bytes read.
    """

    def __init__(
        self,
        g: Graph,
        input_nodes: Any,
        num_neighbors: Sequence[int],
        batch_size: int = 1,
        shuffle: bool = False,
        features: Union[str, Sequence[str]] = ("x",),
        labels: Optional[str] = "y",
        prefetch: int = 4,
        num_workers: int = 2,
        direction: str = "in",
        replace: bool = False,
        seed: Optional[int] = None,
        drop_last: bool = False,
        weighted: bool = False,
        max_fanout: int = 10000,
        lookahead: int = 32,
        memory_budget: Optional[int] = None,
    ):
        if batch_size < 1:
            raise InvalidArgumentError(f"batch_size must be at least 1, not {batch_size}")
        self.graph = g
        self.memory_budget = memory_budget
        self.input_nodes = to_numpy_ids(input_nodes, g.num_nodes)
        self.num_neighbors = _fanouts(num_neighbors)
        self.batch_size = int(batch_size)
        self.shuffle = shuffle
        self.features = [features] if isinstance(features, str) else list(features)
        self.labels = labels
        self.prefetch = prefetch
        self.num_workers = num_workers
        self.direction = direction
        self.replace = replace
        self.seed = seed
        self.drop_last = drop_last
        self.weighted = weighted
        self.max_fanout = max_fanout
        self.lookahead = lookahead
        self._epoch = 0
        self._tensors = list(dict.fromkeys(self.features + ([labels] if labels is not None else [])))
        self._data = _data_class()
        have = g.tensors
        missing = [t for t in self._tensors if t not in have]
        if missing:
            raise _no_tensor(missing[0], have)
        # Fanout -1 (every neighbour) has no bound: no report, no budget. A
        # remote or sharded graph (solidgraph.connect, solidgraph.distributed)
        # holds its caches in the servers: no report either.
        local = isinstance(g, Graph)
        if memory_budget is not None and not local:
            raise InvalidArgumentError("memory_budget needs a local Graph (solidgraph.open); the servers size their own caches")
        bounded = local and all(k >= 1 for k in self.num_neighbors)
        self.memory = None
        if bounded or memory_budget is not None:
            self.memory = loader_memory(
                g, self.batch_size, self.num_neighbors, self._tensors, direction=direction,
                workers=num_workers, prefetch=prefetch, lookahead=lookahead, memory_budget=memory_budget,
                seeds=self.input_nodes, replace=replace,
            )
        self._store = g
        self._it = None
        self._buffer_bytes = None
        if memory_budget is not None:
            self._buffer_bytes = self.memory["buffer_bytes"]
            # Caches of its own, g's vertex order maps (charged to the budget).
            self._store = g._sibling(self.memory["cache_bytes"], self.memory["row_cache_bytes"])

    @property
    def memory_bytes(self) -> Optional[int]:
        """The bound on the bytes this loader holds outside the store's
        caches (see the class documentation); None with a fanout of -1 or a
        remote graph."""
        return None if self.memory is None else int(self.memory["total"])

    def __len__(self) -> int:
        n = len(self.input_nodes)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _positions(self, epoch: int) -> list:
        n = len(self.input_nodes)
        if self.shuffle:
            rng = np.random.default_rng(None if self.seed is None else [self.seed, epoch])
            pos = rng.permutation(n)
        else:
            pos = np.arange(n, dtype=np.int64)
        return [pos[i : i + self.batch_size] for i in range(0, len(self) * self.batch_size, self.batch_size)]

    def _sample_seed(self, epoch: int) -> int:
        if self.seed is None:
            return int.from_bytes(os.urandom(8), "little")
        return int(np.random.default_rng([self.seed, epoch, 1]).integers(0, 2**63))

    def __iter__(self) -> Iterator[Any]:
        epoch = self._epoch
        self._epoch += 1
        positions = self._positions(epoch)
        if not positions:
            return iter(())
        it = self._store.sample_loader(
            [self.input_nodes[p] for p in positions],
            self.num_neighbors,
            replace=self.replace,
            weighted=self.weighted,
            direction=self.direction,
            seed=self._sample_seed(epoch),
            tensors=self._tensors,
            workers=self.num_workers,
            prefetch=self.prefetch,
            max_fanout=self.max_fanout,
            lookahead=self.lookahead,
            # Only a budgeted (local) loader has a cap to pass.
            **({} if self._buffer_bytes is None else {"buffer_bytes": self._buffer_bytes}),
        )
        self._it = it
        return self._batches(it, positions)

    @property
    def stats(self) -> dict:
        """The latest epoch's pipeline (`pipeline`: groups sampled ahead,
        waits for the buffer cap and the consumer's waits for batches, see
        `SampleLoader.stats`) and the counters of the store handle it
        samples through (`store`: `Graph.stats`; `g`'s own without
        `memory_budget`)."""
        # A remote graph's loader and handle may report neither.
        stats = getattr(self._store, "stats", None)
        return {"pipeline": getattr(self._it, "stats", None), "store": stats() if stats else None}

    def _batches(self, it, positions) -> Iterator[Any]:
        for pos, s in zip(positions, it):
            yield self._convert(s, pos)

    def _convert(self, s, pos: np.ndarray) -> Any:
        t = {name: torch.from_numpy(a) for name, a in s.tensors.items()}
        x = t[self.features[0]] if self.features else None
        y = t[self.labels] if self.labels is not None else None
        extra = {name: t[name] for name in self.features[1:]}
        edge_index = torch.from_numpy(s.edge_index)
        n_id = torch.from_numpy(s.node)
        e_id = torch.from_numpy(s.edge)
        input_id = torch.from_numpy(pos)
        batch_size = int(s.num_sampled_nodes[0])
        nsn, nse = s.num_sampled_nodes.tolist(), s.num_sampled_edges.tolist()
        if self._data is None:
            return Batch(x, y, edge_index, n_id, e_id, batch_size, nsn, nse, input_id, extra)
        data = self._data(edge_index=edge_index)
        if x is not None:
            data.x = x
        if y is not None:
            data.y = y
        for k, v in extra.items():
            data[k] = v
        data.num_nodes = len(s.node)
        data.n_id = n_id
        data.e_id = e_id
        data.num_sampled_nodes = nsn
        data.num_sampled_edges = nse
        data.input_id = input_id
        data.batch_size = batch_size
        return data

    def __repr__(self) -> str:
        return f"NeighborLoader({self.graph.path}, {len(self.input_nodes)} input nodes, num_neighbors={self.num_neighbors}, batch_size={self.batch_size})"
