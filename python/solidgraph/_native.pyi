"""Types of the native module (crates/py). `solidgraph` re-exports all of it."""

import os
import pathlib
from typing import Callable, Literal, Mapping, Sequence, TypedDict, Union, final, overload, type_check_only

import numpy as np
import numpy.typing as npt

__version__: str
__all__ = ["Graph", "SolidGraphError", "__version__", "bench_io", "import_graph", "open"]

_StrPath = Union[str, os.PathLike[str]]
#: Vertex ids: any 1-D integer array or a sequence of ints. Negative ids are an error.
_Ids = Union[npt.NDArray[np.integer], Sequence[int]]
#: _Edges: a text/CSV/.npy file, a pair of 1-D .npy files (sources,
#: destinations), a (2, E) integer array, or a (src, dst[, weights]) tuple
#: of arrays.
_Edges = Union[
    _StrPath,
    tuple[_StrPath, _StrPath],
    npt.ArrayLike,
    tuple[_Ids, _Ids],
    tuple[_Ids, _Ids, npt.ArrayLike],
]
#: A node tensor: a (n,) or (n, d) array of float32, float16, int64, int32,
#: uint8 or bool, or a .npy file holding one.
_TensorSource = Union[_StrPath, npt.NDArray[np.generic]]
_I64 = npt.NDArray[np.int64]
_F32 = npt.NDArray[np.float32]
_U32 = npt.NDArray[np.uint32]

class SolidGraphError(Exception):
    """An error from the SolidGraph engine; the message names the file and
    line, or the page, and the reason."""

@type_check_only
class ImportReport(TypedDict):
    num_nodes: int
    num_edges: int
    input_edges: int
    pages: int
    bytes: int
    runs: int
    seconds: float

@type_check_only
class Stats(TypedDict):
    cache_hits: int
    cache_misses: int
    cache_evictions: int
    cache_bytes: int
    cache_budget: int
    pages_read: int
    ios: int
    bytes_read: int

@type_check_only
class VerifyReport(TypedDict):
    pages: int
    edges: int
    tensor_pages: int

@type_check_only
class BenchReport(TypedDict):
    iops: float
    mib_s: float
    p50_us: float
    p99_us: float
    backend: str
    ios: int

def import_graph(
    out: _StrPath,
    edges: _Edges,
    node_tensors: Mapping[str, _TensorSource] | None = None,
    *,
    edge_weights: npt.ArrayLike | None = None,
    edge_labels: _Ids | None = None,
    undirected: bool = False,
    self_loops: bool = False,
    dedup: bool = False,
    weights: bool = False,
    labels: bool = False,
    in_edges: bool = False,
    num_nodes: int | None = None,
    page_size: int = 4096,
    fill_factor: float = 0.9,
    memory_budget: int = 1 << 30,
    members: int = 1,
    progress: bool | Callable[[str, int, int], object] = False,
) -> ImportReport:
    """Builds a store at `out` (which must not exist) from an edge list and
    node tensors, sorting on disk when the input exceeds `memory_budget`.

    Text files hold `src dst [weight [label]]` per line (`#`/`%` comments);
    CSV files name their columns in a header (src,dst[,weight][,label]).
    `weights`/`labels` keep those columns; they are implied when the weights
    or labels come as arrays (a third tuple item, `edge_weights`,
    `edge_labels`). `undirected` stores every edge both ways, `self_loops`
    gives every vertex one edge to itself, `dedup` drops repeated edges,
    `in_edges` also stores in-edges of a directed graph. `num_nodes` defaults
    to the largest id + 1 (or the tensors' row count); tensors must have one
    row per vertex. `progress=True` writes steps to sys.stderr; a callable
    gets (phase, done, total). A failed import leaves nothing behind.
    """

def open(path: _StrPath, cache_bytes: int = 256 << 20) -> Graph:
    """Opens a store with a page cache of `cache_bytes` (0: no cache)."""

@final
class Graph:
    """An open store. Every read takes a whole batch and releases the GIL;
    one Graph may be shared by several threads. Results are numpy arrays
    that own the engine's buffers (no copy)."""

    @property
    def num_nodes(self) -> int: ...
    @property
    def num_edges(self) -> int:
        """Stored edges (out-direction; both ways for undirected graphs)."""
    @property
    def directed(self) -> bool: ...
    @property
    def has_weights(self) -> bool: ...
    @property
    def has_labels(self) -> bool: ...
    @property
    def path(self) -> pathlib.Path: ...
    @property
    def tensors(self) -> dict[str, tuple[str, int]]:
        """name -> (dtype name, elements per row)."""
    @overload
    def neighbors(
        self, ids: _Ids, direction: str = "out", with_weights: Literal[False] = False, with_labels: Literal[False] = False
    ) -> tuple[_I64, _I64]: ...
    @overload
    def neighbors(
        self, ids: _Ids, direction: str = "out", *, with_weights: Literal[True], with_labels: Literal[False] = False
    ) -> tuple[_I64, _I64, _F32]: ...
    @overload
    def neighbors(
        self, ids: _Ids, direction: str = "out", with_weights: Literal[False] = False, *, with_labels: Literal[True]
    ) -> tuple[_I64, _I64, _U32]: ...
    @overload
    def neighbors(
        self, ids: _Ids, direction: str = "out", *, with_weights: Literal[True], with_labels: Literal[True]
    ) -> tuple[_I64, _I64, _F32, _U32]: ...
    @overload
    def neighbors(
        self, ids: _Ids, direction: str = "out", with_weights: bool = False, with_labels: bool = False
    ) -> tuple[npt.NDArray[np.generic], ...]:
        """Neighbor lists of `ids` in CSR form: (indptr, indices[, weights][,
        labels]); the list of ids[i] is indices[indptr[i]:indptr[i + 1]],
        sorted by neighbor id. `direction` is "out" or "in" (in-edges need
        `in_edges=True` at import unless the graph is undirected)."""
    def degree(self, ids: _Ids, direction: str = "out") -> _I64: ...
    def edge_weights(self, src: _Ids, dst: _Ids) -> _F32:
        """Weight of each edge src[i] -> dst[i]; NaN where there is none."""
    def tensor(self, name: str, ids: _Ids) -> npt.NDArray[np.generic]:
        """Rows `ids` of a node tensor in the stored dtype: shape (n, dim),
        or (n,) when rows have one element."""
    def stats(self) -> Stats: ...
    def reset_stats(self) -> None: ...
    def clear_cache(self) -> None:
        """Empties the page cache, for cold-cache measurements."""
    def verify(self) -> VerifyReport:
        """Reads every page and checks checksums and invariants; raises
        SolidGraphError naming the first bad page."""

def bench_io(
    paths: Sequence[_StrPath],
    size: int,
    block: int = 4096,
    depth: int = 64,
    seconds: float = 5.0,
    pattern: str = "randread",
    backend: str | None = None,
    stripe: int = 262144,
) -> BenchReport:
    """Runs the I/O benchmark (same as `solidgraph bench io`)."""
