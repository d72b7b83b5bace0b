"""The exception classes: each kind of failure raised for real, with its
class, its attributes and the engine's message."""

import errno
import os
import pickle
import re

import numpy as np
import pytest

import solidgraph
from solidgraph import (
    CorruptionError,
    FormatError,
    InvalidArgumentError,
    LockedError,
    NotFoundError,
    OverBudgetError,
    SolidGraphError,
    SolidGraphIOError,
    StaleError,
)

KINDS = [CorruptionError, FormatError, InvalidArgumentError, LockedError, NotFoundError, OverBudgetError, SolidGraphIOError, StaleError]


def random_edges(n, e, seed=1):
    rng = np.random.default_rng(seed)
    return rng.integers(0, n, e), rng.integers(0, n, e)


@pytest.fixture()
def store(tmp_path):
    path = tmp_path / "g"
    solidgraph.import_graph(path, ([0, 1, 2], [1, 2, 3]), {"x": np.zeros((4, 2), np.float32)})
    return path


def test_hierarchy():
    assert issubclass(SolidGraphError, Exception)
    for cls in KINDS:
        assert issubclass(cls, SolidGraphError), cls
        # Exported from the package and the native module, named for pickling.
        assert cls.__name__ in solidgraph.__all__
        assert getattr(solidgraph._native, cls.__name__) is cls
        assert cls.__module__ == "solidgraph"
    assert issubclass(InvalidArgumentError, ValueError)
    assert issubclass(SolidGraphIOError, OSError)
    assert issubclass(OverBudgetError, MemoryError)
    assert issubclass(NotFoundError, LookupError) and not issubclass(NotFoundError, KeyError)
    # Each kind is its own: no class catches another's errors.
    for a in KINDS:
        for b in KINDS:
            assert a is b or not issubclass(a, b), (a, b)


def test_algorithm_past_the_state_budget_raises_over_budget_before_allocating(store):
    g = solidgraph.open(store)
    default = solidgraph.state_budget()
    assert default > 1 << 20
    solidgraph.set_state_budget(16)
    try:
        assert solidgraph.state_budget() == 16
        with pytest.raises(OverBudgetError, match="BFS") as e:
            g.bfs(0)
        assert e.value.algorithm == "BFS" and e.value.budget == 16 and e.value.needed > 16
        with pytest.raises(OverBudgetError) as e:
            g.pagerank()
        assert e.value.algorithm == "PageRank"
    finally:
        solidgraph.set_state_budget(None)
    assert solidgraph.state_budget() == default
    assert list(g.bfs(0)) == [0, 1, 2, 3]
    with pytest.raises(InvalidArgumentError, match="at least 1 byte"):
        solidgraph.set_state_budget(0)


def test_corrupt_page_raises_corruption_error_naming_the_page(tmp_path):
    n = 2000
    src, dst = random_edges(n, 20000, seed=17)
    solidgraph.import_graph(tmp_path / "g", (src, dst), page_size=8192)
    with open(tmp_path / "g" / "sg.0", "r+b") as f:  # page 5 is an adjacency page
        f.seek(5 * 8192 + 4000)
        b = f.read(1)
        f.seek(5 * 8192 + 4000)
        f.write(bytes([b[0] ^ 0xFF]))
    g = solidgraph.open(tmp_path / "g", cache_bytes=0)
    with pytest.raises(CorruptionError, match=r"^page 5: ") as e:
        g.verify()
    assert e.value.page == 5 and e.value.path is None
    with pytest.raises(CorruptionError, match=r"^page 5: ") as e:
        g.neighbors(np.arange(n))
    assert e.value.page == 5


def test_truncated_member_is_corruption_naming_the_file(store):
    member = store / "sg.0"
    os.truncate(member, member.stat().st_size - 4096)
    with pytest.raises(CorruptionError, match=re.escape(f"{member}: size")) as e:
        solidgraph.open(store)
    assert e.value.path == member and e.value.page is None


def test_reader_behind_a_merge_gets_stale_error(tmp_path):
    n = 2000
    solidgraph.import_graph(tmp_path / "g", random_edges(n, 20000), num_nodes=n)
    reader = solidgraph.open(tmp_path / "g", cache_bytes=0)
    writer = solidgraph.open(tmp_path / "g", writable=True, delta_budget=0)
    # The second merge reuses pages the first one freed, which the reader
    # (opened before both) still expects to hold its lists.
    for k in range(2):
        writer.add_edges(np.arange(n), (np.arange(n) + 1 + k) % n)
        writer.merge()
    with pytest.raises(StaleError, match="reopen it") as e:
        reader.neighbors(np.arange(n))
    assert not isinstance(e.value, CorruptionError)
    assert e.value.epoch == 1 and e.value.found > e.value.epoch and e.value.page is not None
    assert len(solidgraph.open(tmp_path / "g").neighbors(np.arange(n))[1]) == writer.num_edges


def test_second_writer_gets_locked_error(store):
    w = solidgraph.open(store, writable=True)
    with pytest.raises(LockedError, match="locked by another writer") as e:
        solidgraph.open(store, writable=True)
    assert e.value.path == store
    w.close()
    solidgraph.open(store, writable=True)  # the lock went with the writer


def test_bad_arguments_are_invalid_argument_and_value_errors(store):
    g = solidgraph.open(store)
    cases = [
        (lambda: g.neighbors([0, -1]), "ids must be non-negative, not -1"),  # checked in the bindings
        (lambda: g.neighbors([0, 9]), r"vertex 9 is out of range \(the graph has 4 vertices\)"),  # the store
        (lambda: g.bfs(0, target=99), "target vertex 99 is not in the graph"),  # the engine
        (lambda: g.neighbors([0], "in"), "no in edges"),  # what the store was imported with
        (lambda: g.sssp(0), "needs edge weights"),
        (lambda: g.cdlp(iterations=2**31), "iterations 2147483648 is more than the limit of 10000"),  # hours of rounds
        (lambda: g.pagerank(iterations=10_001), "more than the limit"),
        (lambda: g.add_edges([0], [1]), "read-only"),  # how it was opened
        (lambda: g.degree([0], "sideways"), 'direction must be "out" or "in"'),
        (lambda: solidgraph.open(store, row_admission="never"), "row_admission must be"),
        (lambda: solidgraph.open(store, cache_bytes=2**60), "cache_bytes 1152921504606846976 is more than this machine's memory"),
        (lambda: solidgraph.open(store, row_cache_bytes=2**60), "row_cache_bytes .* is more than this machine's memory"),
        (lambda: solidgraph.import_graph(store.parent / "h", ([0], [1]), order="random"), "order"),
        (lambda: solidgraph.import_graph(store.parent / "h", ([0], [1]), page_size=1000), "page size 1000"),
    ]
    for call, message in cases:
        with pytest.raises(InvalidArgumentError, match=message) as e:
            call()
        assert isinstance(e.value, ValueError)
    g.close()
    with pytest.raises(ValueError, match="closed"):
        g.num_nodes


def test_worker_error_keeps_its_class(store):
    loader = solidgraph.open(store).sample_loader([[0], [7]], [2], direction="out", seed=0)
    next(loader)
    with pytest.raises(InvalidArgumentError, match="seed 7 is not in the graph"):
        next(loader)


def test_malformed_input_names_path_and_line(tmp_path):
    p = tmp_path / "edges.txt"
    p.write_text("# comment\n0 1\n1 two\n")
    with pytest.raises(InvalidArgumentError, match=re.escape(f"{p}:3: ")) as e:
        solidgraph.import_graph(tmp_path / "g", p)
    assert e.value.path == p and e.value.line == 3


def test_missing_and_existing_files_are_os_errors(tmp_path, store):
    missing = tmp_path / "missing.txt"
    with pytest.raises(SolidGraphIOError) as e:
        solidgraph.import_graph(tmp_path / "h", missing)
    assert isinstance(e.value, OSError) and e.value.errno == errno.ENOENT
    assert e.value.path == missing and e.value.filename is None
    assert str(e.value).startswith(f"{missing}: ")  # the engine's message, not OSError's format
    nowhere = tmp_path / "nowhere"
    with pytest.raises(SolidGraphIOError) as e:
        solidgraph.open(nowhere)
    assert isinstance(e.value, OSError) and e.value.errno == errno.ENOENT and e.value.path == nowhere
    with pytest.raises(OSError, match="already exists") as e:
        solidgraph.import_graph(store, ([0], [1]))
    assert isinstance(e.value, SolidGraphIOError) and e.value.errno == errno.EEXIST and e.value.path == store


def test_missing_tensor_is_not_found_and_a_lookup_error(store):
    g = solidgraph.open(store)
    with pytest.raises(NotFoundError) as e:
        g.tensor("z", [0])
    assert str(e.value) == 'no tensor named "z" (the store has: x)'  # not quoted, as a KeyError would be
    assert e.value.name == "z" and isinstance(e.value, LookupError)
    with pytest.raises(LookupError, match='no tensor named "z"'):
        g.sample_neighbors([0], [1], direction="out", tensors=["z"])


def test_missing_tensor_in_the_torch_loader(store):
    pytest.importorskip("torch")
    from solidgraph.torch import NeighborLoader

    with pytest.raises(NotFoundError, match="no tensor named 'z'") as e:
        NeighborLoader(solidgraph.open(store), None, [2], features=["z"])
    assert e.value.name == "z"


def test_not_a_store_and_newer_format_are_format_errors(tmp_path, store):
    with pytest.raises(FormatError, match="not a SolidGraph store") as e:
        solidgraph.open(tmp_path)
    assert e.value.path == tmp_path and e.value.found is None
    # The format version follows the superblock's magic.
    member = store / "sg.0"
    data = bytearray(member.read_bytes())
    at = data.index(b"SOLIDGRF") + 8
    data[at:at + 4] = (999).to_bytes(4, "little")
    member.write_bytes(data)
    with pytest.raises(FormatError, match="store format version 999 is newer than this build understands") as e:
        solidgraph.open(store)
    assert e.value.path == store and e.value.found == 999 and 0 < e.value.supported < 999


def test_errors_pickle_with_their_attributes(store):
    try:
        solidgraph.open(store).tensor("z", [0])
    except NotFoundError as e:
        back, message = pickle.loads(pickle.dumps(e)), str(e)
    assert type(back) is NotFoundError and back.name == "z" and str(back) == message
