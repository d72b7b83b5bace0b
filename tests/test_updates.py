"""Updates through the write-ahead log, seen by reads and by later opens."""

import numpy as np
import pytest

import solidgraph


@pytest.fixture()
def store(tmp_path):
    path = tmp_path / "g.sg"
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    solidgraph.import_graph(path, (np.array([0, 1, 2]), np.array([1, 2, 3]), np.array([0.5, 1.5, 2.5], np.float32)),
                            {"x": x}, in_edges=True)
    return path


def lists(g, ids, direction="out"):
    indptr, indices = g.neighbors(ids, direction=direction)
    return [indices[indptr[i]:indptr[i + 1]].tolist() for i in range(len(ids))]


def test_updates_are_visible_and_durable(store):
    g = solidgraph.open(store, writable=True)
    g.add_edges([0, 3], [2, 0], weights=[9.0, 4.0])
    g.update_edge_weights([0], [1], [7.0])
    g.delete_edges([1], [2])
    new = g.add_vertices(2, {"x": np.full((2, 3), 5, np.float32)})
    assert new.tolist() == [4, 5]
    g.add_edges([4], [5], durable=False)
    g.update_tensor("x", [1], np.array([[1, 1, 1]], np.float32), durable=False)
    g.flush()
    g.delete_vertices([2])
    assert lists(g, [0, 1, 2, 3, 4]) == [[1], [], [], [0], [5]]
    assert lists(g, [0], "in") == [[3]]
    np.testing.assert_array_equal(g.edge_weights([0, 3], [1, 0]), [7.0, 4.0])
    np.testing.assert_array_equal(g.tensor("x", [1, 4]), [[1, 1, 1], [5, 5, 5]])
    assert g.num_nodes == 6 and g.num_edges == 3 and g.pending_updates == 7
    del g
    r = solidgraph.open(store)  # a new open replays the log
    assert lists(r, [0, 1, 2, 3, 4]) == [[1], [], [], [0], [5]]
    np.testing.assert_array_equal(r.tensor("x", [1, 5]), [[1, 1, 1], [5, 5, 5]])


def test_bad_updates_are_rejected_whole(store):
    g = solidgraph.open(store, writable=True)
    with pytest.raises(solidgraph.SolidGraphError, match="locked"):
        solidgraph.open(store, writable=True)
    with pytest.raises(solidgraph.SolidGraphError, match="does not exist"):
        g.delete_edges([0, 2], [1, 0])  # the second edge is not there
    with pytest.raises(solidgraph.SolidGraphError, match="vertex 9"):
        g.add_edges([0, 9], [1, 1])
    with pytest.raises(solidgraph.SolidGraphError, match="complex128 values do not cast to float32"):
        g.update_tensor("x", [0], np.zeros((1, 3), np.complex128))
    with pytest.raises(solidgraph.SolidGraphError, match="width"):
        g.update_tensor("x", [0], np.zeros((1, 2), np.float32))
    assert g.pending_updates == 0
    assert lists(g, [0, 1, 2]) == [[1], [2], [3]]
    with pytest.raises(solidgraph.SolidGraphError, match="read-only"):
        solidgraph.open(store).add_edges([0], [3])


def test_merge_snapshot_and_checkpoint(store):
    g = solidgraph.open(store, writable=True, delta_budget=0)
    g.add_edges([0, 3], [2, 0], weights=[9.0, 4.0])
    g.update_tensor("x", [1], np.array([[7, 7, 7]], np.float32))
    with g.snapshot() as s:
        g.delete_edges([0], [1])
        g.add_vertices(1, {"x": np.full((1, 3), 2, np.float32)})
        g.add_edges([4], [0])
        rep = g.merge()
        assert rep["updates"] == 5 and rep["pages_written"] > 0 and g.pending_updates == 0
        # The snapshot still reads the graph from before, merge or not.
        assert s.num_nodes == 4 and lists(s, [0, 3]) == [[1, 2], [0]]
        np.testing.assert_array_equal(s.tensor("x", [1]), [[7, 7, 7]])
        with pytest.raises(solidgraph.SolidGraphError, match="read-only"):
            s.add_edges([0], [1])
    with pytest.raises(solidgraph.SolidGraphError, match="released"):
        s.neighbors([0])
    assert lists(g, [0, 3, 4]) == [[2], [0], [0]]
    assert lists(g, [0], "in") == [[3, 4]]
    np.testing.assert_array_equal(g.tensor("x", [1, 4]), [[7, 7, 7], [2, 2, 2]])
    assert g.verify()["edges"] == 5
    assert g.merge()["updates"] == 0  # nothing pending
    g.close()
    with pytest.raises(solidgraph.SolidGraphError, match="closed"):
        g.num_nodes
    r = solidgraph.open(store)  # the checkpoint: nothing left to replay
    assert r.pending_updates == 0 and lists(r, [0, 3, 4]) == [[2], [0], [0]]


def test_delta_budget_merges_by_itself(store):
    g = solidgraph.open(store, writable=True, delta_budget=1)
    g.add_edges([0], [3])
    assert g.pending_updates == 0 and lists(g, [0]) == [[1, 3]]


def test_cli_apply_merge_verify(store, tmp_path):
    import os
    import subprocess

    bin_ = os.environ.get("SOLIDGRAPH_BIN", "target/release/solidgraph")
    ups = tmp_path / "u.txt"
    ups.write_text("+e 0 3 2.5\n+e 1 3\n-e 2 3\n+v 4\n+e 4 0\n")
    out = subprocess.run([bin_, "apply", str(store), "--updates", str(ups)], capture_output=True, text=True, check=True).stdout
    assert "applied 5 updates" in out
    import json

    rep = json.loads(subprocess.run([bin_, "merge", str(store), "--json"], capture_output=True, text=True, check=True).stdout)
    assert rep["updates"] == 4 and rep["pages_written"] > 0
    out = subprocess.run([bin_, "verify", str(store)], capture_output=True, text=True, check=True).stdout
    assert out.startswith("ok:")
    r = solidgraph.open(store)
    assert lists(r, [0, 1, 2, 4]) == [[1, 3], [2, 3], [], [0]]
    bad = tmp_path / "bad.txt"
    bad.write_text("+e 0 1\n+e 0 zz\n")
    p = subprocess.run([bin_, "apply", str(store), "--updates", str(bad)], capture_output=True, text=True)
    assert p.returncode == 1 and "bad.txt:2" in p.stderr


def test_errors_name_user_ids_on_a_renumbered_store(tmp_path):
    """Update calls on a store renumbered at import (order="degree") are made
    and reported in the caller's ids."""
    path = tmp_path / "deg.sg"
    # Vertex 5 is the hub, so the store renumbers it first.
    src, dst = np.array([5, 5, 5, 5, 1, 2]), np.array([0, 1, 2, 3, 2, 4])
    solidgraph.import_graph(path, (src, dst), undirected=True, order="degree")
    g = solidgraph.open(path, writable=True)
    with pytest.raises(solidgraph.SolidGraphError, match=r"edge 0 -> 4 does not exist"):
        g.delete_edges([0], [4])
    with pytest.raises(solidgraph.SolidGraphError, match=r"vertex 3 listed twice"):
        g.delete_vertices([3, 3])
    g.delete_vertices([4])
    with pytest.raises(solidgraph.SolidGraphError, match=r"vertex 4 was deleted"):
        g.add_edges([4], [0])
    g.delete_edges([5], [0])
    assert sorted(lists(g, [5])[0]) == [1, 2, 3]
