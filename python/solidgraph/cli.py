"""The `solidgraph` command of the Python package (its console script).

The command is the Rust one that `cargo build` also makes as
`target/release/solidgraph`: the extension runs it (`_native.cli_main`), so
`pip install solidgraph` puts the library and the command on PATH with one
wheel. maturin cannot put a Rust binary in a wheel beside a pyo3 module
(one `bindings` per wheel, PyO3/maturin#368), and a second wheel would
carry a second copy of the engine.
"""

import os
import signal
import sys
import tempfile
from typing import List, Optional


def _metis_args(argv: List[str], tmp: str) -> Optional[List[str]]:
    """`partition IN OUT --parts K --method metis ...`: the assignment from
    METIS (pymetis) over the store's symmetrised lists, handed to the Rust
    partitioner as `--assignment FILE.npy`; None for any other command."""
    if not argv or argv[0] != "partition" or "metis" not in argv:
        return None
    at = argv.index("metis")
    if at == 0 or argv[at - 1] != "--method":
        return None
    rest = argv[:at - 1] + argv[at + 1 :]
    valued = {"--parts", "--memory", "--backend", "--assignment"}
    pos = [a for i, a in enumerate(rest[1:], 1) if not a.startswith("-") and rest[i - 1] not in valued]
    if "--parts" not in rest or len(pos) < 1:
        return None  # let the Rust command print its usage error
    parts = int(rest[rest.index("--parts") + 1])
    import numpy as np

    try:
        import pymetis
    except ImportError:
        raise SystemExit("error: --method metis needs pymetis (pip install pymetis)") from None
    import solidgraph

    g = solidgraph.open(pos[0])
    ids = np.arange(g.num_nodes, dtype=np.int64)
    src, dst = [], []
    dirs = ["out", "in"] if g.directed and g.has_in_edges else ["out"]
    for d in dirs:
        indptr, indices = g.neighbors(ids, d)
        src.append(np.repeat(ids, np.diff(indptr)))
        dst.append(indices)
    s, t = np.concatenate(src), np.concatenate(dst)
    # METIS takes a simple undirected graph: both directions, no loops, no repeats.
    keep = s != t
    n = g.num_nodes
    if n > 3_000_000_000:
        raise SystemExit(f"error: --method metis takes graphs of up to 3e9 vertices (pair keys are int64), not {n}")
    # One int64 key per directed pair (sorted by source, then target).
    key = np.unique(np.r_[s[keep] * n + t[keep], t[keep] * n + s[keep]])
    xadj = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(key // n, minlength=n), out=xadj[1:])
    if parts == 1:
        member = np.zeros(n, dtype=np.int64)
    else:
        _, member = pymetis.part_graph(parts, adjacency=pymetis.CSRAdjacency(xadj, key % n))
    path = os.path.join(tmp, "metis.npy")
    np.save(path, np.asarray(member, dtype=np.int64))
    return rest + ["--assignment", path]


def main() -> int:
    """Runs `solidgraph` with this process's arguments; returns its exit code."""
    from solidgraph._native import cli_main

    # The command runs in Rust without the GIL, where Python's handlers only
    # set a flag nobody reads until it returns: restore the defaults so that
    # Ctrl-C stops it and a closed pipe (`| head`) ends it quietly, as they
    # do a native command.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    with tempfile.TemporaryDirectory(prefix="solidgraph-metis-") as tmp:
        args = _metis_args(sys.argv[1:], tmp) or sys.argv[1:]
        return cli_main(["solidgraph", *args])


if __name__ == "__main__":
    sys.exit(main())
