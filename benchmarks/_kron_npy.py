"""Graph500-style Kronecker edges for benchmarks/import_speed.sh.

    _kron_npy.py SCALE OUT.npy          # (2, 16 * 2^SCALE) int64, ids permuted
    _kron_npy.py --text IN.npy OUT.el   # the same edges as "src dst" lines

Initiator A=0.57, B=0.19, C=0.19, seeded (numpy's default_rng(1)); not the
same ids as solidgraph-bench's generator, the same shape.
"""

import sys

import numpy as np


def generate(scale: int, out: str) -> None:
    n, m = 1 << scale, 16 << scale
    rng = np.random.default_rng(1)
    a, b, c = 0.57, 0.19, 0.19
    src = np.zeros(m, np.int64)
    dst = np.zeros(m, np.int64)
    for bit in range(scale):
        ii = rng.random(m) > a + b
        jj = rng.random(m) > np.where(ii, c / (1 - a - b), a / (a + b))
        src |= ii.astype(np.int64) << bit
        dst |= jj.astype(np.int64) << bit
    perm = rng.permutation(n)
    np.save(out, np.stack([perm[src], perm[dst]]))


def to_text(inp: str, out: str) -> None:
    e = np.load(inp, mmap_mode="r")
    with open(out + ".partial", "w") as f:
        step = 1 << 22
        for i in range(0, e.shape[1], step):
            pairs = np.stack([e[0, i : i + step], e[1, i : i + step]], axis=1)
            np.savetxt(f, pairs, fmt="%d", delimiter=" ")
    import os

    os.replace(out + ".partial", out)


if __name__ == "__main__":
    if sys.argv[1] == "--text":
        to_text(sys.argv[2], sys.argv[3])
    else:
        generate(int(sys.argv[1]), sys.argv[2])
