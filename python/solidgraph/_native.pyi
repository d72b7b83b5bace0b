"""Types of the native module (crates/py). `solidgraph` re-exports all of it."""

import builtins
import os
import pathlib
from typing import IO, BinaryIO, ClassVar
from typing import Callable, Iterable, Iterator, Literal, Mapping, Sequence, TypedDict, Union, final, overload, type_check_only

import numpy as np
import numpy.typing as npt

__version__: str
__all__ = [
    "CorruptionError",
    "FormatError",
    "Graph",
    "InferModel",
    "InvalidArgumentError",
    "LockedError",
    "NotFoundError",
    "OverBudgetError",
    "RemoteChannel",
    "Sample",
    "SampleLoader",
    "SolidGraphError",
    "SolidGraphIOError",
    "StaleError",
    "__version__",
    "batch_seed",
    "bench_io",
    "cli_main",
    "import_graph",
    "last_request",
    "load_model",
    "loader_memory",
    "open",
    "set_state_budget",
    "state_budget",
    "time_kernel",
    "BlankNode",
    "DefaultGraph",
    "NamedNode",
    "Quad",
    "QuadIter",
    "QueryBoolean",
    "QueryResultsFormat",
    "QuerySolution",
    "QuerySolutions",
    "QueryTriples",
    "RdfFormat",
    "RdfLiteral",
    "RdfStore",
    "Triple",
    "Variable",
    "rdf_error_classes",
]

_StrPath = Union[str, os.PathLike[str]]
#: Vertex ids: any 1-D integer array or a sequence of ints. Negative ids are an error.
_Ids = Union[npt.NDArray[np.integer], Sequence[int]]
#: _Edges: a text/CSV/.npy file, a pair of 1-D .npy files (sources,
#: destinations), a (2, E) or (E, 2) integer array (as the CLI reads .npy),
#: or a (src, dst[, weights]) tuple of arrays.
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
_F64 = npt.NDArray[np.float64]
#: `progress=`: True writes "solidgraph {what}: {phase} {done}/{total}" lines
#: to sys.stderr; a callable gets (phase, done, total), at most ~10 calls a
#: second per phase. A callback's exception is reported, not raised.
_Progress = Union[bool, Callable[[str, int, int], object]]
_Names = Union[str, Sequence[str]]
_F32 = npt.NDArray[np.float32]
_U32 = npt.NDArray[np.uint32]

# Errors. Every exception the engine raises derives from SolidGraphError;
# the subclass says what kind of failure it is, the message (the same text
# as the Rust error) names the file and line, or the page, and the reason.
# Attributes the error does not know read as None.

class SolidGraphError(Exception):
    """Base of every error the SolidGraph engine raises. Raised as itself
    only for an internal fault (an engine invariant broken): please report
    those."""

class CorruptionError(SolidGraphError):
    """Stored data failed a check: a page's checksum or an invariant, or a
    member file truncated or of the wrong size. `Graph.verify()` names the
    first bad page; restore the store from a copy or import it again."""

    page: int | None
    path: pathlib.Path | None

class StaleError(SolidGraphError):
    """A reader met a page that a merge wrote after the reader opened the
    store (another process merged). The store is intact: open it again to
    read the merged graph. `epoch` is the reader's epoch, `found` the
    page's."""

    page: int | None
    epoch: int | None
    found: int | None

class FormatError(SolidGraphError):
    """`path` is not a store this build reads: not a SolidGraph store, or a
    format version newer (upgrade solidgraph) or older (import again) than
    this build's. `found`/`supported`: the store's and this build's format
    versions, for a version mismatch."""

    path: pathlib.Path | None
    found: int | None
    supported: int | None

class NotFoundError(SolidGraphError, LookupError):
    """The store has nothing by that name: `name` is the node tensor asked
    for. A LookupError (the base of KeyError and IndexError), not a KeyError,
    whose str() would quote the message."""

    name: str | None

class LockedError(SolidGraphError):
    """Another writer holds the store's lock (one writer at a time);
    `path` is the store."""

    path: pathlib.Path | None

class InvalidArgumentError(SolidGraphError, ValueError):
    """The call's arguments do not fit: a bad value or shape, a vertex id not
    in the graph, a malformed input file (`path`, `line`), or an operation
    the store was not imported or opened for (in-edges, edge weights,
    writable=True)."""

    path: pathlib.Path | None
    line: int | None

class SolidGraphIOError(SolidGraphError, OSError):
    """The system failed a file or device operation (missing file, full
    device, I/O error), or the path to create exists. `errno` is set where
    known; `path` names the file (`filename` stays None, so str() is the
    engine's message)."""

    path: pathlib.Path | None

class OverBudgetError(SolidGraphError, MemoryError):
    """A whole-graph algorithm's state (`needed` bytes) exceeds the state
    budget (`budget` bytes: the machine's memory unless `set_state_budget`
    lowered it), so `algorithm` refused before allocating anything."""

    algorithm: str | None
    needed: int | None
    budget: int | None

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
    """Counters since open or `reset_stats()`. `cache_*`: the page cache;
    `row_cache_*`: the row cache (rows, not pages; zeros without one).
    `*_hand_steps`: entries the eviction hand visited, which stays near the
    evictions plus the hits (and rows announced by a loader): far more
    means eviction is scanning."""

    cache_hits: int
    cache_misses: int
    cache_evictions: int
    cache_hand_steps: int
    cache_bytes: int
    cache_budget: int
    row_cache_hits: int
    row_cache_misses: int
    row_cache_evictions: int
    row_cache_hand_steps: int
    row_cache_bytes: int
    row_cache_budget: int
    pages_read: int
    ios: int
    bytes_read: int

@type_check_only
class VerifyReport(TypedDict):
    pages: int
    edges: int
    tensor_pages: int
    free_pages: int

@type_check_only
class MergeReport(TypedDict):
    updates: int
    lists: int
    pages_written: int
    bytes_written: int
    pages_retired: int
    total_pages: int
    free_pages: int
    epoch: int
    seconds: float

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
    lower_lists: bool = False,
    num_nodes: int | None = None,
    order: Literal["input", "degree"] = "input",
    page_size: int = 4096,
    fill_factor: float = 1.0,
    memory_budget: int = 1 << 30,
    members: int = 1,
    progress: _Progress = False,
) -> ImportReport:
    """Builds a store at `out` (which must not exist) from an edge list and
    node tensors, sorting on disk when the input exceeds `memory_budget`.

    Text files hold `src dst [weight [label]]` per line (`#`/`%` comments);
    CSV files name their columns in a header (src,dst[,weight][,label]); a
    row with more columns than the header is an error naming file:line.
    `edges` as one integer array may be (2, E) or (E, 2) (a (2, 2) array is
    read as (2, E): rows are sources, destinations).
    `weights`/`labels` keep those columns; they are implied when the weights
    or labels come as arrays (a third tuple item, `edge_weights`,
    `edge_labels`). `undirected` stores every edge both ways, `self_loops`
    gives every vertex one edge to itself, `dedup` drops repeated edges,
    `in_edges` also stores in-edges of a directed graph. `lower_lists` (with
    `undirected`) also stores each vertex's neighbors up to itself, every
    edge once: about half the adjacency again on disk, and PageRank and WCC
    read half the bytes per pass (until an update: a merge drops them).
    `num_nodes` defaults
    to the largest id + 1 (or the tensors' row count); tensors must have one
    row per vertex. `order="degree"` renumbers vertices inside the store,
    highest degree first: fewer bytes per edge and hot vertex state in the
    CPU caches (faster analytics and sampling), at one more pass over the
    edges and 8 bytes per vertex of map. Every id in and out of the API
    stays yours; neighbor lists come sorted by the store's ids. `fill_factor`
    below 1 leaves that share of each packed page empty for updates (merge
    leaves 10% in the pages it rewrites either way). `progress=True`
    writes steps to sys.stderr; a callable gets (phase, done, total). A
    failed import leaves nothing behind.
    """

def open(path: _StrPath, cache_bytes: int = 256 << 20, writable: bool = False, delta_budget: int = 256 << 20, row_cache_bytes: int = 0, row_admission: Literal["seen", "all", "hot"] = "seen") -> Graph:
    """Opens a store with a page cache of `cache_bytes` (0: no cache).
    `writable=True` takes the store's writer lock (one writer process; a
    second gets LockedError) and enables the update methods.
    Every open replays the write-ahead log past its last checkpoint, so
    readers see acknowledged updates. Pending updates over `delta_budget`
    bytes are merged into pages by the write that crosses it (0: only
    `merge()` merges). A reader opened before a merge by another process
    raises StaleError ("reopen it") rather than read moved pages.
    `row_cache_bytes` (read-only opens) adds a cache of tensor rows: a hot
    row shares its page with cold ones, so caching rows keeps more hot
    features per byte; tensor pages then bypass the page cache. Opening
    fills it with the rows of the highest-degree vertices, as many as it
    holds (one read of `row_cache_bytes`; more rows hit from the first
    batch on).
    Once the row cache is full, `row_admission="seen"` admits a row on its
    second miss within a window (a doorkeeper: rows asked for once do not
    push out rows asked for again; the default, which hit the most rows in
    the sampling benchmark); "all" admits every row
    (SIEVE); "hot" admits only rows of the vertices of highest degree at
    import, as many as the budget holds (kept for graphs whose hot rows
    are known by degree).

    A read-only Graph sees the store as of its open: updates a writer
    makes later (a writable Graph in this process or another process) live
    in the writer's memory and the write-ahead log, which a reader replays
    only at open. Open the store again to see them. (Readers do not follow
    the log, which would add a log check to every read batch.)"""

@final
class Graph:
    """An open store. Every read takes a whole batch and releases the GIL;
    one Graph may be shared by several threads. Results are numpy arrays
    that own the engine's buffers (no copy). After fork() a child reopens
    the store on first use; a Graph pickles as (path, cache_bytes)."""

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
    @property
    def has_in_edges(self) -> bool:
        """Whether "in" reads work: the graph is undirected or was imported
        with in_edges=True."""
    @property
    def has_lower_lists(self) -> bool:
        """Whether PageRank and WCC read lower lists (half the bytes): the
        store was imported with lower_lists=True and has no updates since."""
    def sample_neighbors(
        self,
        seeds: _Ids,
        fanouts: Sequence[int],
        replace: bool = False,
        weighted: bool = False,
        direction: str = "in",
        seed: int | None = None,
        tensors: _Names | None = None,
        max_fanout: int = 10000,
    ) -> Sample:
        """Multi-hop GraphSAGE neighbor sampling for one mini-batch, in one
        engine call: each hop reads its whole frontier in one batch, and the
        `tensors` rows of every sampled node are gathered in the same call.
        `fanouts[h]` neighbors per node at hop h (-1: all, at most
        `max_fanout`); `weighted` draws by edge weight (zero weights never);
        `direction="in"` samples the nodes pointing at each node (PyG's
        default; a directed store needs in_edges=True). Repeated seeds count
        once. `seed=None` draws a fresh seed per call; a given seed gives the
        same sample every time."""
    def sample_loader(
        self,
        batches: Iterable[_Ids],
        fanouts: Sequence[int],
        replace: bool = False,
        weighted: bool = False,
        direction: str = "in",
        seed: int | None = None,
        tensors: _Names | None = None,
        workers: int = 2,
        prefetch: int = 4,
        max_fanout: int = 10000,
        lookahead: int = 32,
        buffer_bytes: int | None = None,
    ) -> SampleLoader:
        """Samples `batches` (one seed array per mini-batch) on `workers`
        Rust threads, at most `prefetch` batches ahead of the consumer, and
        returns an iterator over them in order. Batch i uses a seed derived
        from (seed, i), so results do not depend on `workers`. Neighbors are
        sampled `lookahead` batches (at most 256) ahead of the feature
        gather, so the row cache keeps the rows they will ask for, in groups
        of `lookahead // 2` that read the lists they share once (0: sample
        and gather each batch in one step). `buffer_bytes` caps the bytes of
        the batches held (ahead, gathered, the last two handed out; see
        `loader_memory`). Options are checked here; a bad batch raises
        InvalidArgumentError when it is reached."""
    def infer(
        self,
        model: _StrPath | InferModel,
        nodes: _Ids,
        fanouts: Sequence[int] | None = None,
        batch_size: int = 1024,
        features: _Names = "x",
        seed: int = 0,
        workers: int = 2,
        prefetch: int = 2,
        progress: _Progress = False,
        stream_bytes: int = 536870912,
        path: Literal["auto", "stream", "batched"] = "auto",
    ) -> _F32:
        """GNN inference next to the store: the output rows of `model` (a
        model directory or `solidgraph.infer.load(dir)`) for `nodes`, float32
        of shape (len(nodes), out_dim) in the order of `nodes`. Per batch of
        `batch_size` nodes the engine samples (`fanouts`, -1: all; None: the
        full neighbourhood, which equals full-batch inference), gathers
        `features` (one store tensor per model input) and runs the model,
        sampling the next batches while this one computes. Batch i samples
        with `solidgraph.infer.batch_seed(seed, i)`. See `solidgraph.infer`.
        A full-neighbourhood request of more than one batch reads its reach
        once, projecting rows by a linear first layer as they arrive, when the
        projected rows fit `stream_bytes` (0: batch by batch) and `path`
        allows: "auto" (the cheaper by the cost model), "stream" or "batched";
        `solidgraph.infer.last_request()` says which path ran and why."""
    def infer_all(
        self,
        model: _StrPath | InferModel,
        out_tensor: str = "emb",
        features: _Names = "x",
        chunk_bytes: int = 268435456,
        keep_intermediate: bool = False,
        store_tensor: bool = False,
        row_cache_bytes: int = 268435456,
        progress: _Progress = False,
        push: bool = True,
    ) -> _F32:
        """Whole-graph GNN inference layer by layer: every node's output row
        of `model`, each layer one pass over the in-lists and the previous
        layer's rows, written to checksummed files in
        `STORE/infer/out_tensor/` (memory bounded by `chunk_bytes`). Returns
        a read-only float32 numpy.memmap of shape (num_nodes, out_dim) in node
        order. An interrupted call resumes at the first unfinished layer when
        repeated with the same model and store. With `store_tensor=True`
        (writable=True) the output is also added to the store as node tensor
        `out_tensor`. Each layer keeps the `row_cache_bytes` of the previous
        layer's rows its edges reference most (hub rows) in memory for all
        of its chunks. With `push` (default) a layer of linear aggregations
        (sum, mean, GCN's) reads the previous layer's rows once per
        destination range, in source order, instead (its accumulators take
        `row_cache_bytes`). See `solidgraph.infer`."""
    def random_walks(
        self, starts: _Ids, length: int, p: float = 1.0, q: float = 1.0, seed: int | None = None, direction: str = "out"
    ) -> _I64:
        """Walks of `length` steps from every start, advanced together (one
        batched read per step): shape (len(starts), length + 1), first column
        `starts`. p/q != 1 gives node2vec's biased walks. A walk at a vertex
        without edges stays there."""
    def saint_subgraph(
        self, roots: _Ids, walk_length: int, seed: int | None = None, tensors: _Names | None = None, direction: str = "out"
    ) -> Sample:
        """GraphSAINT random-walk subgraph: the nodes that walks from `roots`
        visit (sorted), every stored edge among them (`row` -> `col`), and
        their `tensors` rows. One hop: num_sampled_nodes/edges have one entry."""
    @overload
    def bfs(self, source: int, target: int | None = None, parents: Literal[False] = False, progress: _Progress = False) -> _I64: ...
    @overload
    def bfs(self, source: int, target: int | None = None, *, parents: Literal[True], progress: _Progress = False) -> tuple[_I64, _I64]:
        """Breadth-first search over out-edges: levels (unreached: 2**63 - 1),
        and with parents=True also the parent on a shortest path (the source
        is its own; -1 when unreached). `target` stops the search once its
        level is known."""
    def wcc(self, progress: _Progress = False) -> _I64:
        """Weakly connected components: every vertex gets the smallest vertex
        id of its component."""
    def pagerank(self, damping: float = 0.85, iterations: int = 20, tol: float | None = None, progress: _Progress = False) -> _F64:
        """PageRank as LDBC Graphalytics defines it (the rank of vertices
        without out-edges is spread over all vertices; sums to 1): at most
        `iterations` iterations, fewer once an iteration changes the ranks by
        less than `tol` (L1). 20 by default, as `solidgraph run pagerank`:
        the error shrinks by `damping` per iteration, to 0.85**20 = 4% of
        the start after 20 (20% after 10). At most 10,000 iterations."""
    def mis(self, seed: int = 0, progress: _Progress = False) -> npt.NDArray[np.bool_]:
        """A maximal independent set of the undirected view (Luby, seeded):
        True for its vertices. Directed stores need in_edges=True."""
    def kcore(self, progress: _Progress = False) -> npt.NDArray[np.uint32]:
        """Core numbers of the undirected simple view (self-loops and
        repeated edges ignored). Directed stores need in_edges=True."""
    def sssp(self, source: int, progress: _Progress = False) -> _F64:
        """Shortest-path distances over edge weights (which must be
        non-negative) from `source`; inf where unreachable."""
    def cdlp(self, iterations: int = 10, progress: _Progress = False) -> _I64:
        """Label propagation (Graphalytics CDLP): synchronous rounds, each
        vertex takes its neighbors' most frequent label (smallest on ties).
        At most 10,000 iterations."""
    def lcc(self, progress: _Progress = False) -> _F64:
        """Local clustering coefficient (Graphalytics LCC; for a directed
        graph, directed links among the undirected neighborhood)."""
    def stats(self) -> Stats: ...
    def reset_stats(self) -> None: ...
    def clear_cache(self) -> None:
        """Empties the page cache, for cold-cache measurements."""
    def verify(self) -> VerifyReport:
        """Reads every page and checks checksums and invariants; raises
        CorruptionError naming the first bad page."""

    # Updates (stores opened with writable=True). Each call is one batch:
    # validated whole (nothing applied on error), logged as one WAL record,
    # visible to reads at once, and returned once durable unless
    # durable=False (then `flush()` makes everything so far durable).
    @property
    def pending_updates(self) -> int:
        """Update batches held in the log and the in-memory delta."""
    def add_vertices(self, count: int, tensors: Mapping[str, npt.ArrayLike] | None = None, durable: bool = True) -> _I64:
        """Adds vertices; returns their ids. Tensor rows must have the
        stored width and the stored dtype or one numpy casts to it by its
        `same_kind` rule; tensors not given read as zeros."""
    def delete_vertices(self, ids: _Ids, durable: bool = True) -> None:
        """Deletes vertices and every edge touching them."""
    def add_edges(self, src: _Ids, dst: _Ids, weights: npt.ArrayLike | None = None, labels: npt.ArrayLike | None = None, durable: bool = True) -> None:
        """Adds edges (replacing existing ones; both ways when undirected)."""
    def delete_edges(self, src: _Ids, dst: _Ids, durable: bool = True) -> None:
        """Deletes edges; each must exist."""
    def update_edge_weights(self, src: _Ids, dst: _Ids, weights: npt.ArrayLike, durable: bool = True) -> None:
        """Sets the weights of existing edges."""
    def add_tensor(self, name: str, array: npt.ArrayLike) -> None:
        """Adds node tensor `name`: (num_nodes,) or (num_nodes, dim), one row
        per node in id order, of float32, float16, int64, int32, uint8 or
        bool. Written as the store's own checksummed pages and committed by
        an atomic superblock switch (a crash leaves the store as it was);
        pending updates are merged first. Needs writable=True; a name in use
        is refused (InvalidArgumentError). A C-contiguous array is read in
        place, so np.load(path, mmap_mode="r") streams one larger than memory."""
    def update_tensor(self, name: str, ids: _Ids, rows: npt.ArrayLike, durable: bool = True) -> None:
        """Overwrites tensor rows (UpdateEmbed): (len(ids), dim), of the
        stored dtype or one numpy casts to it by its `same_kind` rule
        (float64 rows for a float32 tensor); float rows for an integer
        tensor are refused (InvalidArgumentError naming both dtypes)."""
    def flush(self) -> None:
        """Makes every update so far durable."""
    def merge(self) -> MergeReport:
        """Folds the pending updates into pages: copy-on-write of the
        changed pages only, an atomic superblock switch, a log checkpoint.
        Readers and snapshots are not disturbed; writers wait."""
    def _sibling(self, cache_bytes: int, row_cache_bytes: int) -> Graph:
        """A read-only Graph of the same store with caches of its own that
        shares this one's vertex order maps (what a loader with a
        `memory_budget` samples through)."""
    def snapshot(self) -> Graph:
        """A read-only Graph of the store as it is now; later updates and
        merges do not change what it reads. Use `with g.snapshot() as s:`
        so the pages it pins are released at the end. Not usable in a
        forked child."""
    def close(self) -> None:
        """Releases the store (a snapshot's pinned pages, a writer's lock);
        later calls raise InvalidArgumentError."""
    def __enter__(self) -> Graph: ...
    def __exit__(self, exc_type: object, exc: object, tb: object) -> bool: ...

@final
class Sample:
    """A sampled subgraph (PyG's SamplerOutput shape); every array shares
    the engine's buffer (no copy)."""

    @property
    def node(self) -> _I64:
        """Global ids of the sampled nodes, seeds first (each once)."""
    @property
    def row(self) -> _I64:
        """Per edge, the local index (into `node`) of the sampled neighbor:
        messages flow row -> col. A view of edge_index[0]."""
    @property
    def col(self) -> _I64:
        """Per edge, the local index of the node it was drawn for. A view of
        edge_index[1]."""
    @property
    def edge_index(self) -> _I64:
        """(2, E): rows `row` and `col`, ready for torch.from_numpy."""
    @property
    def edge(self) -> _I64:
        """Global edge ids (positions in the sampled direction's CSR order)."""
    @property
    def num_sampled_nodes(self) -> _I64:
        """Nodes added per hop; [0] is the number of distinct seeds."""
    @property
    def num_sampled_edges(self) -> _I64:
        """Edges sampled per hop."""
    @property
    def tensors(self) -> dict[str, npt.NDArray[np.generic]]:
        """name -> rows for `node`, in the stored dtype."""

@final
class SampleLoader(Iterator[Sample]):
    """The batches of one epoch, sampled by Rust threads ahead of the
    consumer and handed out in order; the GIL is released while waiting. A
    worker's error is raised at its batch and ends the epoch. Iterated in a
    forked child, it reopens the store and restarts its threads there."""

    def __iter__(self) -> SampleLoader: ...
    def __next__(self) -> Sample: ...
    def __len__(self) -> int: ...
    @property
    def position(self) -> int:
        """Batches handed out so far."""
    @property
    def stats(self) -> LoaderStats:
        """Where the pipeline waited so far (see LoaderStats)."""

@type_check_only
class LoaderStats(TypedDict):
    """A loader's pipeline: groups sampled ahead (`draws`) and the batches
    in them (`drawn`), worker waits for the buffer cap (`cap_waits`,
    `cap_wait_s`), the consumer's wait for batches (`consumer_wait_s`), the
    most bytes held under the cap (`peak_held`)."""

    draws: int
    drawn: int
    cap_waits: int
    cap_wait_s: float
    consumer_wait_s: float
    peak_held: int

def loader_memory(
    graph: Graph,
    batch_size: int,
    fanouts: Sequence[int],
    tensors: Sequence[str],
    direction: str = "in",
    workers: int = 2,
    prefetch: int = 4,
    lookahead: int = 32,
    memory_budget: int | None = None,
    seeds: _Ids | None = None,
    replace: bool = False,
) -> dict[str, int]:
    """The bound on a loader's bytes outside the store's caches, by part
    (`ahead`, `gathered`, `handed`; `buffers`: the three within the cap;
    `working`, `store`, `total`), for batches of `batch_size` seeds sampled
    with `fanouts` (each at least 1) gathering `tensors`. With
    `memory_budget`, also its split: `cache_bytes`, `row_cache_bytes`,
    `buffer_bytes` (the cap on batches held) and `minimum` (a budget below
    the minimum raises InvalidArgumentError naming it); a budget also sets
    glibc, process-wide, to give large freed blocks back to the system
    (mmap threshold 1 MiB, two arenas for threads started after), which
    the budget needs. With `seeds` (the ids batches are taken from, in any
    order), a batch's first hop counts its seeds' degrees instead of
    `batch_size` times the fanout."""

@final
class InferModel:
    """A loaded model directory (model.json + weights.safetensors), checked
    and planned once: pass it to `Graph.infer` to skip loading per call."""

    @property
    def path(self) -> pathlib.Path: ...
    @property
    def name(self) -> str: ...
    @property
    def inputs(self) -> list[tuple[str, int]]:
        """The node tensors the model reads, as (name, columns)."""
    @property
    def out_dim(self) -> int: ...
    @property
    def num_layers(self) -> int: ...
    @property
    def full_fanouts(self) -> list[int]:
        """The hops `fanouts=None` samples (one more than the layers when an aggregation normalises by degree)."""
    def kernels(self) -> list[tuple[int, str, str]]:
        """(op index, op, kernel) of every step."""

def load_model(path: _StrPath, plugins: _StrPath | None = None, plugin_names: Sequence[_StrPath] | None = None) -> InferModel:
    """Loads and checks a model directory written by `solidgraph.infer.export`;
    with `plugins`, kernels of the shared libraries in that directory join the
    built-in ones (all `*.so` there, or those `plugin_names` names)."""

def last_request() -> dict[str, object] | None:
    """How the calling thread's last `Graph.infer` ran: `{"path": "sampled" |
    "batched" | "stream"}`, and for a streamed request the nodes within reach
    (each row read once), the edges into its inner hops, the projected bytes
    held, the seconds and CPU seconds of its three steps (expand the reach,
    read and project its rows, run the model), the rows step's
    thread-seconds (reading, checking and copying, projecting; the degree
    thread), the bytes and I/Os it read, and whether rows came straight off
    the volume; `reason` says why the cost model chose the path; None before
    any."""

def batch_seed(seed: int, i: int) -> int:
    """The seed batch `i` of `Graph.infer(..., seed=seed)` (and of `Graph.sample_loader`) samples with."""

def time_kernel(
    op: str,
    x: npt.ArrayLike,
    w: npt.ArrayLike | None = None,
    bias: npt.ArrayLike | None = None,
    indptr: _Ids | None = None,
    indices: _Ids | None = None,
    n_src: int | None = None,
    reduce: str = "sum",
    kernel: str = "cpu",
    repeat: int = 1,
) -> tuple[_F32, list[float]]:
    """Runs one op's kernel ("gemm": x w^T + bias; "spmm": aggregation of
    x's rows over the CSR indptr/indices by destination) `repeat` times with
    the GIL released: the output and the seconds of each run (the kernel
    alone). For benchmarks/kernels.py; see `solidgraph.infer.time_kernel`."""

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
    """Runs the I/O benchmark (same as `solidgraph-bench io`)."""

def set_state_budget(budget: int | None) -> None:
    """Caps the state (bytes) of every later whole-graph algorithm in this
    process; one that needs more raises `OverBudgetError` before allocating.
    None restores the default, the machine's memory."""

def state_budget() -> int:
    """The state budget in bytes now in force."""

def cli_main(argv: Sequence[str]) -> int:
    """Runs the `solidgraph` command on `argv` (the program name first) and
    returns its exit code (0 done, 1 failed, 2 bad usage); the console
    script `solidgraph` calls it. Writes to file descriptors 1 and 2, not
    sys.stdout; releases the GIL for the whole command."""

@final
class RemoteChannel:
    """A plaintext HTTP/2 channel to a SolidGraph server for the calls that
    answer with arrays (solidgraph.client uses it); connects on first use."""

    def __new__(cls, addr: str, token: str | None = None, max_message: int = 64 << 20) -> RemoteChannel: ...
    def call(self, path: str, request: bytes, timeout: float | None = None) -> tuple[int, str, dict[str, npt.NDArray[np.generic]] | None]:
        """Calls the server-streaming method `path` with the encoded request;
        returns (gRPC status code, message, the result arrays by name or None
        when the code is not 0). Releases the GIL for the call."""
    def unary(self, path: str, request: bytes, timeout: float | None = None) -> tuple[int, str, bytes | None]:
        """Calls the unary method `path` on this connection; returns (gRPC
        status code, message, the encoded reply or None)."""
    def shm_create(self, slots: int, slot_bytes: int) -> tuple[str, int, bytes]:
        """Creates a shared-memory region (a 0600 file on /dev/shm) of
        `slots` slots of `slot_bytes`; returns (path, size, cookie) for the
        server's RegisterShm."""
    def shm_attach(self, region: str) -> None:
        """Maps the region registered as `region` (and unlinks its file):
        array replies go to a free slot of it from now on."""
    def shm_abandon(self) -> None:
        """Drops the region; replies come inline again."""
    def shm_state(self) -> tuple[str, int, int] | None:
        """(region, free slots, slots) of the attached region, or None."""
    def shm_lost(self) -> bool:
        """Whether a server answered that it does not hold the region (it
        restarted, or the channel reconnected); the region is then dropped
        until `shm_create` and `shm_attach` make a new one."""

# RDF (solidgraph.rdf re-exports these; `Store` is RdfStore). Shaped like
# pyoxigraph's API.

_Subject = Union[NamedNode, BlankNode]
_Term = Union[NamedNode, BlankNode, RdfLiteral]
_GraphName = Union[NamedNode, BlankNode, DefaultGraph]
_RdfFormatArg = Union[RdfFormat, str]
_ResultsFormatArg = Union[QueryResultsFormat, str]
_Output = Union[_StrPath, BinaryIO, None]

@final
class NamedNode:
    """An IRI; raises ValueError if `value` is not one."""

    def __new__(cls, value: str) -> NamedNode: ...
    @property
    def value(self) -> str: ...
    def __eq__(self, other: builtins.object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class BlankNode:
    """A blank node; a fresh unique one when `value` is None."""

    def __new__(cls, value: str | None = None) -> BlankNode: ...
    @property
    def value(self) -> str: ...
    def __eq__(self, other: builtins.object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class RdfLiteral:
    """A literal (`solidgraph.rdf.Literal`): simple, language-tagged (`language`) or typed (`datatype`)."""

    def __new__(cls, value: str, *, datatype: NamedNode | None = None, language: str | None = None) -> RdfLiteral: ...
    @property
    def value(self) -> str:
        """The lexical form, as written."""
    @property
    def language(self) -> str | None: ...
    @property
    def datatype(self) -> NamedNode: ...
    def __eq__(self, other: builtins.object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class DefaultGraph:
    """The default graph."""

    def __new__(cls) -> DefaultGraph: ...
    @property
    def value(self) -> str: ...
    def __eq__(self, other: builtins.object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Variable:
    """A query variable (name without `?`)."""

    def __new__(cls, value: str) -> Variable: ...
    @property
    def value(self) -> str: ...
    def __eq__(self, other: builtins.object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Triple:
    def __new__(cls, subject: _Subject, predicate: NamedNode, object: _Term) -> Triple: ...
    @property
    def subject(self) -> _Subject: ...
    @property
    def predicate(self) -> NamedNode: ...
    @property
    def object(self) -> _Term: ...
    def __len__(self) -> int: ...
    def __getitem__(self, i: int, /) -> _Term: ...
    def __eq__(self, other: builtins.object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Quad:
    """A triple in a graph; `graph_name` None is the default graph."""

    def __new__(cls, subject: _Subject, predicate: NamedNode, object: _Term, graph_name: _GraphName | None = None) -> Quad: ...
    @property
    def subject(self) -> _Subject: ...
    @property
    def predicate(self) -> NamedNode: ...
    @property
    def object(self) -> _Term: ...
    @property
    def graph_name(self) -> _GraphName: ...
    @property
    def triple(self) -> Triple: ...
    def __len__(self) -> int: ...
    def __getitem__(self, i: int, /) -> _Term | DefaultGraph: ...
    def __eq__(self, other: builtins.object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class RdfFormat:
    """An RDF syntax."""

    N_TRIPLES: ClassVar[RdfFormat]
    N_QUADS: ClassVar[RdfFormat]
    TURTLE: ClassVar[RdfFormat]
    TRIG: ClassVar[RdfFormat]
    N3: ClassVar[RdfFormat]
    RDF_XML: ClassVar[RdfFormat]
    @staticmethod
    def from_media_type(media_type: str) -> RdfFormat | None: ...
    @staticmethod
    def from_extension(extension: str) -> RdfFormat | None: ...
    @property
    def media_type(self) -> str: ...
    @property
    def file_extension(self) -> str: ...
    @property
    def name(self) -> str: ...
    def __eq__(self, other: builtins.object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class QueryResultsFormat:
    """A SPARQL results syntax."""

    JSON: ClassVar[QueryResultsFormat]
    XML: ClassVar[QueryResultsFormat]
    CSV: ClassVar[QueryResultsFormat]
    TSV: ClassVar[QueryResultsFormat]
    @staticmethod
    def from_media_type(media_type: str) -> QueryResultsFormat | None: ...
    @staticmethod
    def from_extension(extension: str) -> QueryResultsFormat | None: ...
    @property
    def media_type(self) -> str: ...
    @property
    def file_extension(self) -> str: ...
    @property
    def name(self) -> str: ...
    def __eq__(self, other: builtins.object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class QuerySolution:
    """One SELECT row: `solution["s"]`, `solution[0]` or `solution[Variable("s")]`; None where unbound."""

    def __getitem__(self, key: int | str | Variable, /) -> _Term | None: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[_Term | None]: ...

@final
class QuerySolutions(Iterator[QuerySolution]):
    """A SELECT's rows, streamed from the store in batches (GIL released)."""

    @property
    def variables(self) -> list[Variable]: ...
    def __iter__(self) -> QuerySolutions: ...
    def __next__(self) -> QuerySolution: ...
    def serialize(self, output: _Output = None, format: _ResultsFormatArg | None = None) -> bytes | None:
        """The remaining rows in `format` (JSON by default), as bytes when `output` is None."""

@final
class QueryBoolean:
    """An ASK's answer: `bool(result)`."""

    def __bool__(self) -> bool: ...
    def __eq__(self, other: builtins.object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def serialize(self, output: _Output = None, format: _ResultsFormatArg | None = None) -> bytes | None: ...

@final
class QueryTriples(Iterator[Triple]):
    """A CONSTRUCT's or DESCRIBE's triples, streamed."""

    def __iter__(self) -> QueryTriples: ...
    def __next__(self) -> Triple: ...
    def serialize(self, output: _Output = None, format: _RdfFormatArg | None = None) -> bytes | None:
        """The remaining triples in `format` (N-Triples by default), as bytes when `output` is None."""

@final
class QuadIter(Iterator[Quad]):
    def __iter__(self) -> QuadIter: ...
    def __next__(self) -> Quad: ...

@final
class RdfStore:
    """An RDF store at `path` (a directory), made on its first load or update.
    `solidgraph.rdf.Store` is this class."""

    def __new__(cls, path: _StrPath, *, read_only: bool = False, cache_bytes: int = 268435456) -> RdfStore: ...
    @property
    def path(self) -> pathlib.Path: ...
    def bulk_load(
        self,
        input: bytes | str | IO[bytes] | IO[str] | None = None,
        format: _RdfFormatArg | None = None,
        *,
        path: _StrPath | None = None,
        base_iri: str | None = None,
        to_graph: _GraphName | None = None,
        lenient: bool = False,
        memory_budget: int | None = None,
    ) -> None:
        """External-memory bulk load into a new store; into an existing one, `load`."""
    def load(
        self,
        input: bytes | str | IO[bytes] | IO[str] | None = None,
        format: _RdfFormatArg | None = None,
        *,
        path: _StrPath | None = None,
        base_iri: str | None = None,
        to_graph: _GraphName | None = None,
        lenient: bool = False,
    ) -> None:
        """Adds the data's quads as one durable update."""
    def query(
        self,
        query: str,
        *,
        base_iri: str | None = None,
        use_default_graph_as_union: bool = False,
        timeout: float | None = None,
        result_limit: int | None = None,
    ) -> QuerySolutions | QueryBoolean | QueryTriples:
        """Runs a SPARQL query with the GIL released; results are streamed.

        With ``use_default_graph_as_union`` the default graph is the union
        of every graph, the default one included; a FROM clause still
        names the query's dataset."""
    def update(self, update: str, *, base_iri: str | None = None) -> None:
        """Runs a SPARQL update, durable when it returns."""
    def quads_for_pattern(
        self, subject: _Subject | None, predicate: NamedNode | None, object: _Term | None, graph_name: _GraphName | None = None
    ) -> QuadIter: ...
    def add(self, quad: Quad) -> None: ...
    def extend(self, quads: Iterable[Quad]) -> None: ...
    def remove(self, quad: Quad) -> None: ...
    def flush(self) -> None: ...
    def optimize(self) -> None:
        """Folds pending updates into pages."""
    def __len__(self) -> int: ...
    def __contains__(self, quad: Quad, /) -> bool: ...

def rdf_error_classes() -> tuple[type[SolidGraphError], type[SolidGraphError]]:
    """(RdfSyntaxError, QueryTimeoutError), exported by solidgraph.rdf."""
