"""Pure Python/numpy references for the store's import and reads."""

from __future__ import annotations

import numpy as np


def adjacency(src, dst, num_nodes, weights=None, labels=None, *, undirected=False, self_loops=False, dedup=False, reverse=False):
    """Per-vertex lists of (neighbor, weight, label) as the store keeps them.

    Order within a list is by neighbor, then weight bits, then label (the
    import's sort order); `dedup` keeps the first of equal neighbors;
    `self_loops` adds (v, 1.0, 0) to vertices without a self-loop;
    `undirected` adds the reverse of every non-loop edge; `reverse` gives the
    in-edge lists.
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    w = np.ones(len(src), np.float32) if weights is None else np.asarray(weights, np.float32)
    lab = np.zeros(len(src), np.int64) if labels is None else np.asarray(labels, np.int64)
    if reverse:
        src, dst = dst, src
    recs = [[] for _ in range(num_nodes)]
    for s, d, x, l in zip(src.tolist(), dst.tolist(), w.tolist(), lab.tolist()):
        recs[s].append((d, x, l))
        if undirected and s != d:
            recs[d].append((s, x, l))
    bits = lambda x: int(np.float32(x).view(np.uint32))  # noqa: E731
    out = []
    for v, r in enumerate(recs):
        if self_loops and not any(d == v for d, _, _ in r):
            r.append((v, 1.0, 0))
        r.sort(key=lambda e: (e[0], bits(e[1]), e[2]))
        if dedup:
            r = [e for i, e in enumerate(r) if i == 0 or r[i - 1][0] != e[0]]
        out.append(r)
    return out


def assert_csr_matches(csr, ids, lists, *, weights=False, labels=False):
    """Checks a (indptr, indices[, weights][, labels]) result against lists."""
    indptr, indices = csr[0], csr[1]
    assert indptr.dtype == np.int64 and indices.dtype == np.int64
    assert len(indptr) == len(ids) + 1 and indptr[0] == 0
    k = 2
    ws = csr[k] if weights else None
    k += weights
    ls = csr[k] if labels else None
    for i, v in enumerate(ids):
        got = slice(indptr[i], indptr[i + 1])
        want = lists[v]
        assert indices[got].tolist() == [d for d, _, _ in want], f"vertex {v}"
        if weights:
            assert ws.dtype == np.float32
            np.testing.assert_array_equal(ws[got], np.array([x for _, x, _ in want], np.float32), err_msg=f"vertex {v}")
        if labels:
            assert ls[got].tolist() == [l for _, _, l in want], f"vertex {v}"
