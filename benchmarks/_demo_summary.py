#!/usr/bin/env python3
"""`make demo`'s short tables and one-line summary, from the JSON the
analytics benchmark and benchmarks/_demo_train.py write.

    .venv/bin/python benchmarks/_demo_summary.py --analytics A.json
    .venv/bin/python benchmarks/_demo_summary.py --analytics A.json --train T.json --cora cora.txt --line
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

MIB = 1 << 20
ALGOS = {"bfs": "BFS", "wcc": "WCC", "pagerank": "PageRank", "kcore": "k-core"}


def seconds(cell: dict) -> str:
    if cell.get("seconds") is not None:
        return f"{cell['seconds']:.2f}"
    return f">{cell['cap_seconds']:.0f} (cap)"


def analytics_table(r: dict) -> None:
    print(
        f"graph: {r['nodes']:,} vertices, {r['edges']:,} stored edges; store {r['store_bytes'] / MIB:,.0f} MiB, CSR {r['csr_bytes'] / MIB:,.0f} MiB; "
        f"{'cgroup v1 memory limit per out-of-core run' if r['memory_enforced'] else 'memory limit NOT enforced (not root or no cgroup v1)'}, caches dropped"
    )
    print(f"{'algo':<9} {'limit MiB':>9} {'S cache':>8} {'(S) SolidGraph s':>16} {'(a) CSR mmap s':>15} {'S/a':>6} {'(b) all cached s':>16}")
    for row in r["algos"]:
        cs = row["contenders"]
        s, m, b = cs["solidgraph"], cs.get("mmap"), cs.get("cached")
        ratio = row.get("speedup_vs_mmap_best")
        capped = row.get("mmap_best_capped")
        cache = row.get("solidgraph_cache_bytes")
        print(
            f"{ALGOS[row['algo']]:<9} {row['memory_limit_bytes'] / MIB:>9,.0f} {(f'{cache / MIB:.0f}' if cache else '-'):>8} {seconds(s):>16} "
            f"{(seconds(m) if m else '-'):>15} {(('>=' if capped else '') + f'{ratio:.2f}x' if ratio else '-'):>6} {(seconds(b) if b else '-'):>16}"
        )
    print(f"results verified: {'; '.join(r['verified'])}")
    for f in r["failures"]:
        print(f"FAILED: {f}")


def line(a: dict | None, t: dict | None, cora: str | None, others: list[Path]) -> str:
    parts, missed = [], []
    # Bars the other steps printed as not met, by their own words.
    for f in others:
        for text in f.read_text().splitlines():
            # bench io's table ends each row with its verdict, yes or no.
            if text.split()[-1:] == ["no"]:
                missed.append(f"{f.stem}: " + " ".join(text.split()[:3]))
            if "NOT met" in text:
                missed.append(f"{f.stem}: " + " ".join(text.replace("NOT met", "").split()).rstrip(":"))
    if t is not None:
        gib = t["store_bytes"] / (1 << 30)
        head = f"on a {gib:.1f} GiB graph store with {t['memory_limit'] / (1 << 30):.1f} GiB per process"
        if t.get("ratio"):
            se, ae = t["s"]["s_per_epoch"], t["a"]["s_per_epoch"]
            epochs = f" ({se:.0f} s vs {ae:.0f} s per epoch)" if se and ae else (" (numpy capped)" if t.get("a_capped") else "")
            parts.append(f"{head}, GraphSAGE trains {t['ratio']:.1f}x faster than numpy memmap{epochs}")
            if t["ratio"] <= 1:
                missed.append("training faster than numpy memmap")
        else:
            parts.append(f"{head}, GraphSAGE: a contender failed")
            missed.append("training measured")
    if a is not None:
        rs = []
        for row in a["algos"]:
            r = row.get("speedup_vs_mmap_best")
            rs.append(f"{ALGOS[row['algo']]} {'>=' if row.get('mmap_best_capped') else ''}{r:.1f}x" if r else f"{ALGOS[row['algo']]} -")
            if not (row.get("bars") or {}).get("vs_mmap_2x"):
                missed.append(f"{ALGOS[row['algo']]} >= 2x mmap")
        parts.append("analytics vs CSR in mmap at the same limit: " + ", ".join(rs))
    if cora:
        m = re.search(r"test accuracy (\d\.\d+)", Path(cora).read_text())
        parts.append(f"Cora test accuracy {m.group(1) if m else 'not printed'}")
    parts.append("every bar met" if not missed else "NOT met: " + "; ".join(missed))
    return "summary: " + "; ".join(parts)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--analytics", type=Path)
    p.add_argument("--train", type=Path)
    p.add_argument("--cora", type=Path)
    p.add_argument("--steps", type=Path, nargs="*", default=[], help="other steps' output: their lines saying NOT met join the summary")
    p.add_argument("--line", action="store_true", help="print the one-line summary instead of the analytics table")
    a = p.parse_args()
    load = lambda path: json.loads(path.read_text()) if path and path.exists() else None  # noqa: E731
    an, tr = load(a.analytics), load(a.train)
    if a.line:
        print(line(an, tr, str(a.cora) if a.cora else None, a.steps))
    elif an is not None:
        analytics_table(an)


if __name__ == "__main__":
    main()
