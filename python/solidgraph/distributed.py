"""A graph partitioned over shard servers: `solidgraph.distributed.connect`.

    $ solidgraph partition graph.sg --parts 4 --method stream shards/
    $ solidgraph serve shards/shard-0/adj-* shards/shard-0/rows --listen ...   # one per shard
    >>> g = solidgraph.distributed.connect(["h0:50051", ...], book="shards/book.sgb")
    >>> loader = solidgraph.torch.NeighborLoader(g, train_ids, [25, 10], batch_size=1024)

The graph has the local `solidgraph.Graph`'s sampling and gather methods
(`sample_neighbors`, `sample_loader`, `tensor`, `neighbors`, `degree`), so
`solidgraph.torch.NeighborLoader` and the PyG backend run over it
unchanged. Each hop groups the frontier by owner (the partition book) and
sends one `ShardSample` request per shard, all shards in flight at once;
each shard draws with the single-store sampler's generator of (seed, hop,
vertex) over the source's lists, and the client merges the hop as
`sample_subgraphs` does (new nodes numbered in order of first appearance,
frontier vertex by frontier vertex), so for the same seeds and seed the
subgraph equals the single store's bit for bit. Feature rows come from
their owners the same way.

Faults: every call has a deadline (`timeout`); a shard that is down, late,
or serving a shard of another book raises an error naming the shard and
its address.
"""

from __future__ import annotations

import concurrent.futures
import threading
import zlib
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import grpc
import numpy as np

from solidgraph._native import CorruptionError, InvalidArgumentError, NotFoundError, SolidGraphError, batch_seed
from solidgraph._proto import solidgraph_pb2 as pb
from solidgraph.client import RemoteGraph, RemoteSample, _array, _assemble, _error, _Loader, _names, _seed
from solidgraph.client import connect as _connect

__all__ = ["Book", "DistGraph", "ShardError", "connect", "read_book"]

_MAGIC = b"SGBOOK\0\0"
_HEADER = 64
_VERSION = 1
_VERTEX = "_sg_vertex"


class ShardError(SolidGraphError):
    """A shard that cannot take part: down, past its deadline, or serving
    another partition book. `shard` is its index, `addr` its address,
    `code` the gRPC status when there is one."""

    shard: int
    addr: str
    code: Optional[grpc.StatusCode]


class Book:
    """A partition book (`solidgraph partition`'s book.sgb): `shard[v]` is
    vertex v's shard, `local[v]` its rank among that shard's vertices."""

    def __init__(self, parts: int, source_edges: int, source_id: int, book_id: int, shard: np.ndarray):
        self.parts = parts
        self.source_edges = source_edges
        self.source_id = source_id
        self.id = f"{book_id:016x}"
        self.shard = shard
        # Rank within the shard: a stable sort by shard keeps id order.
        order = np.argsort(shard, kind="stable")
        first = np.zeros(parts + 1, dtype=np.int64)
        np.cumsum(np.bincount(shard, minlength=parts), out=first[1:])
        self.local = np.empty(len(shard), dtype=np.int64)
        self.local[order] = np.arange(len(shard), dtype=np.int64) - first[shard[order]]

    @property
    def num_nodes(self) -> int:
        return len(self.shard)

    def sizes(self) -> np.ndarray:
        return np.bincount(self.shard, minlength=self.parts)

    def __repr__(self) -> str:
        return f"<solidgraph.distributed.Book {self.id}: {self.num_nodes} vertices in {self.parts} shards>"


def read_book(path: Union[str, Path]) -> Book:
    """Reads and checks a partition book (CRC-32 over the whole file)."""
    path = Path(path)
    data = path.read_bytes()
    if len(data) < _HEADER or data[:8] != _MAGIC:
        raise CorruptionError(f"{path}: not a partition book (bad magic)")
    head = np.frombuffer(data[:_HEADER], dtype="<u8")
    version, parts = (int(x) for x in np.frombuffer(data[8:16], dtype="<u4"))
    if version != _VERSION:
        raise InvalidArgumentError(f"{path}: partition book version {version} (this build reads {_VERSION})")
    n, source_edges, source_id, book_id = (int(x) for x in head[2:6])
    crc = int(np.frombuffer(data[48:52], dtype="<u4")[0])
    zeroed = data[:48] + b"\0\0\0\0" + data[52:_HEADER]
    if zlib.crc32(data[_HEADER:], zlib.crc32(zeroed)) != crc:
        raise CorruptionError(f"{path}: checksum mismatch: the partition book is damaged")
    if len(data) - _HEADER != 4 * n or not 1 <= parts <= 4096:
        raise CorruptionError(f"{path}: {len(data) - _HEADER} bytes of assignment for {n} vertices in {parts} parts")
    shard = np.frombuffer(data, dtype="<u4", offset=_HEADER, count=n).astype(np.int64)
    if n and int(shard.max()) >= parts:
        raise CorruptionError(f"{path}: a vertex is assigned to shard {int(shard.max())} of {parts}")
    return Book(parts, source_edges, source_id, book_id, shard)


class _Shard:
    """One shard server: its rows store (features, global ids) and the
    shard RPCs on the same channel."""

    def __init__(self, addr: str, **kw: Any):
        self.addr = addr
        self.remote: RemoteGraph = _connect(addr, store="rows", **kw)
        ch, meta = self.remote._channel, self.remote._meta
        ser = lambda m: m.SerializeToString()  # noqa: E731
        info = ch.unary_unary("/solidgraph.v1.Graph/ShardInfo", request_serializer=ser, response_deserializer=pb.ShardInfoReply.FromString)
        self._sample = ch.unary_stream("/solidgraph.v1.Graph/ShardSample", request_serializer=ser, response_deserializer=pb.Arrays.FromString)
        self._meta, self._timeout = meta, self.remote._timeout
        self._streams = {
            name: ch.unary_stream(f"/solidgraph.v1.Graph/{name}", request_serializer=ser, response_deserializer=pb.Arrays.FromString)
            for name in ("Tensor", "Neighbors", "Degree")
        }
        # Protobuf bytes sent and received (HTTP/2 framing aside).
        self.sent = self.received = 0
        self._lock = threading.Lock()
        try:
            self.info = info(pb.ShardInfoRequest(), timeout=self._timeout, metadata=meta)
        except grpc.RpcError as e:
            raise _error(e) from None

    def _call(self, call: Any, req: Any) -> Dict[str, np.ndarray]:
        got = 0

        def counted(msgs):
            nonlocal got
            for m in msgs:
                got += m.ByteSize()
                yield m

        try:
            out = _assemble(counted(call(req, timeout=self._timeout, metadata=self._meta)))
        except grpc.RpcError as e:
            raise _error(e) from None
        with self._lock:
            self.sent += req.ByteSize()
            self.received += got
        return out

    def sample(self, req: pb.ShardSampleRequest) -> Dict[str, np.ndarray]:
        return self._call(self._sample, req)

    def tensor(self, name: str, local: np.ndarray) -> np.ndarray:
        return self._call(self._streams["Tensor"], pb.TensorRequest(store="rows", name=name, ids=_array(local, "int64", "ids")))["rows"]

    def adjacency(self, direction: str) -> str:
        """The store holding `direction`'s lists (in-lists are stored as
        the out-lists of adj-in; an undirected graph's serve both)."""
        if direction == "out" or (direction == "in" and self.info.undirected):
            return "adj-out"
        if direction == "in" and "in" in self.info.directions:
            return "adj-in"
        if direction == "in":
            raise InvalidArgumentError('direction "in" needs in-edges: the partitioned store has none (import it with in_edges=True)')
        raise InvalidArgumentError(f'direction must be "out" or "in", not {direction!r}')

    def neighbors(self, ids: np.ndarray, direction: str, with_weights: bool, with_labels: bool) -> Dict[str, np.ndarray]:
        req = pb.NeighborsRequest(store=self.adjacency(direction), ids=_array(ids, "int64", "ids"), direction="out", with_weights=with_weights, with_labels=with_labels)
        return self._call(self._streams["Neighbors"], req)

    def degree(self, ids: np.ndarray, direction: str) -> np.ndarray:
        req = pb.DegreeRequest(store=self.adjacency(direction), ids=_array(ids, "int64", "ids"), direction="out")
        return self._call(self._streams["Degree"], req)["degree"]


def _scatter(n: int, parts: list, dtypes: list) -> Tuple[np.ndarray, np.ndarray, List[np.ndarray]]:
    """Per-vertex runs from the shards back in request order: `parts` holds
    (positions, count per position, [arrays of the runs, position after
    position]); returns the counts, their offsets (n + 1) and the arrays."""
    count = np.zeros(n, dtype=np.int64)
    for at, c, _ in parts:
        count[at] = c
    start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(count, out=start[1:])
    out = [np.empty(int(start[-1]), dtype=d) for d in dtypes]
    for at, c, arrays in parts:
        c = np.asarray(c, dtype=np.int64)
        first = np.zeros(len(c), dtype=np.int64)
        np.cumsum(c[:-1], out=first[1:])
        pos = np.repeat(start[at] - first, c) + np.arange(int(c.sum()), dtype=np.int64)
        for o, a in zip(out, arrays):
            o[pos] = a
    return count, start, out


class DistGraph:
    """A graph over the shard servers of one partition book, with the
    sampling and gather methods of `solidgraph.Graph`."""

    def __init__(self, shards: List[_Shard], book: Book):
        self._shards = shards
        self.book = book
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(2, 2 * len(shards)))
        info = shards[0].remote._info()
        self._tensors = {t.name: (t.dtype, t.dim) for t in info.tensors if not t.name.startswith("_sg_")}
        self._directed = not shards[0].info.undirected
        self._in_edges = "in" in shards[0].info.directions or not self._directed

    # ---- what the graph holds ----------------------------------------------

    @property
    def num_nodes(self) -> int:
        return self.book.num_nodes

    @property
    def num_edges(self) -> int:
        return self.book.source_edges

    @property
    def directed(self) -> bool:
        return self._directed

    @property
    def has_in_edges(self) -> bool:
        return self._in_edges

    @property
    def tensors(self) -> Dict[str, Tuple[str, int]]:
        return dict(self._tensors)

    @property
    def num_shards(self) -> int:
        return len(self._shards)

    def wire_bytes(self) -> Tuple[int, int]:
        """Protobuf bytes sent to and received from the shards so far."""
        return sum(s.sent for s in self._shards), sum(s.received for s in self._shards)

    @property
    def path(self) -> str:
        return "sg-shards://" + ",".join(s.addr for s in self._shards)

    # ---- fan-out -----------------------------------------------------------

    def _on_shards(self, owner: np.ndarray, call) -> Dict[int, Any]:
        """`call(k, positions)` for every shard owning some of `owner`'s
        positions, all in flight at once; errors name the shard."""
        order = np.argsort(owner, kind="stable")
        bounds = np.searchsorted(owner[order], np.arange(len(self._shards) + 1))
        futs = {}
        for k in range(len(self._shards)):
            at = order[bounds[k] : bounds[k + 1]]
            if len(at):
                futs[k] = self._pool.submit(call, k, at)
        out = {}
        for k, f in futs.items():
            try:
                out[k] = f.result()
            except SolidGraphError as e:
                for g in futs.values():
                    g.cancel()
                raise self._shard_error(k, e) from None
        return out

    def _shard_error(self, k: int, e: SolidGraphError) -> SolidGraphError:
        s = self._shards[k]
        code = getattr(e, "code", None)
        kind = ShardError if code in (None, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.FAILED_PRECONDITION) else type(e)
        # Any error kind carries the shard (not only ShardError's).
        err: Any = kind(f"shard {k} at {s.addr}: {e}")
        err.shard, err.addr, err.code = k, s.addr, code
        return err

    def _ids(self, ids: Any, what: str) -> np.ndarray:
        a = np.asarray(ids)
        if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
            raise InvalidArgumentError(f"{what} must be a 1-D array of integer vertex ids")
        a = a.astype(np.int64, copy=False)
        if a.size and (a.min() < 0 or a.max() >= self.num_nodes):
            bad = int(a[(a < 0) | (a >= self.num_nodes)][0])
            raise InvalidArgumentError(f"{what}: vertex {bad} is not in the graph ({self.num_nodes} vertices)")
        return a

    # ---- reads -------------------------------------------------------------

    def tensor(self, name: str, ids: Any) -> np.ndarray:
        if name not in self._tensors:
            raise NotFoundError(f"no tensor named {name!r} (the graph has: {', '.join(self._tensors)})")
        ids = self._ids(ids, "ids")
        dtype, dim = self._tensors[name]
        out = np.empty((len(ids), dim) if dim > 1 else (len(ids),), dtype=np.dtype(dtype))
        owner = self.book.shard[ids]
        local = self.book.local[ids]
        got = self._on_shards(owner, lambda k, at: (at, self._shards[k].tensor(name, local[at])))
        for at, rows in got.values():
            out[at] = rows.reshape(out[at].shape)
        return out

    def neighbors(self, ids: Any, direction: str = "out", with_weights: bool = False, with_labels: bool = False) -> tuple:
        """(indptr, indices[, weights][, labels]) of `ids`' lists, read
        from their owners, as the local Graph gives them."""
        ids = self._ids(ids, "ids")
        self._shards[0].adjacency(direction)  # a bad direction fails before any call
        owner = self.book.shard[ids]
        got = self._on_shards(owner, lambda k, at: (at, self._shards[k].neighbors(ids[at], direction, with_weights, with_labels)))
        parts = [(at, np.diff(a["indptr"]), a) for at, a in got.values()]
        names = ["indices"] + (["weights"] if with_weights else []) + (["labels"] if with_labels else [])
        dtypes = {"indices": np.int64, "weights": np.float32, "labels": np.uint32}
        count, start, arrays = _scatter(len(ids), [(at, c, [a[n] for n in names]) for at, c, a in parts], [dtypes[n] for n in names])
        return (start, *arrays)

    def degree(self, ids: Any, direction: str = "out") -> np.ndarray:
        ids = self._ids(ids, "ids")
        self._shards[0].adjacency(direction)
        out = np.zeros(len(ids), dtype=np.int64)
        for at, d in self._on_shards(self.book.shard[ids], lambda k, at: (at, self._shards[k].degree(ids[at], direction))).values():
            out[at] = d
        return out

    def _draw(self, frontier: np.ndarray, seed: int, hop: int, fanout: int, replace: bool, weighted: bool, direction: str):
        """One hop's draws for `frontier`: per vertex its count, then the
        neighbors and edge ids, vertex after vertex in frontier order."""
        owner = self.book.shard[frontier]
        local = self.book.local[frontier]

        def call(k: int, at: np.ndarray):
            req = pb.ShardSampleRequest(
                book_id=self.book.id,
                ids=_array(frontier[at], "int64", "ids"),
                local=_array(local[at], "int64", "local"),
                seed=seed,
                hop=hop,
                fanout=int(fanout),
                replace=replace,
                weighted=weighted,
                direction=direction,
            )
            a = self._shards[k].sample(req)
            return at, a["count"], a["ids"], a["edge"]

        got = self._on_shards(owner, call)
        count, _, (nbr, edge) = _scatter(len(frontier), [(at, c, [ids, e]) for at, c, ids, e in got.values()], [np.int64, np.int64])
        return count, nbr, edge

    def _sample(
        self, seeds: Any, fanouts: Sequence[int], replace: bool, weighted: bool, direction: str, seed: int, tensors: list, max_fanout: int, batch: Optional[int] = None
    ) -> RemoteSample:
        seeds = self._ids(seeds, "seeds")
        if not len(seeds):
            raise InvalidArgumentError("empty seed list")
        if not fanouts:
            raise InvalidArgumentError("fanouts must name at least one hop")
        for k in fanouts:
            if (k <= 0 and k != -1) or k > max_fanout:
                raise InvalidArgumentError(f"fanout {k} must be -1 (all) or in 1..={max_fanout}")
        for t in tensors:
            if t not in self._tensors:
                raise NotFoundError(f"no tensor named {t!r} (the graph has: {', '.join(self._tensors)})")
        if batch is not None:
            seed = batch_seed(seed, batch)
        # Seeds kept once, first occurrence first (as the sampler does).
        _, first = np.unique(seeds, return_index=True)
        node = seeds[np.sort(first)]
        # The sampled ids sorted, and beside them their local ids.
        known = np.sort(node)
        known_local = np.argsort(node, kind="stable").astype(np.int64)
        nodes, rows, cols, edges = node, [], [], []
        nsn, nse = [len(node)], []
        start, end = 0, len(node)
        for hop, k in enumerate(fanouts):
            count, nbr, edge = self._draw(nodes[start:end], seed, hop, int(k), replace, weighted, direction)
            # New nodes take local ids in order of first appearance, frontier
            # vertex by frontier vertex, as `sample_subgraphs` numbers them.
            uniq, first, inverse = np.unique(nbr, return_index=True, return_inverse=True)
            at = np.minimum(np.searchsorted(known, uniq), len(known) - 1)
            have = known[at] == uniq
            lid = np.empty(len(uniq), dtype=np.int64)
            lid[have] = known_local[at[have]]
            new = np.flatnonzero(~have)
            new = new[np.argsort(first[new], kind="stable")]
            lid[new] = end + np.arange(len(new), dtype=np.int64)
            nodes = np.concatenate([nodes, uniq[new]])
            rows.append(lid[inverse.reshape(-1)])
            cols.append(np.repeat(np.arange(start, end, dtype=np.int64), count))
            edges.append(edge)
            nsn.append(len(new))
            nse.append(len(nbr))
            merged = np.concatenate([known, uniq[new]])
            order = np.argsort(merged, kind="stable")
            known, known_local = merged[order], np.concatenate([known_local, lid[new]])[order]
            start, end = end, len(nodes)
        node = nodes
        a = {
            "node": node,
            "row": np.concatenate(rows) if rows else np.empty(0, np.int64),
            "col": np.concatenate(cols) if cols else np.empty(0, np.int64),
            "edge": np.concatenate(edges) if edges else np.empty(0, np.int64),
            "num_sampled_nodes": np.asarray(nsn, dtype=np.int64),
            "num_sampled_edges": np.asarray(nse, dtype=np.int64),
        }
        for t in tensors:
            a[f"tensor/{t}"] = self.tensor(t, node)
        return RemoteSample(a, tensors)

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
        buffer_bytes: Optional[int] = None,
    ) -> _Loader:
        """The local sample_loader's batches (batch i drawn with
        `batch_seed(seed, i)`), `prefetch` of them in flight. `lookahead`
        and `buffer_bytes` tune the local engine's loader and are ignored."""
        del lookahead, buffer_bytes
        req = dict(fanouts=list(fanouts), replace=replace, weighted=weighted, direction=direction, seed=_seed(seed), tensors=_names(tensors), max_fanout=max_fanout)
        return _Loader(self, [np.asarray(b) for b in batches], req, workers, prefetch)  # type: ignore[arg-type]

    # ---- lifetime ----------------------------------------------------------

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        for s in self._shards:
            s.remote.close()

    def __enter__(self) -> "DistGraph":
        return self

    def __exit__(self, *exc: object) -> bool:
        self.close()
        return False

    def __repr__(self) -> str:
        return f"<solidgraph.distributed.DistGraph {self.num_nodes} vertices over {len(self._shards)} shards, book {self.book.id}>"


def connect(addrs: Sequence[str], book: Union[str, Path, Book], token: Optional[str] = None, tls: Any = None, timeout: Optional[float] = 30.0) -> DistGraph:
    """The graph partitioned by `book` (a Book or the path of book.sgb),
    served by one shard server per part at `addrs` (any order). Each shard
    says which shard of which book it serves; a missing shard, a shard of
    another book, or one that does not answer within `timeout` seconds is a
    `ShardError` naming it."""
    if not isinstance(book, Book):
        book = read_book(book)
    shards: List[Optional[_Shard]] = [None] * book.parts
    opened: List[_Shard] = []

    def fail(msg: str, addr: str, k: int = -1, code: Any = None) -> ShardError:
        for s in opened:
            s.remote.close()
        e = ShardError(msg)
        e.shard, e.addr, e.code = k, addr, code
        return e

    for addr in addrs:
        try:
            s = _Shard(addr, token=token, tls=tls, timeout=timeout)
        except SolidGraphError as e:
            raise fail(f"shard server at {addr}: {e}", addr, code=getattr(e, "code", None)) from None
        opened.append(s)
        k = s.info.shard
        if s.info.book_id != book.id or s.info.parts != book.parts:
            raise fail(f"shard server at {addr} serves shard {k} of book {s.info.book_id} ({s.info.parts} parts), not of book {book.id} ({book.parts} parts)", addr, k)
        if shards[k] is not None:
            raise fail(f"shard {k} is served by both {shards[k].addr} and {addr}", addr, k)
        shards[k] = s
    missing = [k for k, s in enumerate(shards) if s is None]
    if missing:
        raise fail(f"no server given for shard(s) {missing} of book {book.id} ({book.parts} parts)", "", missing[0])
    return DistGraph(shards, book)  # type: ignore[arg-type]
