"""SolidGraph: a graph engine native to solid-state storage.

Graphs, edge weights and labels, and node tensors live on SSD pages; the
graph work (neighbor reads, sampling, analytics) runs in the Rust engine and
only results cross into Python, as numpy arrays.

    report = solidgraph.import_graph("cora.sg", edges, {"x": features}, undirected=True)
    g = solidgraph.open("cora.sg")
    indptr, indices = g.neighbors([0, 1, 2])
    x = g.tensor("x", indices)
    s = g.sample_neighbors([0, 1], [10, 5], tensors=["x"])
    levels = g.bfs(0)

Submodules, imported on first use: `solidgraph.torch` (NeighborLoader; needs
torch), `solidgraph.pyg` (PyG FeatureStore/GraphStore/NeighborSampler; needs
torch_geometric), `solidgraph.datasets` (Planetoid reader, R-MAT generator),
`solidgraph.infer` (export PyG models for `Graph.infer`; needs torch to export),
`solidgraph.distributed` (a graph over the shard servers of `solidgraph
partition`; needs grpcio).

Errors derive from `SolidGraphError`: `CorruptionError`, `StaleError`,
`FormatError`, `NotFoundError` (a LookupError), `LockedError`,
`InvalidArgumentError` (a ValueError), `SolidGraphIOError` (an OSError) and
`OverBudgetError` (a MemoryError: an algorithm's state past
`set_state_budget`'s budget, by default the machine's memory).
"""

import importlib

from solidgraph._native import (
    CorruptionError,
    FormatError,
    Graph,
    InferModel,
    InvalidArgumentError,
    LockedError,
    NotFoundError,
    OverBudgetError,
    Sample,
    SampleLoader,
    SolidGraphError,
    SolidGraphIOError,
    StaleError,
    __version__,
    bench_io,
    import_graph,
    open,
    set_state_budget,
    state_budget,
)

__all__ = [
    "CorruptionError",
    "FormatError",
    "Graph",
    "InferModel",
    "InvalidArgumentError",
    "LockedError",
    "NotFoundError",
    "OverBudgetError",
    "Sample",
    "SampleLoader",
    "SolidGraphError",
    "SolidGraphIOError",
    "StaleError",
    "__version__",
    "bench_io",
    "connect",
    "import_graph",
    "open",
    "set_state_budget",
    "state_budget",
]

_SUBMODULES = ("client", "datasets", "distributed", "infer", "pyg", "torch")


def connect(addr, token=None, tls=None, store="", timeout=None, max_message=64 << 20, native=True, shm="auto", shm_bytes=128 << 20, shm_slot_bytes=16 << 20):
    """A store served by `solidgraph serve` at `addr`, with the methods of a
    local Graph: see `solidgraph.client` (needs solidgraph[client])."""
    from solidgraph.client import connect as _connect

    return _connect(
        addr, token=token, tls=tls, store=store, timeout=timeout, max_message=max_message, native=native, shm=shm, shm_bytes=shm_bytes, shm_slot_bytes=shm_slot_bytes
    )


def __getattr__(name):
    # `import solidgraph` needs numpy only; torch and torch_geometric load
    # when their submodule is first used.
    if name in _SUBMODULES:
        return importlib.import_module(f"solidgraph.{name}")
    raise AttributeError(f"module 'solidgraph' has no attribute {name!r}")
