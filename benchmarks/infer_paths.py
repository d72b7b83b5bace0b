"""Our request paths against each other (issue 29's profile): the same
full-neighbourhood requests batch by batch (`path="batched"`), streamed
(`path="stream"`: the reach read once, rows projected by the first layer as
they arrive) and as the cost model chooses (`path="auto"`),
alternating per request, in the same memory cgroup and with the page cache
dropped before each, as `benchmarks/inference.py` runs its service (it
reuses that service and the data it made; PyG is not run here).

    .venv/bin/python benchmarks/infer_paths.py --dir /work/bench/infer-req-40m --sizes 64,1024 \\
        --models gcn --requests 2 --mem-limit 1G --batch-size 16 --prefetch 1 --paths batched,stream,auto

Per request: seconds, pages read, I/Os and MiB read (the store's counters),
the path that ran and why, and for a streamed request its split (expand the
reach: list reads; read and project the rows, with the degree reads beside
them; run the model), wall and CPU, and the rows step's thread-seconds.
"""

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from inference import MIB, Service, drop_caches, phases  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True, help="a directory benchmarks/inference.py made (g.sg, gcn/, sage/)")
    ap.add_argument("--nodes", type=int, default=2_000_000)
    ap.add_argument("--sizes", default="64,1024")
    ap.add_argument("--models", default="gcn,sage")
    ap.add_argument("--requests", type=int, default=2)
    ap.add_argument("--mem-limit", type=MIB, default=1 << 30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--prefetch", type=int, default=1)
    ap.add_argument("--stream-bytes", type=MIB, default=512 << 20, help="Graph.infer's stream_bytes")
    ap.add_argument("--paths", default="batched,stream", help="contenders: Graph.infer's path values")
    a = ap.parse_args()
    dirp = Path(a.dir)
    contenders = a.paths.split(",")
    service = Service(dirp / "g.sg", a.mem_limit, a.threads, a.batch_size, a.prefetch)
    rng = np.random.default_rng(7)
    try:
        for name in a.models.split(","):
            for k in [int(s) for s in a.sizes.split(",")]:
                got = {c: [] for c in contenders}
                for _ in range(a.requests):
                    targets = rng.choice(a.nodes, k, replace=False)
                    np.save(dirp / "paths-targets.npy", targets)
                    outs = []
                    for c in contenders:
                        drop_caches()
                        reply, out = service.infer(dirp / name, dirp / "paths-targets.npy", a.stream_bytes, c)
                        outs.append(out)
                        got[c].append(reply)
                        print(
                            f"{name} k={k} path={c}: {reply['seconds']:.2f} s, {reply['pages']} pages in {reply['ios']} I/Os, "
                            f"{reply['bytes'] / 2**20:.0f} MiB; {phases(reply['request'])}",
                            flush=True,
                        )
                    for o in outs[1:]:
                        err = float(np.abs(o - outs[0]).max() / max(np.abs(outs[0]).max(), 1e-30))
                        assert err < 1e-4, err
                med = {c: float(np.median([r["seconds"] for r in got[c]])) for c in contenders}
                base = med[contenders[0]]
                print(f"{name} k={k}: median s " + ", ".join(f"{c}: {m:.2f} ({base / m:.2f}x)" for c, m in med.items()), flush=True)
    finally:
        print(f"cgroup peak {service.close() / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
