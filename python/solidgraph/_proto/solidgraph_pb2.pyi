from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Array(_message.Message):
    __slots__ = ("dtype", "shape", "data")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    dtype: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    data: bytes
    def __init__(self, dtype: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ..., data: _Optional[bytes] = ...) -> None: ...

class ArrayChunk(_message.Message):
    __slots__ = ("name", "dtype", "shape", "offset", "data", "shm")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    SHM_FIELD_NUMBER: _ClassVar[int]
    name: str
    dtype: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    offset: int
    data: bytes
    shm: ShmSpan
    def __init__(self, name: _Optional[str] = ..., dtype: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ..., offset: _Optional[int] = ..., data: _Optional[bytes] = ..., shm: _Optional[_Union[ShmSpan, _Mapping]] = ...) -> None: ...

class ShmSpan(_message.Message):
    __slots__ = ("offset", "length")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    offset: int
    length: int
    def __init__(self, offset: _Optional[int] = ..., length: _Optional[int] = ...) -> None: ...

class RegisterShmRequest(_message.Message):
    __slots__ = ("path", "size", "cookie")
    PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    COOKIE_FIELD_NUMBER: _ClassVar[int]
    path: str
    size: int
    cookie: bytes
    def __init__(self, path: _Optional[str] = ..., size: _Optional[int] = ..., cookie: _Optional[bytes] = ...) -> None: ...

class RegisterShmReply(_message.Message):
    __slots__ = ("region",)
    REGION_FIELD_NUMBER: _ClassVar[int]
    region: str
    def __init__(self, region: _Optional[str] = ...) -> None: ...

class ReleaseShmRequest(_message.Message):
    __slots__ = ("region",)
    REGION_FIELD_NUMBER: _ClassVar[int]
    region: str
    def __init__(self, region: _Optional[str] = ...) -> None: ...

class ReleaseShmReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Arrays(_message.Message):
    __slots__ = ("chunks",)
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    chunks: _containers.RepeatedCompositeFieldContainer[ArrayChunk]
    def __init__(self, chunks: _Optional[_Iterable[_Union[ArrayChunk, _Mapping]]] = ...) -> None: ...

class InfoRequest(_message.Message):
    __slots__ = ("store",)
    STORE_FIELD_NUMBER: _ClassVar[int]
    store: str
    def __init__(self, store: _Optional[str] = ...) -> None: ...

class TensorInfo(_message.Message):
    __slots__ = ("name", "dtype", "dim")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    DIM_FIELD_NUMBER: _ClassVar[int]
    name: str
    dtype: str
    dim: int
    def __init__(self, name: _Optional[str] = ..., dtype: _Optional[str] = ..., dim: _Optional[int] = ...) -> None: ...

class InfoReply(_message.Message):
    __slots__ = ("name", "num_nodes", "num_edges", "directed", "has_weights", "has_labels", "has_in_edges", "has_lower_lists", "tensors", "pending_updates", "writable", "page_size")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NUM_NODES_FIELD_NUMBER: _ClassVar[int]
    NUM_EDGES_FIELD_NUMBER: _ClassVar[int]
    DIRECTED_FIELD_NUMBER: _ClassVar[int]
    HAS_WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    HAS_LABELS_FIELD_NUMBER: _ClassVar[int]
    HAS_IN_EDGES_FIELD_NUMBER: _ClassVar[int]
    HAS_LOWER_LISTS_FIELD_NUMBER: _ClassVar[int]
    TENSORS_FIELD_NUMBER: _ClassVar[int]
    PENDING_UPDATES_FIELD_NUMBER: _ClassVar[int]
    WRITABLE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    name: str
    num_nodes: int
    num_edges: int
    directed: bool
    has_weights: bool
    has_labels: bool
    has_in_edges: bool
    has_lower_lists: bool
    tensors: _containers.RepeatedCompositeFieldContainer[TensorInfo]
    pending_updates: int
    writable: bool
    page_size: int
    def __init__(self, name: _Optional[str] = ..., num_nodes: _Optional[int] = ..., num_edges: _Optional[int] = ..., directed: _Optional[bool] = ..., has_weights: _Optional[bool] = ..., has_labels: _Optional[bool] = ..., has_in_edges: _Optional[bool] = ..., has_lower_lists: _Optional[bool] = ..., tensors: _Optional[_Iterable[_Union[TensorInfo, _Mapping]]] = ..., pending_updates: _Optional[int] = ..., writable: _Optional[bool] = ..., page_size: _Optional[int] = ...) -> None: ...

class ListStoresRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListStoresReply(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class NeighborsRequest(_message.Message):
    __slots__ = ("store", "ids", "direction", "with_weights", "with_labels")
    STORE_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    WITH_WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    WITH_LABELS_FIELD_NUMBER: _ClassVar[int]
    store: str
    ids: Array
    direction: str
    with_weights: bool
    with_labels: bool
    def __init__(self, store: _Optional[str] = ..., ids: _Optional[_Union[Array, _Mapping]] = ..., direction: _Optional[str] = ..., with_weights: _Optional[bool] = ..., with_labels: _Optional[bool] = ...) -> None: ...

class DegreeRequest(_message.Message):
    __slots__ = ("store", "ids", "direction")
    STORE_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    store: str
    ids: Array
    direction: str
    def __init__(self, store: _Optional[str] = ..., ids: _Optional[_Union[Array, _Mapping]] = ..., direction: _Optional[str] = ...) -> None: ...

class EdgeWeightsRequest(_message.Message):
    __slots__ = ("store", "src", "dst")
    STORE_FIELD_NUMBER: _ClassVar[int]
    SRC_FIELD_NUMBER: _ClassVar[int]
    DST_FIELD_NUMBER: _ClassVar[int]
    store: str
    src: Array
    dst: Array
    def __init__(self, store: _Optional[str] = ..., src: _Optional[_Union[Array, _Mapping]] = ..., dst: _Optional[_Union[Array, _Mapping]] = ...) -> None: ...

class TensorRequest(_message.Message):
    __slots__ = ("store", "name", "ids")
    STORE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    store: str
    name: str
    ids: Array
    def __init__(self, store: _Optional[str] = ..., name: _Optional[str] = ..., ids: _Optional[_Union[Array, _Mapping]] = ...) -> None: ...

class SampleNeighborsRequest(_message.Message):
    __slots__ = ("store", "seeds", "fanouts", "replace", "weighted", "direction", "seed", "tensors", "max_fanout", "batch")
    STORE_FIELD_NUMBER: _ClassVar[int]
    SEEDS_FIELD_NUMBER: _ClassVar[int]
    FANOUTS_FIELD_NUMBER: _ClassVar[int]
    REPLACE_FIELD_NUMBER: _ClassVar[int]
    WEIGHTED_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    TENSORS_FIELD_NUMBER: _ClassVar[int]
    MAX_FANOUT_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    store: str
    seeds: Array
    fanouts: _containers.RepeatedScalarFieldContainer[int]
    replace: bool
    weighted: bool
    direction: str
    seed: int
    tensors: _containers.RepeatedScalarFieldContainer[str]
    max_fanout: int
    batch: int
    def __init__(self, store: _Optional[str] = ..., seeds: _Optional[_Union[Array, _Mapping]] = ..., fanouts: _Optional[_Iterable[int]] = ..., replace: _Optional[bool] = ..., weighted: _Optional[bool] = ..., direction: _Optional[str] = ..., seed: _Optional[int] = ..., tensors: _Optional[_Iterable[str]] = ..., max_fanout: _Optional[int] = ..., batch: _Optional[int] = ...) -> None: ...

class RandomWalksRequest(_message.Message):
    __slots__ = ("store", "starts", "length", "p", "q", "seed", "direction")
    STORE_FIELD_NUMBER: _ClassVar[int]
    STARTS_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    P_FIELD_NUMBER: _ClassVar[int]
    Q_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    store: str
    starts: Array
    length: int
    p: float
    q: float
    seed: int
    direction: str
    def __init__(self, store: _Optional[str] = ..., starts: _Optional[_Union[Array, _Mapping]] = ..., length: _Optional[int] = ..., p: _Optional[float] = ..., q: _Optional[float] = ..., seed: _Optional[int] = ..., direction: _Optional[str] = ...) -> None: ...

class AnalyticsRequest(_message.Message):
    __slots__ = ("store", "algorithm", "source", "target", "parents", "damping", "iterations", "tol", "seed")
    STORE_FIELD_NUMBER: _ClassVar[int]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    PARENTS_FIELD_NUMBER: _ClassVar[int]
    DAMPING_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    TOL_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    store: str
    algorithm: str
    source: int
    target: int
    parents: bool
    damping: float
    iterations: int
    tol: float
    seed: int
    def __init__(self, store: _Optional[str] = ..., algorithm: _Optional[str] = ..., source: _Optional[int] = ..., target: _Optional[int] = ..., parents: _Optional[bool] = ..., damping: _Optional[float] = ..., iterations: _Optional[int] = ..., tol: _Optional[float] = ..., seed: _Optional[int] = ...) -> None: ...

class AnalyticsProgress(_message.Message):
    __slots__ = ("phase", "done", "total")
    PHASE_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    phase: str
    done: int
    total: int
    def __init__(self, phase: _Optional[str] = ..., done: _Optional[int] = ..., total: _Optional[int] = ...) -> None: ...

class AnalyticsReply(_message.Message):
    __slots__ = ("progress", "result")
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    progress: AnalyticsProgress
    result: Arrays
    def __init__(self, progress: _Optional[_Union[AnalyticsProgress, _Mapping]] = ..., result: _Optional[_Union[Arrays, _Mapping]] = ...) -> None: ...

class AddVerticesRequest(_message.Message):
    __slots__ = ("store", "count", "tensors", "nosync")
    class TensorsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Array
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Array, _Mapping]] = ...) -> None: ...
    STORE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    TENSORS_FIELD_NUMBER: _ClassVar[int]
    NOSYNC_FIELD_NUMBER: _ClassVar[int]
    store: str
    count: int
    tensors: _containers.MessageMap[str, Array]
    nosync: bool
    def __init__(self, store: _Optional[str] = ..., count: _Optional[int] = ..., tensors: _Optional[_Mapping[str, Array]] = ..., nosync: _Optional[bool] = ...) -> None: ...

class AddVerticesReply(_message.Message):
    __slots__ = ("first", "count")
    FIRST_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    first: int
    count: int
    def __init__(self, first: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...

class DeleteVerticesRequest(_message.Message):
    __slots__ = ("store", "ids", "nosync")
    STORE_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    NOSYNC_FIELD_NUMBER: _ClassVar[int]
    store: str
    ids: Array
    nosync: bool
    def __init__(self, store: _Optional[str] = ..., ids: _Optional[_Union[Array, _Mapping]] = ..., nosync: _Optional[bool] = ...) -> None: ...

class AddEdgesRequest(_message.Message):
    __slots__ = ("store", "src", "dst", "weights", "labels", "nosync")
    STORE_FIELD_NUMBER: _ClassVar[int]
    SRC_FIELD_NUMBER: _ClassVar[int]
    DST_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    NOSYNC_FIELD_NUMBER: _ClassVar[int]
    store: str
    src: Array
    dst: Array
    weights: Array
    labels: Array
    nosync: bool
    def __init__(self, store: _Optional[str] = ..., src: _Optional[_Union[Array, _Mapping]] = ..., dst: _Optional[_Union[Array, _Mapping]] = ..., weights: _Optional[_Union[Array, _Mapping]] = ..., labels: _Optional[_Union[Array, _Mapping]] = ..., nosync: _Optional[bool] = ...) -> None: ...

class DeleteEdgesRequest(_message.Message):
    __slots__ = ("store", "src", "dst", "nosync")
    STORE_FIELD_NUMBER: _ClassVar[int]
    SRC_FIELD_NUMBER: _ClassVar[int]
    DST_FIELD_NUMBER: _ClassVar[int]
    NOSYNC_FIELD_NUMBER: _ClassVar[int]
    store: str
    src: Array
    dst: Array
    nosync: bool
    def __init__(self, store: _Optional[str] = ..., src: _Optional[_Union[Array, _Mapping]] = ..., dst: _Optional[_Union[Array, _Mapping]] = ..., nosync: _Optional[bool] = ...) -> None: ...

class UpdateEdgeWeightsRequest(_message.Message):
    __slots__ = ("store", "src", "dst", "weights", "nosync")
    STORE_FIELD_NUMBER: _ClassVar[int]
    SRC_FIELD_NUMBER: _ClassVar[int]
    DST_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    NOSYNC_FIELD_NUMBER: _ClassVar[int]
    store: str
    src: Array
    dst: Array
    weights: Array
    nosync: bool
    def __init__(self, store: _Optional[str] = ..., src: _Optional[_Union[Array, _Mapping]] = ..., dst: _Optional[_Union[Array, _Mapping]] = ..., weights: _Optional[_Union[Array, _Mapping]] = ..., nosync: _Optional[bool] = ...) -> None: ...

class UpdateTensorRequest(_message.Message):
    __slots__ = ("store", "name", "ids", "rows", "nosync")
    STORE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    NOSYNC_FIELD_NUMBER: _ClassVar[int]
    store: str
    name: str
    ids: Array
    rows: Array
    nosync: bool
    def __init__(self, store: _Optional[str] = ..., name: _Optional[str] = ..., ids: _Optional[_Union[Array, _Mapping]] = ..., rows: _Optional[_Union[Array, _Mapping]] = ..., nosync: _Optional[bool] = ...) -> None: ...

class FlushRequest(_message.Message):
    __slots__ = ("store",)
    STORE_FIELD_NUMBER: _ClassVar[int]
    store: str
    def __init__(self, store: _Optional[str] = ...) -> None: ...

class MergeRequest(_message.Message):
    __slots__ = ("store",)
    STORE_FIELD_NUMBER: _ClassVar[int]
    store: str
    def __init__(self, store: _Optional[str] = ...) -> None: ...

class UpdateReply(_message.Message):
    __slots__ = ("pending_updates",)
    PENDING_UPDATES_FIELD_NUMBER: _ClassVar[int]
    pending_updates: int
    def __init__(self, pending_updates: _Optional[int] = ...) -> None: ...

class MergeReply(_message.Message):
    __slots__ = ("pages_written", "updates_merged")
    PAGES_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    UPDATES_MERGED_FIELD_NUMBER: _ClassVar[int]
    pages_written: int
    updates_merged: int
    def __init__(self, pages_written: _Optional[int] = ..., updates_merged: _Optional[int] = ...) -> None: ...

class UpdateGraphOptions(_message.Message):
    __slots__ = ("undirected", "self_loops", "dedup", "in_edges", "lower_lists", "num_nodes", "order")
    UNDIRECTED_FIELD_NUMBER: _ClassVar[int]
    SELF_LOOPS_FIELD_NUMBER: _ClassVar[int]
    DEDUP_FIELD_NUMBER: _ClassVar[int]
    IN_EDGES_FIELD_NUMBER: _ClassVar[int]
    LOWER_LISTS_FIELD_NUMBER: _ClassVar[int]
    NUM_NODES_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    undirected: bool
    self_loops: bool
    dedup: bool
    in_edges: bool
    lower_lists: bool
    num_nodes: int
    order: str
    def __init__(self, undirected: _Optional[bool] = ..., self_loops: _Optional[bool] = ..., dedup: _Optional[bool] = ..., in_edges: _Optional[bool] = ..., lower_lists: _Optional[bool] = ..., num_nodes: _Optional[int] = ..., order: _Optional[str] = ...) -> None: ...

class UpdateGraphRequest(_message.Message):
    __slots__ = ("name", "options", "src", "dst", "weights", "labels", "tensor", "rows")
    NAME_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    SRC_FIELD_NUMBER: _ClassVar[int]
    DST_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    TENSOR_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    name: str
    options: UpdateGraphOptions
    src: Array
    dst: Array
    weights: Array
    labels: Array
    tensor: str
    rows: Array
    def __init__(self, name: _Optional[str] = ..., options: _Optional[_Union[UpdateGraphOptions, _Mapping]] = ..., src: _Optional[_Union[Array, _Mapping]] = ..., dst: _Optional[_Union[Array, _Mapping]] = ..., weights: _Optional[_Union[Array, _Mapping]] = ..., labels: _Optional[_Union[Array, _Mapping]] = ..., tensor: _Optional[str] = ..., rows: _Optional[_Union[Array, _Mapping]] = ...) -> None: ...

class UpdateGraphReply(_message.Message):
    __slots__ = ("name", "num_nodes", "num_edges")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NUM_NODES_FIELD_NUMBER: _ClassVar[int]
    NUM_EDGES_FIELD_NUMBER: _ClassVar[int]
    name: str
    num_nodes: int
    num_edges: int
    def __init__(self, name: _Optional[str] = ..., num_nodes: _Optional[int] = ..., num_edges: _Optional[int] = ...) -> None: ...

class ShardInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ShardInfoReply(_message.Message):
    __slots__ = ("book_id", "shard", "parts", "directions", "undirected")
    BOOK_ID_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    DIRECTIONS_FIELD_NUMBER: _ClassVar[int]
    UNDIRECTED_FIELD_NUMBER: _ClassVar[int]
    book_id: str
    shard: int
    parts: int
    directions: _containers.RepeatedScalarFieldContainer[str]
    undirected: bool
    def __init__(self, book_id: _Optional[str] = ..., shard: _Optional[int] = ..., parts: _Optional[int] = ..., directions: _Optional[_Iterable[str]] = ..., undirected: _Optional[bool] = ...) -> None: ...

class ShardSampleRequest(_message.Message):
    __slots__ = ("book_id", "ids", "local", "seed", "hop", "fanout", "replace", "weighted", "direction")
    BOOK_ID_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    LOCAL_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    HOP_FIELD_NUMBER: _ClassVar[int]
    FANOUT_FIELD_NUMBER: _ClassVar[int]
    REPLACE_FIELD_NUMBER: _ClassVar[int]
    WEIGHTED_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    book_id: str
    ids: Array
    local: Array
    seed: int
    hop: int
    fanout: int
    replace: bool
    weighted: bool
    direction: str
    def __init__(self, book_id: _Optional[str] = ..., ids: _Optional[_Union[Array, _Mapping]] = ..., local: _Optional[_Union[Array, _Mapping]] = ..., seed: _Optional[int] = ..., hop: _Optional[int] = ..., fanout: _Optional[int] = ..., replace: _Optional[bool] = ..., weighted: _Optional[bool] = ..., direction: _Optional[str] = ...) -> None: ...
