"""RDF benchmark: SolidGraph (solidgraph.rdf) against pyoxigraph on the same
LUBM-profile files, in the same run, alternating.

Both contenders are driven through the same pyoxigraph-shaped calls
(`Store(path)`, `bulk_load(path=, format=)`, `query`), each in a process of
its own that joins a memory cgroup (v1, /sys/fs/cgroup/memory) with the same
limit, so the OS page cache a contender reads through counts against its
limit as its own caches do. Reported:

- bulk load: triples/s (input triples over wall time, store opened, loaded
  and closed) and store bytes per triple (allocated bytes of the store
  directory);
- per query, cold (a fresh process opens the store, drops the OS caches,
  runs the query once) and warm (one process, one unmeasured run, then the
  median of --repeat runs); geometric means per kind (lubm, path) and
  overall, and SolidGraph/pyoxigraph ratios (>1: SolidGraph faster);
- throughput, warm, with 1, 2, 4, 8, 16 client threads running the query mix
  for --seconds each.

Every query's answer (row count or boolean) is compared between contenders;
a mismatch is reported and fails the run (exit 1), except a known difference
(queries.KNOWN_DIFFERENCES, with its reason), which is reported as such.
The bulk load runs in a memory cgroup of --load-mem-mib for every contender
(the worker reports the cgroup it is in and that cgroup's limit; the driver
checks it and reports the cgroup's peak).

    python benchmarks/rdf/harness.py --scale 1 --dir /tmp/rdf1 --mem-mib 4096
    python benchmarks/rdf/harness.py --scale 200 --dir /work/bench/rdf200 --mem-mib 512

Needs root for drop_caches and cgroups; without root it runs unlimited and
says that the cold figures are not cold.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import queries  # noqa: E402

# "before": SolidGraph from another build's package directory (--before
# DIR, put first on the worker's PYTHONPATH), e.g. the commit before a change.
ENGINES = {"oxigraph": "pyoxigraph", "solidgraph": "solidgraph.rdf", "before": "solidgraph.rdf"}
SOLIDGRAPH = ("solidgraph", "before")
BEFORE_DIR = ""
CGROUP_ROOT = "/sys/fs/cgroup/memory"
# SolidGraph's page cache, MiB (--cache-mib; default a quarter of the
# memory limit: the rest holds its term dictionary's cache (32 MiB by
# default; the dictionary is paged, read on demand), the query's state and
# the OS page cache); 0: its default.
CACHE_MIB = 0


# ---------------------------------------------------------------- worker side

# A query that reads no store data (--warm-code runs it before a cold one).
CODE_ONLY = "SELECT ?x WHERE { VALUES ?x { 1 } }"


def engine_module(engine: str):
    import importlib

    return importlib.import_module(ENGINES[engine])


def join_cgroup(name: str | None) -> None:
    if name:
        with open(os.path.join(CGROUP_ROOT, name, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))


def own_memory_cgroup() -> tuple[str | None, int | None]:
    """The memory cgroup this process is in (from /proc/self/cgroup) and its
    limit in bytes: proof that a run is inside the limit it reports."""
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, ctrl, path = line.rstrip("\n").split(":", 2)
                if "memory" in ctrl.split(","):
                    with open(os.path.join(CGROUP_ROOT, path.lstrip("/"), "memory.limit_in_bytes")) as g:
                        return path, int(g.read())
    except OSError:
        pass
    return None, None


def drop_caches() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
        return True
    except OSError:
        return False


def answer(result) -> object:
    """Row count of a solutions/triples iterator, or the boolean of an ASK."""
    if isinstance(result, bool) or type(result).__name__ == "QueryBoolean":
        return bool(result)
    return sum(1 for _ in result)


def run_query(store, name: str) -> tuple[float, object]:
    q = queries.sparql(name)
    t = time.perf_counter()
    a = answer(store.query(q))
    return time.perf_counter() - t, a


def open_store(m, a):
    if a.engine in SOLIDGRAPH and a.cache_mib:
        return m.Store(a.store, cache_bytes=a.cache_mib << 20)
    return m.Store(a.store)


def worker(a) -> None:
    join_cgroup(a.cgroup)
    m = engine_module(a.engine)
    out: dict = {"engine": a.engine}
    if a.task == "load":
        t = time.perf_counter()
        store = open_store(m, a)
        kw = {"memory_budget": a.load_budget_mib << 20} if a.engine in SOLIDGRAPH and a.load_budget_mib else {}
        store.bulk_load(path=a.file, format=m.RdfFormat.N_TRIPLES, **kw)
        n = len(store)
        del store
        out.update(seconds=time.perf_counter() - t, triples=n)
        ru = resource.getrusage(resource.RUSAGE_SELF)
        out["cpu_seconds"] = ru.ru_utime + ru.ru_stime
        out["cgroup"], out["cgroup_limit"] = own_memory_cgroup()
    elif a.task == "cold":
        store = open_store(m, a)
        out["dropped"] = drop_caches()
        if a.warm_code:
            # Faults the engine's query code back in (drop_caches evicts the
            # extension's pages too) without reading the store.
            answer(store.query(CODE_ONLY))
        out["seconds"], out["answer"] = run_query(store, a.query)
    elif a.task == "warm":
        store = open_store(m, a)
        res = {}
        for name in a.queries.split(","):
            _, ans = run_query(store, name)
            ts = sorted(run_query(store, name)[0] for _ in range(a.repeat))
            res[name] = {"seconds": ts[len(ts) // 2], "answer": ans}
        out["queries"] = res
    elif a.task == "clients":
        store = open_store(m, a)
        names = a.queries.split(",")
        for name in names:  # warm
            run_query(store, name)
        out["throughput"], out["cores"] = {}, {}
        for c in [int(x) for x in a.clients.split(",")]:
            out["throughput"][c], out["cores"][c] = clients(store, names, c, a.seconds)
    # Peak resident set of the worker (ru_maxrss is in KiB on Linux).
    out["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10
    print(json.dumps(out), flush=True)


def clients(store, names: list[str], n: int, seconds: float) -> tuple[float, float]:
    """Queries per second with n threads each running the mix in turn, and
    the cores the process used meanwhile (CPU seconds per wall second: above
    1 only if the queries run in parallel, outside the GIL)."""
    done = [0] * n
    stop = time.perf_counter() + seconds

    def client(i: int) -> None:
        k = i
        while time.perf_counter() < stop:
            answer(store.query(queries.sparql(names[k % len(names)])))
            k += 1
            done[i] += 1

    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    ts = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
    return sum(done) / wall, cpu / wall


# ---------------------------------------------------------------- driver side


class Cgroup:
    """A memory cgroup per contender, all with the same limit."""

    def __init__(self, engine: str, limit: int | None):
        self.name = None
        if limit is None or not os.access(CGROUP_ROOT, os.W_OK):
            return
        self.name = f"sg-rdf-{engine}-{os.getpid()}"
        path = os.path.join(CGROUP_ROOT, self.name)
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "memory.limit_in_bytes"), "w") as f:
            f.write(str(limit))

    def peak(self) -> int | None:
        """The cgroup's peak memory (RSS and page cache), bytes."""
        if not self.name:
            return None
        with open(os.path.join(CGROUP_ROOT, self.name, "memory.max_usage_in_bytes")) as f:
            return int(f.read())

    def remove(self) -> None:
        if self.name:
            try:
                os.rmdir(os.path.join(CGROUP_ROOT, self.name))
            except OSError:
                pass


class Failed(Exception):
    """A contender's run that did not finish: killed or past the timeout."""


# Cold runs fault the engine's code in first (--warm-code).
WARM_CODE = False

# Seconds a worker may take (--timeout).
TIMEOUT = 600


def spawn(engine: str, task: str, cg: Cgroup, **kw) -> dict:
    cmd = [sys.executable, __file__, "worker", "--engine", engine, "--task", task]
    if CACHE_MIB:
        cmd += ["--cache-mib", str(CACHE_MIB)]
    if WARM_CODE and task == "cold":
        cmd += ["--warm-code"]
    if cg.name:
        cmd += ["--cgroup", cg.name]
    for k, v in kw.items():
        cmd += [f"--{k.replace('_', '-')}", str(v)]
    env = None
    if engine == "before":
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(x for x in (BEFORE_DIR, os.environ.get("PYTHONPATH")) if x))
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=env)
    except subprocess.TimeoutExpired:
        raise Failed(f"{engine} {task}: no answer in {TIMEOUT} s") from None
    if p.returncode == -9:
        raise Failed(f"{engine} {task}: killed (SIGKILL: the memory limit's OOM killer)")
    if p.returncode != 0:
        raise RuntimeError(f"{engine} {task} failed ({p.returncode}): {p.stderr.strip()[-2000:]}")
    out = json.loads(p.stdout.strip().splitlines()[-1])
    PEAK.setdefault(engine, {})[task] = max(PEAK.get(engine, {}).get(task, 0), out.get("peak_rss", 0))
    return out


# Largest peak RSS per engine and task over the run's workers.
PEAK: dict = {}


def dir_bytes(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.stat(os.path.join(root, f)).st_blocks * 512
    return total


def gmean(xs: list[float]) -> float:
    return math.exp(sum(math.log(max(x, 1e-9)) for x in xs) / len(xs)) if xs else float("nan")


def alternate(engines: list[str], r: int) -> list[str]:
    return engines if r % 2 == 0 else engines[::-1]


def driver(a) -> int:
    import lubm

    os.makedirs(a.dir, exist_ok=True)
    data = os.path.join(a.dir, f"lubm{a.scale}{'v' if a.values else ''}.nt")
    if not os.path.exists(data):
        t = time.perf_counter()
        lubm.main(["--scale", str(a.scale), "--out", data] + (["--values"] if a.values else []))
        log(f"generated {data} in {time.perf_counter() - t:.1f} s")
    global CACHE_MIB, TIMEOUT, WARM_CODE, BEFORE_DIR
    BEFORE_DIR = os.path.abspath(a.before) if a.before else ""
    TIMEOUT = a.timeout
    WARM_CODE = a.warm_code
    CACHE_MIB = a.cache_mib if a.cache_mib is not None else a.mem_mib // 4
    engines = a.engines.split(",")
    limit = a.mem_mib << 20 if a.mem_mib else None
    load_limit = a.load_mem_mib << 20 if a.load_mem_mib else None
    root = os.geteuid() == 0
    names = [n for n in (a.queries.split(",") if a.queries else queries.QUERIES) if a.values or queries.QUERIES[n][0] != "filter"]
    report: dict = {"scale": a.scale, "data": data, "data_bytes": os.path.getsize(data), "mem_limit": limit,
                    "load_mem_limit": load_limit, "root": root, "load": {}, "cold": {}, "warm": {}, "throughput": {}, "failed": {}}
    if not root:
        log("not root: no cgroup, no drop_caches; 'cold' runs are not cold")

    for e in engines:
        store = os.path.join(a.dir, f"{e}.store")
        saved = os.path.join(a.dir, f"{e}.load.json")
        if os.path.exists(store) and os.path.exists(saved) and not a.reload:
            with open(saved) as f:
                report["load"][e] = json.load(f)
        else:
            subprocess.run(["rm", "-rf", store], check=True)
            drop_caches()
            cg = Cgroup(e, load_limit)
            try:
                r = spawn(e, "load", cg, store=store, file=data, load_budget_mib=a.load_budget_mib)
                r["cgroup_peak"] = cg.peak()
            except Failed as f:
                report["failed"].setdefault(e, {})["load"] = str(f)
                log(f"load {e}: FAILED: {f}")
                continue
            finally:
                cg.remove()
            if load_limit is not None and cg.name and r.get("cgroup_limit") != load_limit:
                raise RuntimeError(f"load {e} ran in cgroup {r.get('cgroup')} limited to {r.get('cgroup_limit')} bytes, "
                                   f"not {load_limit}")
            r["triples_per_s"] = r["triples"] / r["seconds"]
            report["load"][e] = r
            with open(saved, "w") as f:
                json.dump(r, f)
            log(f"load {e}: {r['triples']} triples in {r['seconds']:.1f} s = {r['triples_per_s']:.0f} triples/s, "
                f"{r['cpu_seconds'] / r['seconds']:.2f} cores, cgroup {r.get('cgroup')} limit {r.get('cgroup_limit')}")
        b = dir_bytes(store)
        report["load"][e]["store_bytes"] = b
        report["load"][e]["bytes_per_triple"] = b / report["load"][e].get("triples", 1) if "triples" in report["load"][e] else None

    # A contender whose load failed (killed by the memory limit) has no store to query.
    engines = [e for e in engines if e in report["load"]]
    answers: dict = {}
    cgs = {e: Cgroup(e, limit) for e in engines}
    try:
        for r in range(a.rounds if a.cold else 0):
            for name in names:
                for e in alternate(engines, r):
                    try:
                        x = spawn(e, "cold", cgs[e], store=os.path.join(a.dir, f"{e}.store"), query=name)
                    except Failed as f:
                        report["failed"].setdefault(e, {})[name] = str(f)
                        log(f"cold r{r} {e} {name}: FAILED: {f}")
                        continue
                    report["cold"].setdefault(e, {}).setdefault(name, []).append(x["seconds"])
                    answers.setdefault(name, {})[e] = x["answer"]
                    log(f"cold r{r} {e} {name}: {x['seconds'] * 1e3:.1f} ms ({x['answer']})")
        for r in range(a.rounds if a.warm else 0):
            for e in alternate(engines, r):
                try:
                    x = spawn(e, "warm", cgs[e], store=os.path.join(a.dir, f"{e}.store"), queries=",".join(names),
                              repeat=a.repeat)
                except Failed as f:
                    report["failed"].setdefault(e, {})["warm"] = str(f)
                    log(f"warm r{r} {e}: FAILED: {f}")
                    continue
                for name, q in x["queries"].items():
                    report["warm"].setdefault(e, {}).setdefault(name, []).append(q["seconds"])
                    answers.setdefault(name, {})[e] = q["answer"]
                log(f"warm r{r} {e}: done")
        if a.clients:
            for e in engines:
                try:
                    x = spawn(e, "clients", cgs[e], store=os.path.join(a.dir, f"{e}.store"),
                              queries=",".join(n for n in names if n not in a.heavy.split(",")),
                              clients=a.clients, seconds=a.seconds)
                except Failed as f:
                    report["failed"].setdefault(e, {})["throughput"] = str(f)
                    log(f"throughput {e}: FAILED: {f}")
                    continue
                report["throughput"][e] = x["throughput"]
                report.setdefault("cores", {})[e] = x["cores"]
                log(f"throughput {e}: {x['throughput']}, cores {x['cores']}")
    finally:
        for cg in cgs.values():
            cg.remove()

    differ = {n: v for n, v in answers.items() if len(set(map(str, v.values()))) > 1}
    mismatches = {n: v for n, v in differ.items() if n not in queries.KNOWN_DIFFERENCES}
    report["answers"] = answers
    report["mismatches"] = mismatches
    report["known_differences"] = {n: {"answers": v, "why": queries.KNOWN_DIFFERENCES[n]}
                                   for n, v in differ.items() if n in queries.KNOWN_DIFFERENCES}
    report["peak_rss"] = PEAK
    summarize(report, engines, names)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    return 1 if mismatches else 0


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def summarize(rep: dict, engines: list[str], names: list[str]) -> None:
    p = print
    p(f"# RDF benchmark, LUBM-profile scale {rep['scale']}: {rep['data_bytes'] / 2**20:.0f} MiB N-Triples; "
      f"memory limit {rep['mem_limit'] and rep['mem_limit'] >> 20} MiB per contender (queries), "
      f"{rep['load_mem_limit'] and rep['load_mem_limit'] >> 20} MiB (load)")
    p("\n## Bulk load")
    for e in engines:
        ld = rep["load"][e]
        tps = ld.get("triples_per_s")
        bpt = ld.get("bytes_per_triple")
        p(f"{e:11s} {ld.get('triples', '?')} triples  "
          f"{(f'{tps:,.0f} triples/s' if tps else 'reused'):>20s}  store {ld['store_bytes'] / 2**20:,.1f} MiB"
          + (f" = {bpt:.1f} B/triple" if bpt else ""))
        if ld.get("cpu_seconds"):
            lim, peak = ld.get("cgroup_limit"), ld.get("cgroup_peak")
            p(f"{'':11s} {ld['seconds']:.1f} s wall, {ld['cpu_seconds']:.1f} s CPU = "
              f"{ld['cpu_seconds'] / ld['seconds']:.2f} cores; peak RSS {ld.get('peak_rss', 0) / 2**20:,.0f} MiB; "
              + (f"cgroup limit {lim / 2**20:,.0f} MiB, its peak (RSS + page cache) {peak / 2**20:,.0f} MiB"
                 if lim and peak else "no memory cgroup"))
    for mode in ("cold", "warm"):
        if not rep[mode]:
            continue
        p(f"\n## Queries, {mode} (median of rounds, ms; geometric means over the queries every contender finished)")
        # Three or more contenders: each other one's time over SolidGraph's.
        others = [e for e in engines if e != "solidgraph"] if len(engines) > 2 and "solidgraph" in engines else []
        p(f"{'query':16s}" + "".join(f"{e:>13s}" for e in engines) + ("       ratio" if len(engines) == 2 else "")
          + "".join(f"{e + '/sg':>14s}" for e in others) + "  answer")
        med = {e: {n: sorted(v)[len(v) // 2] for n, v in rep[mode].get(e, {}).items()} for e in engines}
        for n in names:
            row = f"{n:16s}" + "".join(f"{med[e].get(n, float('nan')) * 1e3:13.2f}" for e in engines)
            if len(engines) == 2 and n in med[engines[0]] and n in med[engines[1]]:
                row += f"{ratio(med, engines, n):12.2f}"
            row += "".join(f"{med[e].get(n, float('nan')) / med['solidgraph'].get(n, float('nan')):14.2f}" for e in others)
            p(row + f"  {rep['answers'].get(n)}")
        for kind in ("lubm", "path", "filter", None):
            sel = [n for n in names if (kind is None or queries.QUERIES[n][0] == kind) and all(n in med[e] for e in engines)]
            gm = {e: gmean([med[e][n] for n in sel if n in med[e]]) for e in engines}
            row = f"{'geomean ' + (kind or 'all'):16s}" + "".join(f"{gm[e] * 1e3:13.2f}" for e in engines)
            if len(engines) == 2:
                row += f"{gm[engines[0]] / gm[engines[1]]:12.2f}"
            row += "".join(f"{gm[e] / gm['solidgraph']:14.2f}" for e in others)
            p(row)
    if rep.get("peak_rss"):
        p("\n## Peak RSS of a worker process, MiB (largest over the run, per task)")
        for e in engines:
            p(f"{e:11s} " + "  ".join(f"{t} {v / 2**20:.0f}" for t, v in rep["peak_rss"].get(e, {}).items()))
    if rep["throughput"]:
        p("\n## Throughput, warm (queries/s; the mix without the heavy queries)")
        cs = list(next(iter(rep["throughput"].values())).keys())
        p(f"{'clients':11s}" + "".join(f"{c:>10s}" for c in cs))
        for e in engines:
            t = rep["throughput"].get(e, {})
            p(f"{e:11s}" + "".join(f"{t.get(c, float('nan')):10.1f}" for c in cs))
        p("cores used (process CPU seconds per wall second)")
        for e in engines:
            t = rep.get("cores", {}).get(e, {})
            p(f"{e:11s}" + "".join(f"{t.get(c, float('nan')):10.2f}" for c in cs))
    for e, fs in rep["failed"].items():
        for n, why in fs.items():
            p(f"FAILED {e} {n}: {why}")
    for n, k in rep.get("known_differences", {}).items():
        p(f"\nknown difference, not a failure: {n} {k['answers']}: {k['why']}")
    if rep["mismatches"]:
        p(f"\nANSWERS DIFFER: {rep['mismatches']}")
    if len(engines) == 2:
        p(f"\nratio = {engines[0]} time / {engines[1]} time (> 1: {engines[1]} faster)")


def ratio(med: dict, engines: list[str], n: str) -> float:
    return med[engines[0]][n] / med[engines[1]][n]


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        ap = argparse.ArgumentParser()
        ap.add_argument("worker")
        ap.add_argument("--engine", required=True, choices=list(ENGINES))
        ap.add_argument("--task", required=True, choices=["load", "cold", "warm", "clients"])
        ap.add_argument("--cgroup")
        ap.add_argument("--store", required=True)
        ap.add_argument("--file")
        ap.add_argument("--query")
        ap.add_argument("--queries")
        ap.add_argument("--repeat", type=int, default=5)
        ap.add_argument("--clients")
        ap.add_argument("--seconds", type=float, default=10.0)
        ap.add_argument("--cache-mib", type=int, default=0)
        ap.add_argument("--warm-code", action="store_true")
        ap.add_argument("--load-budget-mib", type=int, default=0)
        worker(ap.parse_args())
        return 0
    ap = argparse.ArgumentParser(description="RDF benchmark: SolidGraph against pyoxigraph on LUBM-profile data")
    ap.add_argument("--scale", type=int, default=1, help="universities")
    ap.add_argument("--dir", required=True, help="work directory: data file and stores (reused)")
    ap.add_argument("--engines", default="oxigraph,solidgraph")
    ap.add_argument("--mem-mib", type=int, default=512, help="memory limit per contender for queries (0: none)")
    ap.add_argument("--cache-mib", type=int, help="SolidGraph's page cache (default: a quarter of --mem-mib)")
    ap.add_argument("--load-mem-mib", type=int, default=2048,
                    help="memory limit for the bulk load, the same for every contender (0: none; default 2 GiB: "
                         "pyoxigraph's bulk_load of scale 40 was OOM-killed at 512 and 1024 MiB)")
    ap.add_argument("--load-budget-mib", type=int, default=0,
                    help="SolidGraph's bulk-load memory budget (default: its own, 1 GiB)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5, help="warm runs per query per round")
    ap.add_argument("--queries", help="comma-separated names (default: all)")
    ap.add_argument("--no-cold", dest="cold", action="store_false")
    ap.add_argument("--warm-code", action="store_true",
                    help="cold runs: after drop_caches, run a query that reads no data first, so the cold time counts "
                         "the store's reads, not page faults of the engine's code (every contender alike)")
    ap.add_argument("--no-warm", dest="warm", action="store_false")
    ap.add_argument("--clients", default="1,2,4,8,16", help="client counts for throughput ('' to skip)")
    ap.add_argument("--heavy", default="Q2,Q4,Q6,Q7,Q8,Q9,Q13,Q14,P1_suborg_all,P2_advisor_dept,P3_advisor_univ,P6_knows_plus",
                    help="queries left out of the throughput mix (scans and long joins)")
    ap.add_argument("--seconds", type=float, default=10.0, help="per client count")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per worker before it counts as failed")
    ap.add_argument("--reload", action="store_true", help="load again even if a store exists")
    ap.add_argument("--json", help="also write the report as JSON here")
    ap.add_argument("--values", action="store_true",
                    help="data with typed values (lubm.py --values, file lubm<scale>v.nt) and the filter queries")
    ap.add_argument("--before", help="package directory of another SolidGraph build, run as engine 'before'")
    return driver(ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
