"""A SolidGraph server's stores as graphs: `solidgraph.connect(addr)`.

    g = solidgraph.connect("127.0.0.1:50051", token="...")   # `solidgraph serve`
    indptr, indices = g.neighbors([0, 1, 2])
    loader = solidgraph.torch.NeighborLoader(g, train_ids, [25, 10], batch_size=1024)

The remote graph has the local `solidgraph.Graph`'s reading, sampling and
update methods with the same arguments and results (numpy in, numpy out),
so `solidgraph.torch.NeighborLoader` and the PyG backend run over it
unchanged; equal seeds give equal samples. Arrays travel as raw bytes.
Errors keep their kind: a server's INVALID_ARGUMENT is an
`InvalidArgumentError`, NOT_FOUND a `NotFoundError`, DATA_LOSS a
`CorruptionError`; the other statuses (UNAUTHENTICATED, PERMISSION_DENIED,
RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED, UNAVAILABLE) raise `RemoteError`.
Every error carries the gRPC status as `.code`. Needs grpcio
(`pip install solidgraph[client]`).

The calls that answer with arrays (neighbors, degree, edge_weights,
tensor, sample_neighbors and the loader, random_walks) go through the
extension's native channel on a plaintext connection: it takes the reply
in with the GIL released and the arrays are views of the received
buffers, one copy in all (grpcio's receive copied each reply three times
in Python). TLS connections, updates and analytics use grpcio.
"""

from __future__ import annotations

import concurrent.futures
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Sequence, Tuple, Union

import grpc
import grpc.experimental
import numpy as np

from solidgraph._native import (
    CorruptionError,
    InvalidArgumentError,
    NotFoundError,
    SolidGraphError,
    StaleError,
)
from solidgraph._proto import solidgraph_pb2 as pb

try:
    from solidgraph._native import RemoteChannel as _RemoteChannel
except ImportError:  # an extension built before the native client
    _RemoteChannel = None

__all__ = ["RemoteError", "RemoteGraph", "RemoteSample", "connect"]


class RemoteError(SolidGraphError):
    """A call the server refused or could not finish for a reason other
    than its arguments or data: `code` is the grpc.StatusCode."""

    code: grpc.StatusCode


_KINDS = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.FAILED_PRECONDITION: InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.DATA_LOSS: CorruptionError,
    grpc.StatusCode.ABORTED: StaleError,
}

# (method path, request message) per RPC; replies are decoded by these.
_UNARY = {
    "ListStores": pb.ListStoresReply,
    "Info": pb.InfoReply,
    "RegisterShm": pb.RegisterShmReply,
    "ReleaseShm": pb.ReleaseShmReply,
    "AddVertices": pb.AddVerticesReply,
    "DeleteVertices": pb.UpdateReply,
    "AddEdges": pb.UpdateReply,
    "DeleteEdges": pb.UpdateReply,
    "UpdateEdgeWeights": pb.UpdateReply,
    "UpdateTensor": pb.UpdateReply,
    "Flush": pb.UpdateReply,
    "Merge": pb.MergeReply,
}
_UPDATES = {"AddVertices", "DeleteVertices", "AddEdges", "DeleteEdges", "UpdateEdgeWeights", "UpdateTensor", "Flush", "Merge"}
_STREAMS = ("Neighbors", "Degree", "EdgeWeights", "Tensor", "SampleNeighbors", "RandomWalks")


_CODES = {c.value[0]: c for c in grpc.StatusCode}


def _status_error(code: grpc.StatusCode, details: Optional[str]) -> SolidGraphError:
    err = _KINDS.get(code, RemoteError)(f"{details} [{code.name}]")
    err.code = code
    return err


def _error(e: grpc.RpcError) -> SolidGraphError:
    return _status_error(e.code(), e.details())


def _array(a: Any, dtype: str, what: str) -> pb.Array:
    """A 1-d array of integers (ids) or of `dtype` as raw little-endian bytes."""
    arr = np.asarray(a)
    if arr.ndim != 1:
        raise InvalidArgumentError(f"{what} must be 1-dimensional, not of shape {arr.shape}")
    if dtype == "int64":
        if arr.size and arr.dtype.kind not in "iu":
            raise InvalidArgumentError(f"{what} must be integers, not {arr.dtype}")
        if arr.dtype.kind == "u" and arr.size and int(arr.max()) >= 2**63:
            raise InvalidArgumentError(f"{what}: {int(arr.max())} is not a vertex id")
    arr = np.ascontiguousarray(arr, dtype=np.dtype(dtype).newbyteorder("<"))
    return pb.Array(dtype=dtype, shape=[arr.shape[0]], data=arr.tobytes())


def _rows(rows: Any, dtype: str, dim: int, what: str) -> pb.Array:
    """Tensor rows cast to the stored dtype by numpy's same_kind rule, as
    the local update_tensor casts them."""
    arr = np.asarray(rows)
    target = np.dtype(dtype)
    if not np.can_cast(arr.dtype, target, "same_kind"):
        raise InvalidArgumentError(f"{what}: {arr.dtype} rows cannot be cast to the tensor's {target} (same_kind)")
    arr = np.ascontiguousarray(arr, dtype=target.newbyteorder("<"))
    return pb.Array(dtype=dtype, shape=list(arr.shape), data=arr.tobytes())


def _varint(b: memoryview, i: int) -> Tuple[int, int]:
    """The varint at b[i:] and the index after it."""
    v = shift = 0
    while True:
        if i >= len(b) or shift > 63:
            raise CorruptionError("a result message ends inside a number")
        x = b[i]
        v |= (x & 0x7F) << shift
        i += 1
        if x < 0x80:
            return v, i
        shift += 7


def _fields(b: memoryview) -> Iterator[Tuple[int, int, Any]]:
    """(field number, wire type, value) of a protobuf message: an int for
    varints, a memoryview of `b` (no copy) for length-delimited fields."""
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(b, i)
        elif wire == 2:
            n, i = _varint(b, i)
            if i + n > len(b):
                raise CorruptionError(f"a result message field of {n} bytes runs past its end")
            v, i = b[i : i + n], i + n
        elif wire in (1, 5):
            n = 8 if wire == 1 else 4
            v, i = b[i : i + n], i + n
        else:
            raise CorruptionError(f"a result message has a field of wire type {wire}")
        yield field, wire, v


def _raw_chunks(raw: bytes) -> Iterator[Tuple[str, str, Tuple[int, ...], int, memoryview]]:
    """The chunks of an encoded `Arrays` message (solidgraph.proto), their
    data as views of `raw`: the reply is decoded without copying its bytes
    (protobuf's classes copy every bytes field)."""
    for field, wire, chunk in _fields(memoryview(raw)):
        if field != 1 or wire != 2:
            continue
        name = dtype = ""
        shape: list = []
        offset = 0
        data = memoryview(b"")
        for f, w, v in _fields(chunk):
            if f == 1 and w == 2:
                name = str(v, "utf-8")
            elif f == 2 and w == 2:
                dtype = str(v, "ascii")
            elif f == 3 and w == 2:  # packed
                j = 0
                while j < len(v):
                    x, j = _varint(v, j)
                    shape.append(x)
            elif f == 3 and w == 0:
                shape.append(v)
            elif f == 4 and w == 0:
                offset = v
            elif f == 5 and w == 2:
                data = v
        yield name, dtype, tuple(shape), offset, data


def _chunks(m: Union[bytes, pb.Arrays]) -> Iterator[Tuple[str, str, Tuple[int, ...], int, Any]]:
    if isinstance(m, (bytes, bytearray, memoryview)):
        return _raw_chunks(m)
    return ((c.name, c.dtype, tuple(int(s) for s in c.shape), c.offset, c.data) for c in m.chunks)


class _Over:
    """A writable array interface over `size` bytes at `addr` inside the
    reply `raw`, which it keeps alive (numpy arrays over bytes objects are
    read-only; this reply is ours alone and never hashed or reused, so
    writing to it breaks no other reader)."""

    def __init__(self, raw: bytes, addr: int, shape: Tuple[int, ...], dtype: np.dtype):
        self.raw = raw
        self.__array_interface__ = {"data": (addr, False), "shape": shape, "typestr": dtype.str, "version": 3}


def _whole(data: memoryview, dtype: np.dtype, shape: Tuple[int, ...]) -> Optional[np.ndarray]:
    """The array over the reply bytes themselves when one chunk holds all
    of it at an address aligned for its dtype (numpy and torch expect
    aligned data); None otherwise."""
    raw = data.obj
    if not isinstance(raw, bytes) or len(data) == 0:
        return None
    addr = np.frombuffer(data, dtype=np.uint8).ctypes.data
    if addr % dtype.itemsize:
        return None
    return np.asarray(_Over(raw, addr, shape, dtype))


def _assemble(msgs: Iterator[Union[bytes, pb.Arrays]]) -> Dict[str, np.ndarray]:
    """The named arrays of a streamed result (raw `Arrays` messages or
    parsed ones), all writable, as the local Graph returns them. An array
    that arrives whole in one chunk at an aligned address is a view of the
    reply (no copy); the others are copied, chunk by chunk, from the reply
    to their offsets in an array allocated at the first chunk (numpy's copy
    runs without the GIL, so a loader's threads overlap it)."""
    out: Dict[str, np.ndarray] = {}
    got: Dict[str, int] = {}
    for m in msgs:
        for name, dtype, shape, offset, data in _chunks(m):
            if not name:
                continue  # padding (solidgraph.proto)
            dt = np.dtype(dtype).newbyteorder("<")
            if name not in out:
                size = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
                whole = _whole(data, dt, shape) if offset == 0 and len(data) == size and isinstance(data, memoryview) else None
                got[name] = 0
                if whole is not None:
                    out[name], got[name] = whole, size
                    continue
                out[name] = np.empty(shape, dtype=dt)
            flat = out[name].reshape(-1).view(np.uint8)
            end = offset + len(data)
            if end > len(flat) or len(data) % dt.itemsize:
                raise CorruptionError(f"result array {name!r}: a chunk of {len(data)} bytes ends at byte {end} of {len(flat)}")
            flat[offset:end] = np.frombuffer(data, dtype=np.uint8)
            got[name] += len(data)
    for name, a in out.items():
        # Chunks never overlap (the server slices each array once), so a
        # count equal to the size means every byte arrived.
        if got[name] != a.nbytes:
            raise CorruptionError(f"result array {name!r}: {got[name]} bytes arrived for {a.nbytes}")
    return out


def _reporter(what: str, progress: Union[bool, Callable[[str, int, int], Any]]) -> Optional[Callable[[str, int, int], Any]]:
    """The local `progress=` argument: False, True (lines on sys.stderr) or
    a callable taking (phase, done, total)."""
    if progress is False:
        return None
    if progress is True:
        return lambda phase, done, total: sys.stderr.write(f"solidgraph {what}: {phase} {done}/{total}\n")
    if callable(progress):
        return progress
    raise InvalidArgumentError("progress must be a bool or a callable taking (phase, done, total)")


def _names(tensors: Union[None, str, Sequence[str]]) -> list:
    if tensors is None:
        return []
    return [tensors] if isinstance(tensors, str) else [str(t) for t in tensors]


def _seed(seed: Optional[int]) -> int:
    return int.from_bytes(os.urandom(8), "little") if seed is None else int(seed)


class RemoteSample:
    """A sampled subgraph with the attributes of `solidgraph.Sample`."""

    def __init__(self, a: Dict[str, np.ndarray], names: Sequence[str]):
        self.edge_index = _edge_index(a["row"], a["col"])
        self.row = self.edge_index[0]
        self.col = self.edge_index[1]
        self.node = a["node"]
        self.edge = a["edge"]
        self.num_sampled_nodes = a["num_sampled_nodes"]
        self.num_sampled_edges = a["num_sampled_edges"]
        self.tensors = {n: a[f"tensor/{n}"] for n in names}

    def __repr__(self) -> str:
        names = ", ".join(self.tensors) or "none"
        return f"<solidgraph.RemoteSample: {len(self.node)} nodes, {len(self.edge)} edges; tensors: {names}>"


def _edge_index(row: np.ndarray, col: np.ndarray) -> np.ndarray:
    """(2, E) int64 over row and col: a view when the server wrote them one
    after the other in one buffer (a reply in shared memory), else a copy."""
    e = len(row)
    adjacent = (
        row.base is not None
        and row.base is col.base
        and row.dtype == col.dtype == np.int64
        and len(col) == e
        and row.flags.c_contiguous
        and col.flags.c_contiguous
        and col.ctypes.data == row.ctypes.data + row.nbytes
    )
    if adjacent:
        # Both lie in the buffer `row.base` owns, which the view keeps alive.
        return np.lib.stride_tricks.as_strided(row, shape=(2, e), strides=(8 * e if e else 8, 8), writeable=True)
    out = np.empty((2, e), dtype=np.int64)
    out[0] = row
    out[1] = col
    return out


class _Loader:
    """Batches sampled by the server, `prefetch` requests in flight on
    `workers` threads, handed out in order (the local SampleLoader's
    contract: batch i drawn with the loader seed of batch i)."""

    def __init__(self, g: "RemoteGraph", batches: list, req: dict, workers: int, prefetch: int):
        self._g, self._batches, self._req = g, batches, req
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, workers))
        self._ahead = max(1, prefetch)
        self._pending: list = []
        self._next = 0
        self.position = 0

    def _submit(self) -> None:
        while self._next < len(self._batches) and len(self._pending) < self._ahead:
            i = self._next
            self._pending.append(self._pool.submit(self._g._sample, self._batches[i], batch=i, **self._req))
            self._next += 1

    def __iter__(self) -> "_Loader":
        return self

    def __len__(self) -> int:
        return len(self._batches)

    def __next__(self) -> RemoteSample:
        self._submit()
        if not self._pending:
            self._pool.shutdown(wait=False)
            raise StopIteration
        fut = self._pending.pop(0)
        try:
            s = fut.result()
        except BaseException:
            for f in self._pending:
                f.cancel()
            self._pending.clear()
            self._next = len(self._batches)
            self._pool.shutdown(wait=False)
            raise
        self.position += 1
        self._submit()
        return s


class RemoteGraph:
    """One store of a SolidGraph server, with the methods of
    `solidgraph.Graph` (see there for each one's arguments and result)."""

    def __init__(
        self, channel: grpc.Channel, addr: str, store: str, token: Optional[str], timeout: Optional[float], native: Any = None, shm: Optional["_Shm"] = None
    ):
        self._channel = channel
        # The native channel (or None): the array replies' fast path.
        self._native = native
        # Its shared-memory region, set up at the first array call (or None).
        self._shm = shm
        self._addr = addr
        self._store = store
        self._timeout = timeout
        self._token = token
        self._meta = (("authorization", f"Bearer {token}"),) if token else None
        self._calls: Dict[str, Any] = {}
        for name, reply in _UNARY.items():
            service = "Updates" if name in _UPDATES else "Graph"
            self._calls[name] = channel.unary_unary(f"/solidgraph.v1.{service}/{name}", request_serializer=lambda m: m.SerializeToString(), response_deserializer=reply.FromString)
        for name in _STREAMS:
            # Replies stay raw bytes: _assemble decodes them without copies.
            self._calls[name] = channel.unary_stream(f"/solidgraph.v1.Graph/{name}", request_serializer=lambda m: m.SerializeToString(), response_deserializer=bytes)
        self._calls["UpdateGraph"] = channel.stream_unary(
            "/solidgraph.v1.Updates/UpdateGraph", request_serializer=lambda m: m.SerializeToString(), response_deserializer=pb.UpdateGraphReply.FromString
        )
        self._calls["Analytics"] = channel.unary_stream(
            "/solidgraph.v1.Graph/Analytics", request_serializer=lambda m: m.SerializeToString(), response_deserializer=pb.AnalyticsReply.FromString
        )
        if not store:
            names = list(self._unary("ListStores", pb.ListStoresRequest()).names)
            if len(names) > 1:
                raise InvalidArgumentError(f"{addr} serves {len(names)} stores; name one with store=...: {', '.join(names)}")
            # A server with only a --data-dir may serve nothing yet: the
            # graph is then good for update_graph only.
            self._store = names[0] if names else ""

    # ---- calls --------------------------------------------------------------

    def _unary(self, name: str, req: Any) -> Any:
        try:
            return self._calls[name](req, timeout=self._timeout, metadata=self._meta)
        except grpc.RpcError as e:
            raise _error(e) from None

    def _stream(self, name: str, req: Any) -> Dict[str, np.ndarray]:
        if self._shm is not None and self._native is not None:
            self._shm.setup(self)
        if self._native is not None:
            code, details, arrays = self._native.call(f"/solidgraph.v1.Graph/{name}", req.SerializeToString(), self._timeout)
            if code:
                raise _status_error(_CODES.get(code, grpc.StatusCode.UNKNOWN), details)
            return arrays
        try:
            return _assemble(self._calls[name](req, timeout=self._timeout, metadata=self._meta))
        except grpc.RpcError as e:
            raise _error(e) from None

    def _info(self) -> pb.InfoReply:
        return self._unary("Info", pb.InfoRequest(store=self._store))

    # ---- what the store holds -----------------------------------------------

    @property
    def num_nodes(self) -> int:
        return self._info().num_nodes

    @property
    def num_edges(self) -> int:
        return self._info().num_edges

    @property
    def directed(self) -> bool:
        return self._info().directed

    @property
    def has_weights(self) -> bool:
        return self._info().has_weights

    @property
    def has_labels(self) -> bool:
        return self._info().has_labels

    @property
    def has_in_edges(self) -> bool:
        return self._info().has_in_edges

    @property
    def has_lower_lists(self) -> bool:
        return self._info().has_lower_lists

    @property
    def pending_updates(self) -> int:
        return self._info().pending_updates

    @property
    def tensors(self) -> Dict[str, Tuple[str, int]]:
        return {t.name: (t.dtype, t.dim) for t in self._info().tensors}

    @property
    def path(self) -> str:
        """grpc://ADDR/STORE: where the store is served."""
        return f"grpc://{self._addr}/{self._store}"

    @property
    def store(self) -> str:
        return self._store

    # ---- reads --------------------------------------------------------------

    def neighbors(self, ids: Any, direction: str = "out", with_weights: bool = False, with_labels: bool = False) -> tuple:
        a = self._stream("Neighbors", pb.NeighborsRequest(store=self._store, ids=_array(ids, "int64", "ids"), direction=direction, with_weights=with_weights, with_labels=with_labels))
        out = [a["indptr"], a["indices"]]
        if with_weights:
            out.append(a["weights"])
        if with_labels:
            out.append(a["labels"])
        return tuple(out)

    def degree(self, ids: Any, direction: str = "out") -> np.ndarray:
        return self._stream("Degree", pb.DegreeRequest(store=self._store, ids=_array(ids, "int64", "ids"), direction=direction))["degree"]

    def edge_weights(self, src: Any, dst: Any) -> np.ndarray:
        req = pb.EdgeWeightsRequest(store=self._store, src=_array(src, "int64", "src"), dst=_array(dst, "int64", "dst"))
        return self._stream("EdgeWeights", req)["weights"]

    def tensor(self, name: str, ids: Any) -> np.ndarray:
        return self._stream("Tensor", pb.TensorRequest(store=self._store, name=name, ids=_array(ids, "int64", "ids")))["rows"]

    # ---- sampling and walks -------------------------------------------------

    def _sample(self, seeds: Any, fanouts: Sequence[int], replace: bool, weighted: bool, direction: str, seed: int, tensors: list, max_fanout: int, batch: Optional[int] = None) -> RemoteSample:
        req = pb.SampleNeighborsRequest(
            store=self._store,
            seeds=_array(seeds, "int64", "seeds"),
            fanouts=[int(f) for f in fanouts],
            replace=replace,
            weighted=weighted,
            direction=direction,
            seed=seed,
            tensors=tensors,
            max_fanout=max_fanout,
        )
        if batch is not None:
            req.batch = batch
        return RemoteSample(self._stream("SampleNeighbors", req), tensors)

    def sample_neighbors(
        self,
        seeds: Any,
        fanouts: Sequence[int],
        replace: bool = False,
        weighted: bool = False,
        direction: str = "in",
        seed: Optional[int] = None,
        tensors: Union[None, str, Sequence[str]] = None,
        max_fanout: int = 10000,
    ) -> RemoteSample:
        return self._sample(seeds, fanouts, replace, weighted, direction, _seed(seed), _names(tensors), max_fanout)

    def sample_loader(
        self,
        batches: Any,
        fanouts: Sequence[int],
        replace: bool = False,
        weighted: bool = False,
        direction: str = "in",
        seed: Optional[int] = None,
        tensors: Union[None, str, Sequence[str]] = None,
        workers: int = 2,
        prefetch: int = 4,
        max_fanout: int = 10000,
        lookahead: int = 32,
    ) -> _Loader:
        """The local sample_loader's batches, sampled by the server
        (`lookahead` is the server's business and is ignored here)."""
        del lookahead
        req = dict(fanouts=list(fanouts), replace=replace, weighted=weighted, direction=direction, seed=_seed(seed), tensors=_names(tensors), max_fanout=max_fanout)
        return _Loader(self, [np.asarray(b) for b in batches], req, workers, prefetch)

    def random_walks(self, starts: Any, length: int, p: float = 1.0, q: float = 1.0, seed: Optional[int] = None, direction: str = "out") -> np.ndarray:
        req = pb.RandomWalksRequest(store=self._store, starts=_array(starts, "int64", "starts"), length=int(length), p=p, q=q, seed=_seed(seed), direction=direction)
        return self._stream("RandomWalks", req)["walks"]

    # ---- analytics ----------------------------------------------------------

    def _analytics(self, algorithm: str, progress: Any, **args: Any) -> Dict[str, np.ndarray]:
        """Runs `algorithm` on the server: progress messages go to
        `progress`, the result arrays are assembled. An exception here (a
        KeyboardInterrupt, or one the progress callback raises) cancels the
        call, which stops the server's work."""
        report = _reporter(algorithm, progress)
        req = pb.AnalyticsRequest(store=self._store, algorithm=algorithm, **{k: v for k, v in args.items() if v is not None})
        call = self._calls["Analytics"](req, timeout=self._timeout, metadata=self._meta)
        results = []
        try:
            for m in call:
                if m.HasField("progress"):
                    if report is not None:
                        report(m.progress.phase, m.progress.done, m.progress.total)
                else:
                    results.append(m.result)
        except grpc.RpcError as e:
            raise _error(e) from None
        except BaseException:
            call.cancel()
            raise
        return _assemble(iter(results))

    def bfs(self, source: int, target: Optional[int] = None, parents: bool = False, progress: Any = False) -> Any:
        a = self._analytics("bfs", progress, source=int(source), target=None if target is None else int(target), parents=bool(parents))
        return (a["levels"], a["parents"]) if parents else a["levels"]

    def wcc(self, progress: Any = False) -> np.ndarray:
        return self._analytics("wcc", progress)["labels"]

    def pagerank(self, damping: float = 0.85, iterations: int = 20, tol: Optional[float] = None, progress: Any = False) -> np.ndarray:
        return self._analytics("pagerank", progress, damping=float(damping), iterations=int(iterations), tol=None if tol is None else float(tol))["ranks"]

    def mis(self, seed: int = 0, progress: Any = False) -> np.ndarray:
        return self._analytics("mis", progress, seed=int(seed))["in_set"]

    def kcore(self, progress: Any = False) -> np.ndarray:
        return self._analytics("kcore", progress)["core"]

    def sssp(self, source: int, progress: Any = False) -> np.ndarray:
        return self._analytics("sssp", progress, source=int(source))["dist"]

    def cdlp(self, iterations: int = 10, progress: Any = False) -> np.ndarray:
        return self._analytics("cdlp", progress, iterations=int(iterations))["labels"]

    def lcc(self, progress: Any = False) -> np.ndarray:
        return self._analytics("lcc", progress)["lcc"]

    # ---- updates ------------------------------------------------------------

    def add_vertices(self, count: int, tensors: Optional[Mapping[str, Any]] = None, durable: bool = True) -> np.ndarray:
        have = self.tensors if tensors else {}
        rows = {}
        for name, r in (tensors or {}).items():
            if name not in have:
                raise NotFoundError(f"no tensor named {name!r} (the store has: {', '.join(have)})")
            rows[name] = _rows(r, have[name][0], have[name][1], f"tensor {name!r}")
        rep = self._unary("AddVertices", pb.AddVerticesRequest(store=self._store, count=int(count), tensors=rows, nosync=not durable))
        return np.arange(rep.first, rep.first + rep.count, dtype=np.int64)

    def delete_vertices(self, ids: Any, durable: bool = True) -> None:
        self._unary("DeleteVertices", pb.DeleteVerticesRequest(store=self._store, ids=_array(ids, "int64", "ids"), nosync=not durable))

    def add_edges(self, src: Any, dst: Any, weights: Any = None, labels: Any = None, durable: bool = True) -> None:
        req = pb.AddEdgesRequest(store=self._store, src=_array(src, "int64", "src"), dst=_array(dst, "int64", "dst"), nosync=not durable)
        if weights is not None:
            req.weights.CopyFrom(_array(weights, "float32", "weights"))
        if labels is not None:
            req.labels.CopyFrom(_array(labels, "uint32", "labels"))
        self._unary("AddEdges", req)

    def delete_edges(self, src: Any, dst: Any, durable: bool = True) -> None:
        self._unary("DeleteEdges", pb.DeleteEdgesRequest(store=self._store, src=_array(src, "int64", "src"), dst=_array(dst, "int64", "dst"), nosync=not durable))

    def update_edge_weights(self, src: Any, dst: Any, weights: Any, durable: bool = True) -> None:
        req = pb.UpdateEdgeWeightsRequest(
            store=self._store, src=_array(src, "int64", "src"), dst=_array(dst, "int64", "dst"), weights=_array(weights, "float32", "weights"), nosync=not durable
        )
        self._unary("UpdateEdgeWeights", req)

    def update_tensor(self, name: str, ids: Any, rows: Any, durable: bool = True) -> None:
        have = self.tensors
        if name not in have:
            raise NotFoundError(f"no tensor named {name!r} (the store has: {', '.join(have)})")
        req = pb.UpdateTensorRequest(store=self._store, name=name, ids=_array(ids, "int64", "ids"), rows=_rows(rows, have[name][0], have[name][1], f"tensor {name!r}"), nosync=not durable)
        self._unary("UpdateTensor", req)

    def update_graph(
        self,
        name: str,
        edges: Any,
        node_tensors: Optional[Mapping[str, Any]] = None,
        *,
        edge_weights: Any = None,
        edge_labels: Any = None,
        undirected: bool = False,
        self_loops: bool = False,
        dedup: bool = False,
        in_edges: bool = False,
        lower_lists: bool = False,
        num_nodes: Optional[int] = None,
        order: str = "input",
        chunk_bytes: int = 16 << 20,
    ) -> "RemoteGraph":
        """Builds a new store `name` on the server (under its --data-dir)
        from `edges` ((src, dst[, weights]) arrays or a (2, E) array) and
        node tensors, as `solidgraph.import_graph` builds one locally; the
        data streams in chunks of about `chunk_bytes`. Returns the new
        store's remote graph. A name in use is refused (ALREADY_EXISTS)."""
        if isinstance(edges, np.ndarray) and edges.ndim == 2 and edges.shape[0] == 2:
            edges = (edges[0], edges[1])
        if not isinstance(edges, (tuple, list)) or len(edges) not in (2, 3):
            raise InvalidArgumentError("edges must be (src, dst[, weights]) arrays or a (2, E) array")
        src, dst = np.asarray(edges[0]), np.asarray(edges[1])
        if len(edges) == 3:
            if edge_weights is not None:
                raise InvalidArgumentError("weights given twice: in the edges tuple and as edge_weights")
            edge_weights = edges[2]
        if src.shape != dst.shape or src.ndim != 1:
            raise InvalidArgumentError(f"src and dst must be 1-D of one length, not of shapes {src.shape} and {dst.shape}")
        w = None if edge_weights is None else np.asarray(edge_weights)
        lab = None if edge_labels is None else np.asarray(edge_labels)
        opts = pb.UpdateGraphOptions(undirected=undirected, self_loops=self_loops, dedup=dedup, in_edges=in_edges, lower_lists=lower_lists, order=order)
        if num_nodes is not None:
            opts.num_nodes = int(num_nodes)
        tensors = {k: np.asarray(v) for k, v in (node_tensors or {}).items()}

        def messages() -> Iterator[pb.UpdateGraphRequest]:
            yield pb.UpdateGraphRequest(name=name, options=opts)
            step = max(1, chunk_bytes // 24)
            for lo in range(0, len(src), step):
                hi = min(lo + step, len(src))
                m = pb.UpdateGraphRequest(src=_array(src[lo:hi], "int64", "src"), dst=_array(dst[lo:hi], "int64", "dst"))
                if w is not None:
                    m.weights.CopyFrom(_array(w[lo:hi], "float32", "edge_weights"))
                if lab is not None:
                    m.labels.CopyFrom(_array(lab[lo:hi], "uint32", "edge_labels"))
                yield m
            for tname, arr in tensors.items():
                if arr.ndim not in (1, 2):
                    raise InvalidArgumentError(f"tensor {tname!r} must be 1-D or 2-D, not of shape {arr.shape}")
                arr = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
                row_bytes = max(1, arr[0].nbytes if len(arr) else 1)
                step = max(1, chunk_bytes // row_bytes)
                for lo in range(0, max(len(arr), 1), step):
                    part = arr[lo : lo + step]
                    yield pb.UpdateGraphRequest(tensor=tname, rows=pb.Array(dtype=arr.dtype.name, shape=list(part.shape), data=part.tobytes()))

        try:
            rep = self._calls["UpdateGraph"](messages(), timeout=self._timeout, metadata=self._meta)
        except grpc.RpcError as e:
            raise _error(e) from None
        return RemoteGraph(self._channel, self._addr, rep.name, self._token, self._timeout, self._native, self._shm)

    def flush(self) -> None:
        self._unary("Flush", pb.FlushRequest(store=self._store))

    def merge(self) -> Dict[str, int]:
        rep = self._unary("Merge", pb.MergeRequest(store=self._store))
        return {"updates": rep.updates_merged, "pages_written": rep.pages_written}

    # ---- lifetime -----------------------------------------------------------

    def close(self) -> None:
        if self._shm is not None and self._native is not None:
            self._shm.release(self)
        self._channel.close()
        self._native = None  # its connection closes when the last graph drops it

    def __enter__(self) -> "RemoteGraph":
        return self

    def __exit__(self, *exc: object) -> bool:
        self.close()
        return False

    def __repr__(self) -> str:
        return f"<solidgraph.RemoteGraph {self.path}>"


class _Shm:
    """A connection's shared-memory replies: the native channel's region,
    registered with the server at the first array call. `required`: a
    refusal raises (shm=True) instead of leaving replies inline ("auto")."""

    def __init__(self, required: bool, size: int, slot_bytes: int):
        if slot_bytes <= 0 or slot_bytes % 4096 or size < slot_bytes:
            raise InvalidArgumentError(f"shm_bytes={size} must hold at least one slot of {slot_bytes} bytes (a multiple of 4096)")
        self.required = required
        self.slots = size // slot_bytes
        self.slot_bytes = slot_bytes
        self.done = False
        self.region = ""
        self.lock = threading.Lock()

    def _ready(self, g: "RemoteGraph") -> bool:
        # A region the server no longer holds (it restarted, or the channel
        # reconnected) is registered again.
        return self.done and not (self.region and g._native.shm_lost())

    def setup(self, g: "RemoteGraph") -> None:
        if self._ready(g):
            return
        with self.lock:
            if self._ready(g):
                return
            self.region = ""
            try:
                path, size, cookie = g._native.shm_create(self.slots, self.slot_bytes)
                # On the native channel's own connection: the region is that connection's.
                req = pb.RegisterShmRequest(path=path, size=size, cookie=cookie)
                rep = pb.RegisterShmReply.FromString(_native_unary(g, "RegisterShm", req))
            except SolidGraphError:
                g._native.shm_abandon()
                self.done = True
                if self.required:
                    raise
                return
            g._native.shm_attach(rep.region)
            self.region = rep.region
            self.done = True

    def release(self, g: "RemoteGraph") -> None:
        with self.lock:
            if not self.region:
                return
            region, self.region = self.region, ""
        g._native.shm_abandon()
        try:
            _native_unary(g, "ReleaseShm", pb.ReleaseShmRequest(region=region))
        except SolidGraphError:
            pass  # the server drops it with the connection anyway


def _native_unary(g: "RemoteGraph", name: str, req: Any) -> bytes:
    code, details, rep = g._native.unary(f"/solidgraph.v1.Graph/{name}", req.SerializeToString(), g._timeout)
    if code:
        raise _status_error(_CODES.get(code, grpc.StatusCode.UNKNOWN), details)
    return rep


def _loopback(addr: str) -> bool:
    host = addr.rsplit(":", 1)[0].strip("[]")
    return host in ("localhost", "::1") or host.startswith("127.")


def _read(x: Union[None, str, bytes, Path]) -> Optional[bytes]:
    if x is None or isinstance(x, bytes):
        return x
    return Path(x).read_bytes()


def connect(
    addr: str,
    token: Optional[str] = None,
    tls: Union[None, bool, Mapping[str, Any]] = None,
    store: str = "",
    timeout: Optional[float] = None,
    max_message: int = 64 << 20,
    native: bool = True,
    shm: Union[bool, str] = "auto",
    shm_bytes: int = 128 << 20,
    shm_slot_bytes: int = 16 << 20,
) -> RemoteGraph:
    """The store `store` (its directory name; "" for a server's only store)
    served at `addr` ("host:port"). `token`: a bearer token from the
    server's --tokens file. `tls`: None for plaintext, True for TLS checked
    against the system's roots, or a dict with "ca" (the server's CA) and,
    for mutual TLS, "cert" and "key" (PEM paths or bytes). `timeout`: the
    deadline of each call, in seconds. `native`: array replies through the
    extension's channel (plaintext only; False: grpcio for every call).
    `shm`: array replies through shared memory with a server on this host
    (`solidgraph serve --shm`): the client makes a region of `shm_bytes`
    (slots of `shm_slot_bytes`, each lent to one call and reused once no
    array of its reply is left) and registers it at the first array call;
    a reply that does not fit a slot, or a call that finds every slot in
    use, comes inline; a server that no longer holds the region (it
    restarted) answers inline once, and the next call registers a new one. "auto" (the default) uses it on a loopback address
    when the server allows it and stays inline otherwise, with the same
    results either way; True raises if the server refuses; False never."""
    opts = [
        ("grpc.max_receive_message_length", max_message),
        ("grpc.max_send_message_length", max_message),
        # Reads are server-streaming; read on the calling thread, a streamed
        # call costs about what a unary one does (one-vertex Neighbors:
        # 1407 -> 523 us a call on loopback, docs/PERFORMANCE.md).
        (grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1),
    ]
    if tls is None or tls is False:
        channel = grpc.insecure_channel(addr, options=opts)
    else:
        t = {} if tls is True else dict(tls)
        creds = grpc.ssl_channel_credentials(root_certificates=_read(t.get("ca")), private_key=_read(t.get("key")), certificate_chain=_read(t.get("cert")))
        channel = grpc.secure_channel(addr, creds, options=opts)
    fast = None
    if native and (tls is None or tls is False) and _RemoteChannel is not None:
        fast = _RemoteChannel(addr, token, max_message)
    if shm not in (True, False, "auto"):
        raise InvalidArgumentError(f"shm must be True, False or 'auto', not {shm!r}")
    want = shm is True or (shm == "auto" and _loopback(addr))
    if shm is True and fast is None:
        raise InvalidArgumentError("shm=True needs the native channel (a plaintext connection and native=True)")
    region = _Shm(shm is True, shm_bytes, shm_slot_bytes) if want and fast is not None else None
    try:
        return RemoteGraph(channel, addr, store, token, timeout, fast, region)
    except BaseException:
        channel.close()
        raise
