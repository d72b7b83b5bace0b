"""Issue 27, item 6: what a new user trips over between the Python API and
the `solidgraph` command (SOLIDGRAPH_BIN, or target/release/solidgraph):
one default, one accepted edge array, numpy's casting, messages in the
caller's terms, and clear words for paths that are not stores."""

import errno
import json
import os
import subprocess

import numpy as np
import pytest

import solidgraph
from solidgraph import FormatError, InvalidArgumentError, SolidGraphIOError

BIN = os.environ.get("SOLIDGRAPH_BIN", "target/release/solidgraph")


def sg(*args):
    return subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def directed(tmp_path_factory):
    """A directed store without in-edges, weights or labels, and a float32 and an int64 tensor."""
    path = tmp_path_factory.mktemp("inc") / "d.sg"
    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, 50, 300), rng.integers(0, 50, 300)
    x = rng.standard_normal((50, 4)).astype(np.float32)
    solidgraph.import_graph(path, (src, dst), {"x": x, "y": np.arange(50)}, num_nodes=50)
    return path


def test_pagerank_has_one_default(directed, tmp_path):
    und = tmp_path / "u.sg"
    rng = np.random.default_rng(4)
    solidgraph.import_graph(und, (rng.integers(0, 40, 200), rng.integers(0, 40, 200)), undirected=True, num_nodes=40)
    p = sg("run", "pagerank", und)
    assert p.returncode == 0, p.stderr
    cli = np.array([float(line.split()[1]) for line in p.stdout.splitlines()])
    g = solidgraph.open(und)
    np.testing.assert_allclose(cli, g.pagerank(), rtol=1e-12)
    assert not np.allclose(cli, g.pagerank(iterations=10), rtol=1e-12, atol=0)
    assert "20" in sg("run", "--help").stdout.split("--iterations")[1].split("--")[0]


def test_import_accepts_e_by_2_arrays_as_the_cli_reads_npy(tmp_path):
    pairs = np.array([[0, 1], [1, 2], [2, 0], [2, 3]])
    solidgraph.import_graph(tmp_path / "a.sg", pairs)
    solidgraph.import_graph(tmp_path / "b.sg", pairs.T)
    np.save(tmp_path / "e.npy", pairs)
    p = sg("import", tmp_path / "c.sg", "--edges", tmp_path / "e.npy")
    assert p.returncode == 0, p.stderr
    ids = [0, 1, 2, 3]
    want = [list(x) for x in solidgraph.open(tmp_path / "b.sg").neighbors(ids)[:2]]
    for name in ("a.sg", "c.sg"):
        assert [list(x) for x in solidgraph.open(tmp_path / name).neighbors(ids)[:2]] == want
    # A list of pairs is an (E, 2) array too.
    solidgraph.import_graph(tmp_path / "d.sg", pairs.tolist())
    assert solidgraph.open(tmp_path / "d.sg").num_edges == 4
    with pytest.raises(InvalidArgumentError, match=r"\(2, E\) or \(E, 2\)"):
        solidgraph.import_graph(tmp_path / "e.sg", np.zeros((3, 3), np.int64))


def test_update_tensor_casts_by_numpys_same_kind_rule(tmp_path):
    path = tmp_path / "t.sg"
    solidgraph.import_graph(path, ([0, 1], [1, 2]), {"x": np.zeros((3, 2), np.float32), "y": np.zeros(3, np.int64)})
    w = solidgraph.open(path, writable=True)
    w.update_tensor("x", [1], np.array([[0.5, 1.5]]))  # float64
    w.update_tensor("x", [2], [[1, 2]])  # Python ints
    w.update_tensor("y", [0], np.array([7], np.int32))
    np.testing.assert_array_equal(w.tensor("x", [1, 2]), [[0.5, 1.5], [1, 2]])
    assert w.tensor("y", [0]).tolist() in ([7], [[7]])
    with pytest.raises(InvalidArgumentError) as e:
        w.update_tensor("y", [1], np.array([1.5]))
    msg = str(e.value)
    assert "int64" in msg and "float64" in msg and msg.count("float64") == 1, msg
    ids = w.add_vertices(1, {"x": np.ones((1, 2))})
    np.testing.assert_array_equal(w.tensor("x", ids), [[1, 1]])


def test_messages_speak_the_callers_language(directed, tmp_path):
    g = solidgraph.open(directed)
    messages = []
    for call, python_hint in [
        (lambda: g.add_edges([0], [1]), "solidgraph.open(path, writable=True)"),
        (lambda: g.sssp(0), "weights=True"),
        (lambda: g.kcore(), "in_edges=True"),
        (lambda: g.neighbors([0], direction="in"), "in_edges=True"),
        (lambda: g.sample_neighbors([0], [2], weighted=True, direction="out"), "weights=True"),
    ]:
        with pytest.raises(InvalidArgumentError) as e:
            call()
        messages.append(str(e.value))
        assert python_hint in str(e.value), str(e.value)
    with pytest.raises(InvalidArgumentError) as e:
        g.bfs(0, target=10**9)
    messages.append(str(e.value))
    for m in messages:
        assert "--" not in m and "::" not in m and not m.startswith("invalid argument"), m
    # The same failures from the shell name flags.
    for args, flag in [(("run", "sssp", directed, "--source", "0"), "--weights"), (("run", "kcore", directed), "--in-edges"),
                       (("neighbors", directed, "--ids", "0", "--direction", "in"), "--in-edges")]:
        p = sg(*args)
        assert p.returncode == 1 and flag in p.stderr and "=True" not in p.stderr, p.stderr
        assert not p.stderr.startswith("error: invalid argument"), p.stderr


def test_backend_flag_on_store_commands(directed):
    for args in (("info", directed), ("verify", directed), ("neighbors", directed, "--ids", "0"), ("run", "wcc", directed)):
        p = sg(*args, "--backend", "posix")
        assert p.returncode == 0, (args, p.stderr)
    p = sg("info", directed, "--backend", "floppy")
    assert p.returncode == 2 and "uring or posix" in p.stderr


def test_info_is_a_summary_and_json_is_compact(directed):
    p = sg("info", directed)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert not out.lstrip().startswith("{"), out
    for word in ("nodes        50", "directed", "weights      no", "labels       no", "x float32[4]", "y int64[1]", "on disk", "pages of 4 KiB", "order        input"):
        assert word in out, (word, out)
    p = sg("info", directed, "--json")
    assert p.returncode == 0 and len(p.stdout.strip().splitlines()) == 1
    j = json.loads(p.stdout)
    assert j["num_nodes"] == 50 and j["tensors"][0]["dtype"] == "float32"


def test_csv_row_wider_than_its_header_is_an_error(tmp_path):
    csv = tmp_path / "e.csv"
    csv.write_text("src,dst\n0,1\n1,2,3,4,5\n")
    with pytest.raises(InvalidArgumentError, match=r"e\.csv:3: 5 columns, but the header names 2") as e:
        solidgraph.import_graph(tmp_path / "g.sg", csv)
    assert e.value.line == 3 and not (tmp_path / "g.sg").exists()
    p = sg("import", tmp_path / "h.sg", "--edges", csv)
    assert p.returncode == 1 and "e.csv:3: 5 columns, but the header names 2" in p.stderr, p.stderr


def test_negative_ids_get_our_message_from_the_cli(directed):
    p = sg("neighbors", directed, "--ids", "-1")
    assert p.returncode == 2 and "negative vertex id -1" in p.stderr and "-- -1" not in p.stderr, p.stderr
    p = sg("neighbors", directed, "--ids", "1,-2")
    assert p.returncode == 2 and "negative vertex id -2" in p.stderr, p.stderr
    p = sg("run", "bfs", directed, "--source", "-3")
    assert p.returncode == 2 and "negative vertex id -3" in p.stderr, p.stderr


def test_missing_path_and_plain_file(tmp_path):
    nosuch = tmp_path / "nosuch.sg"
    with pytest.raises(SolidGraphIOError) as e:
        solidgraph.open(nosuch)
    assert isinstance(e.value, OSError) and e.value.errno == errno.ENOENT
    assert str(e.value) == f"{nosuch}: no such store"
    plain = tmp_path / "edges.txt"
    plain.write_text("0 1\n")
    with pytest.raises(FormatError) as e:
        solidgraph.open(plain)
    assert str(e.value) == f"{plain}: is a file, not a SolidGraph store" and e.value.path == plain
    assert sg("info", nosuch).stderr.strip() == f"error: {nosuch}: no such store"
    assert sg("info", plain).stderr.strip() == f"error: {plain}: is a file, not a SolidGraph store"


def test_a_reader_sees_the_store_as_of_its_open(directed, tmp_path):
    """Documented, not changed: a read-only Graph opened before a writer (same
    process) sees the writer's updates only once reopened."""
    assert "as of its open" in solidgraph.open.__doc__
    path = tmp_path / "r.sg"
    solidgraph.import_graph(path, ([0, 1], [1, 2]), num_nodes=4)
    reader = solidgraph.open(path)
    w = solidgraph.open(path, writable=True)
    w.add_edges([3], [0])
    assert reader.neighbors([3])[1].tolist() == []
    assert solidgraph.open(path).neighbors([3])[1].tolist() == [0]
