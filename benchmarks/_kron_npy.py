"""Graph500-style Kronecker edges for benchmarks/import_speed.sh.

    _kron_npy.py SCALE OUT.npy          # (2, 16 * 2^SCALE) int64, ids permuted
    _kron_npy.py --u32 SCALE OUT.npy    # the same edges as uint32 (half the bytes)
    _kron_npy.py --text IN.npy OUT.el   # the same edges as "src dst" lines

Initiator A=0.57, B=0.19, C=0.19, seeded (numpy's default_rng(1)); not the
same ids as solidgraph-bench's generator, the same shape.
"""

import sys

import numpy as np


CHUNK = 1 << 24


def generate(scale: int, out: str, dtype=np.int64) -> None:
    if scale > 22:
        return generate_chunked(scale, out, dtype)
    n, m = 1 << scale, 16 << scale
    rng = np.random.default_rng(1)
    src, dst = kron_chunk(scale, m, rng)
    perm = rng.permutation(n)
    np.save(out, np.stack([perm[src], perm[dst]]).astype(dtype))


def kron_chunk(scale: int, m: int, rng) -> tuple:
    a, b, c = 0.57, 0.19, 0.19
    src = np.zeros(m, np.int64)
    dst = np.zeros(m, np.int64)
    for bit in range(scale):
        ii = rng.random(m) > a + b
        jj = rng.random(m) > np.where(ii, c / (1 - a - b), a / (a + b))
        src |= ii.astype(np.int64) << bit
        dst |= jj.astype(np.int64) << bit
    return src, dst


def generate_chunked(scale: int, out: str, dtype=np.int64) -> None:
    """Above scale 22: the same distribution written CHUNK edges at a time
    (one seeded generator per chunk) into a memory-mapped .npy, so memory
    stays near 1 GB whatever the scale."""
    n, m = 1 << scale, 16 << scale
    perm = np.random.default_rng(1).permutation(n)
    arr = np.lib.format.open_memmap(out + ".partial", mode="w+", dtype=dtype, shape=(2, m))
    for k, i in enumerate(range(0, m, CHUNK)):
        src, dst = kron_chunk(scale, min(CHUNK, m - i), np.random.default_rng([1, k]))
        arr[0, i : i + len(src)] = perm[src]
        arr[1, i : i + len(dst)] = perm[dst]
    arr.flush()
    del arr
    import os

    os.replace(out + ".partial", out)


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
    elif sys.argv[1] == "--u32":
        generate(int(sys.argv[2]), sys.argv[3], np.uint32)
    else:
        generate(int(sys.argv[1]), sys.argv[2])
