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
    with pytest.raises(solidgraph.SolidGraphError, match="float32"):
        g.update_tensor("x", [0], np.zeros((1, 3), np.float64))
    with pytest.raises(solidgraph.SolidGraphError, match="width"):
        g.update_tensor("x", [0], np.zeros((1, 2), np.float32))
    assert g.pending_updates == 0
    assert lists(g, [0, 1, 2]) == [[1], [2], [3]]
    with pytest.raises(solidgraph.SolidGraphError, match="read-only"):
        solidgraph.open(store).add_edges([0], [3])
