"""Warm timing of a few dependent-lookup queries on an existing store: the
LUBM-profile set's P4, P7, Q1, Q3, Q12 plus `<GS0> knows ?x . ?x knows ?y`
as a BGP and as the path `knows/knows`. One engine per process; prints the
median of --repeat runs after one unmeasured run, and the row count (which
must agree between engines). Alternate engines (or builds, through
PYTHONPATH) in the same run and read ratios.

    .venv/bin/python benchmarks/rdf/joins.py solidgraph /work/bench/rdf40/solidgraph.store
    .venv/bin/python benchmarks/rdf/joins.py oxigraph /work/bench/rdf40/oxigraph.store
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import queries  # noqa: E402

ENGINES = {"oxigraph": "pyoxigraph", "solidgraph": "solidgraph.rdf"}
GS0 = "<http://www.Department0.University0.edu/GraduateStudent0>"
EXTRA = {
    "knows2_bgp": f"SELECT ?y {{ {GS0} foaf:knows ?x . ?x foaf:knows ?y }}",
    "knows2_path": f"SELECT ?y {{ {GS0} foaf:knows/foaf:knows ?y }}",
}
DEFAULT = "knows2_bgp,knows2_path,P4_students_of,P7_knows_3,Q1,Q3,Q12"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("engine", choices=list(ENGINES))
    ap.add_argument("store")
    ap.add_argument("--queries", default=DEFAULT)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    store = importlib.import_module(ENGINES[a.engine]).Store(a.store)
    texts = {k: queries.PREFIX + v[1] for k, v in queries.QUERIES.items()}
    texts.update({k: queries.PREFIX + v for k, v in EXTRA.items()})

    def run(q: str):
        r = store.query(q)
        return r if isinstance(r, bool) else sum(1 for _ in r)

    for name in a.queries.split(","):
        answer = run(texts[name])
        times = []
        for _ in range(a.repeat):
            t = time.perf_counter()
            run(texts[name])
            times.append(time.perf_counter() - t)
        print(f"{a.engine} {name}: {statistics.median(times) * 1000:.3f} ms ({answer})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
