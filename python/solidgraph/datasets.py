"""Small datasets and generators for tests and examples, with numpy only.

- `load_planetoid(root, "Cora")`: the Planetoid raw pickles (as
  torch_geometric's `read_planetoid_data` reads them) without scipy or torch.
- `rmat_edges(scale, ...)`: a Graph500 R-MAT / Kronecker edge list.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["Planetoid", "load_planetoid", "rmat_edges"]


class _Pickled:
    """Stands in for the scipy.sparse classes inside the Planetoid pickles, so
    reading them needs only numpy: their state is the CSR arrays."""

    def __setstate__(self, state):
        self.__dict__.update(state)

    def dense(self) -> np.ndarray:
        if self.format != "csr":
            raise ValueError(f"expected a CSR matrix in the pickle, found {self.format}")
        out = np.zeros(self._shape, np.float32)
        rows = np.repeat(np.arange(self._shape[0]), np.diff(self.indptr))
        out[rows, self.indices] = self.data
        return out


class _PlanetoidUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if module.startswith("scipy.sparse"):
            return _Pickled
        return super().find_class(module, name)


@dataclass
class Planetoid:
    """A Planetoid citation graph with the standard split (Cora: 140 train,
    500 validation, 1000 test). Edges are as listed in the raw graph dict
    (both directions mostly present, some repeats): import with
    `undirected=True, dedup=True`."""

    x: np.ndarray  # (n, features) float32
    y: np.ndarray  # (n,) int64 class labels
    src: np.ndarray  # int64 edge sources
    dst: np.ndarray  # int64 edge destinations
    train_mask: np.ndarray  # (n,) bool
    val_mask: np.ndarray
    test_mask: np.ndarray

    @property
    def num_nodes(self) -> int:
        return len(self.y)

    @property
    def num_classes(self) -> int:
        return int(self.y.max()) + 1


def load_planetoid(root: str | Path, name: str = "Cora") -> Planetoid:
    """Reads `root/ind.{name}.*` (the raw directory) as torch_geometric's
    `read_planetoid_data` does: test rows are put back in the order of
    `ind.{name}.test.index`; train = the first len(ind.y) nodes, validation
    the next 500, test the rows of the test index. (Citeseer's isolated test
    nodes are not padded in: use Cora or Pubmed.)"""
    root = Path(root)
    prefix = name.lower()

    def load(part):
        with open(root / f"ind.{prefix}.{part}", "rb") as f:
            # Python 2 pickles: numpy's byte strings need latin1.
            return _PlanetoidUnpickler(f, encoding="latin1").load()

    def dense(a):
        return a.dense() if isinstance(a, _Pickled) else np.asarray(a, np.float32)

    x = np.concatenate([dense(load("allx")), dense(load("tx"))])
    y = np.concatenate([np.asarray(load("ally")), np.asarray(load("ty"))]).argmax(axis=1).astype(np.int64)
    test_index = np.loadtxt(root / f"ind.{prefix}.test.index", dtype=np.int64)
    x[test_index] = x[np.sort(test_index)]
    y[test_index] = y[np.sort(test_index)]
    graph = load("graph")
    src = np.array([v for v, ns in graph.items() for _ in ns], np.int64)
    dst = np.array([u for ns in graph.values() for u in ns], np.int64)
    n = len(y)
    num_train = len(np.asarray(load("y")))
    masks = [np.zeros(n, bool) for _ in range(3)]
    masks[0][:num_train] = True
    masks[1][num_train : num_train + 500] = True
    masks[2][test_index] = True
    return Planetoid(x, y, src, dst, *masks)


def rmat_edges(scale: int, edge_factor: int = 16, a: float = 0.57, b: float = 0.19, c: float = 0.19, seed: int = 0, permute: bool = True):
    """Graph500 Kronecker (R-MAT) edges: 2**scale vertices, edge_factor *
    2**scale edges, quadrant probabilities a, b, c (d = 1 - a - b - c), vertex
    ids permuted at random (as Graph500 does, so degree does not follow id).
    Returns (src, dst) int64 arrays; repeats and self-loops are kept."""
    if not (0 < scale < 40):
        raise ValueError(f"scale {scale} must be in 1..39")
    rng = np.random.default_rng(seed)
    m = edge_factor << scale
    src = np.zeros(m, np.int64)
    dst = np.zeros(m, np.int64)
    ab, c_norm, a_norm = a + b, c / (1 - (a + b)), a / (a + b)
    # One bit of each endpoint per level, in chunks to bound the temporaries.
    chunk = 1 << 22
    for lo in range(0, m, chunk):
        hi = min(m, lo + chunk)
        s = np.zeros(hi - lo, np.int64)
        d = np.zeros(hi - lo, np.int64)
        for bit in range(scale):
            ii = rng.random(hi - lo) > ab
            jj = rng.random(hi - lo) > np.where(ii, c_norm, a_norm)
            s |= ii.astype(np.int64) << bit
            d |= jj.astype(np.int64) << bit
        src[lo:hi], dst[lo:hi] = s, d
    if permute:
        perm = rng.permutation(1 << scale)
        src, dst = perm[src], perm[dst]
    return src, dst
