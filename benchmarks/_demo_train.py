#!/usr/bin/env python3
"""GraphSAGE training out of core, `make demo`'s main step: the same model,
training loop and seed batches fed by two loaders, each in a process of its
own under the same cgroup v1 memory limit, OS caches dropped before each:

- (S) `solidgraph.torch.NeighborLoader` over the store (2 Rust sampler
  threads, 4 batches prefetched) with a `memory_budget`: the limit less
  the process's measured footprint beside the loader (Python, torch, the
  model, optimizer and training steps) and headroom. The loader splits
  the budget itself between its page cache, row cache and batch buffers.
- (a) what a PyTorch user writes today when the graph does not fit: CSR
  arrays and the feature matrix as numpy memmaps (`np.load(mmap_mode="r")`,
  PyG's recipe for large features), a vectorized numpy neighbor sampler,
  2 threads, 4 batches prefetched, neighbors drawn without replacement as
  (S) and PyG do. Its OS page cache is whatever of the limit its process
  does not use.

Labels are a fixed linear function of each vertex's own features
(argmax of x @ W, 16 classes), computed from the gathered rows, so the
loss falls and both contenders learn the same task. The data directory is
`solidgraph-bench sampling --prepare-only`'s (store with tensor "x", CSR
files in the generator's ids, features.npy).

    .venv/bin/python benchmarks/_demo_train.py --dir demo-data/train-s22 --memory-limit 1280MiB
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

MIB = 1 << 20
CGROUP_ROOT = Path("/sys/fs/cgroup/memory")
CLASSES = 16
# Share of (S)'s cache budget for feature rows, the rest pages: the
# sampling benchmark's default (docs/PERFORMANCE.md, Row cache).
ROW_SHARE = 0.8
# NeighborLoader's defaults, named: the probe must hold as many batches.
PREFETCH = 4
LOOKAHEAD = 32
CONTENDERS = {"solidgraph": "(S) SolidGraph NeighborLoader", "mmap": "(a) numpy memmap CSR + features"}


def size_arg(s: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?B)?\s*", s, re.I)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {s!r} (e.g. 1280MiB, 1GiB)")
    return int(float(m.group(1)) * 1024 ** " KMGT".index((m.group(2) or " ").upper()))


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", type=Path, required=True, help="work directory of `solidgraph-bench sampling --prepare-only`")
    p.add_argument("--memory-limit", type=size_arg, default=1280 * MIB, help="cgroup memory limit of each contender's process")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batches", type=int, default=30, help="batches per epoch: the training set is batches x batch size vertices")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--fanouts", default="25,10")
    p.add_argument("--rounds", type=int, default=1, help="rounds over both contenders, order alternated")
    p.add_argument("--max-seconds", type=float, default=300.0, help="a contender stops after this many seconds of training")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--contenders", default=",".join(CONTENDERS), help="comma-separated, of: " + ", ".join(CONTENDERS))
    p.add_argument("--json", action="store_true")
    p.add_argument("--run", choices=list(CONTENDERS), help=argparse.SUPPRESS)
    p.add_argument("--cgroup", type=Path, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    a.fanouts = [int(f) for f in a.fanouts.split(",")]
    a.contenders = a.contenders.split(",")
    if not set(a.contenders) <= set(CONTENDERS):
        p.error(f"--contenders: choose from {', '.join(CONTENDERS)}")
    if a.epochs < 1 or a.batches < 1 or a.batch_size < 1 or a.rounds < 1 or not a.fanouts:
        p.error("--epochs, --batches, --batch-size, --rounds and --fanouts must be positive")
    return a


# ---- the data directory -------------------------------------------------


class Data:
    """Paths and shape of the prepared directory (bench's Layout)."""

    def __init__(self, d: Path):
        self.dir = d
        self.store = d / "store"
        self.features = d / "features.npy"
        meta = json.loads((d / "csr" / "meta.json").read_text())
        self.nodes, self.edges, id_bytes = meta["nodes"], meta["edges"], meta["id_bytes"]
        self.rowptr = d / "csr" / "rowptr.u64"
        self.colidx = d / "csr" / ("colidx.u32" if id_bytes == 4 else "colidx.u64")
        self.id_dtype = np.uint32 if id_bytes == 4 else np.uint64
        self.train_ids = d / "train_ids.npy"

    def store_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.store.iterdir() if f.name.startswith("sg."))

    def baseline_bytes(self) -> int:
        return sum(p.stat().st_size for p in (self.rowptr, self.colidx, self.features))

    def train(self, count: int, seed: int) -> np.ndarray:
        """`count` distinct vertices with edges, drawn once and kept."""
        if self.train_ids.exists():
            ids = np.load(self.train_ids)
            if len(ids) == count:
                return ids
        rowptr = np.fromfile(self.rowptr, dtype=np.uint64, count=self.nodes + 1)
        have = np.flatnonzero(np.diff(rowptr) > 0)
        ids = np.random.default_rng(seed).choice(have, size=min(count, len(have)), replace=False).astype(np.int64)
        np.save(self.train_ids, ids)
        return ids


# ---- the worker: one contender's training run ----------------------------


def peak_rss() -> int:
    """The process's peak resident set: its anonymous memory and the pages
    of files it maps (Python, torch's libraries). Not the cgroup's peak
    usage: importing torch reads ~1 GB of files through the OS page cache,
    which the cgroup counts until it reclaims them, so that peak is the
    limit itself whatever the process needs."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def epoch_positions(n: int, batch_size: int, seed: int, epoch: int) -> list[np.ndarray]:
    """The seed order NeighborLoader(shuffle=True, seed=seed) uses in `epoch`."""
    pos = np.random.default_rng([seed, epoch]).permutation(n)
    return [pos[i : i + batch_size] for i in range(0, n, batch_size)]


def floyd(deg: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k distinct positions below each row's degree (Floyd's algorithm, all
    rows at once): sampling without replacement, as (S) and PyG do."""
    out = np.empty((len(deg), k), dtype=np.int64)
    for i in range(k):
        j = deg - k + i
        t = (rng.random(len(deg)) * (j + 1)).astype(np.int64)
        taken = (out[:, :i] == t[:, None]).any(axis=1)
        out[:, i] = np.where(taken, j, t)
    return out


class MmapLoader:
    """Mini-batches from CSR and features in numpy memmaps: a vectorized
    neighbor sampler in `workers` threads (numpy's indexing releases the GIL
    while it copies, so page faults overlap), `prefetch` batches ahead."""

    def __init__(self, data: Data, train: np.ndarray, fanouts: list[int], batch_size: int, seed: int, workers: int = 2, prefetch: int = 4):
        self.rowptr = np.memmap(data.rowptr, dtype=np.uint64, mode="r", shape=(data.nodes + 1,))
        self.colidx = np.memmap(data.colidx, dtype=data.id_dtype, mode="r", shape=(data.edges,))
        self.x = np.load(data.features, mmap_mode="r")
        self.train, self.fanouts, self.batch_size, self.seed = train, fanouts, batch_size, seed
        self.workers, self.prefetch = workers, prefetch
        self.nodes = data.nodes
        self.epoch = 0

    def sample(self, seeds: np.ndarray, rng: np.random.Generator):
        import torch
        from torch_geometric.data import Data as PygData

        n_id = [seeds]
        # Local ids through a sorted-array lookup, per batch: no state
        # shared between threads, memory proportional to the batch.
        order = np.argsort(seeds)
        known, known_local = seeds[order], order
        count = len(seeds)
        frontier, frontier_local = seeds, np.arange(len(seeds))
        srcs, dsts = [], []
        for k in self.fanouts:
            start = self.rowptr[frontier].astype(np.int64)
            deg = self.rowptr[frontier + 1].astype(np.int64) - start
            take = np.minimum(deg, k) if k >= 0 else deg
            row = np.repeat(np.arange(len(frontier)), take)
            first = np.cumsum(take) - take
            offset = np.arange(int(take.sum())) - np.repeat(first, take)
            pos = start[row] + offset
            big = np.flatnonzero(deg > take)
            if len(big):
                at = np.repeat(first[big], k) + np.tile(np.arange(k), len(big))
                pos[at] = np.repeat(start[big], k) + floyd(deg[big], k, rng).ravel()
            # Positions in file order (as a page-fault-friendly user would).
            order = np.argsort(pos)
            nbr = np.empty(len(pos), dtype=np.int64)
            nbr[order] = self.colidx[pos[order]]
            at = np.searchsorted(known, nbr).clip(max=len(known) - 1)
            seen = known[at] == nbr
            new, first_at = np.unique(nbr[~seen], return_index=True)
            new = new[np.argsort(first_at)]
            new_local = np.arange(count, count + len(new))
            count += len(new)
            n_id.append(new)
            order = np.argsort(np.concatenate([known, new]), kind="stable")
            known = np.concatenate([known, new])[order]
            known_local = np.concatenate([known_local, new_local])[order]
            nbr_local = known_local[np.searchsorted(known, nbr)]
            srcs.append(nbr_local)
            dsts.append(frontier_local[row])
            frontier, frontier_local = new, new_local
        n_id = np.concatenate(n_id)
        # Rows in id order read the file front to back; then back to batch order.
        order = np.argsort(n_id)
        x = np.empty((len(n_id), self.x.shape[1]), dtype=np.float32)
        x[order] = self.x[n_id[order]]
        edge_index = torch.from_numpy(np.stack([np.concatenate(srcs), np.concatenate(dsts)]))
        return PygData(x=torch.from_numpy(x), edge_index=edge_index, n_id=torch.from_numpy(n_id), batch_size=len(seeds), num_nodes=len(n_id))

    def __iter__(self):
        from concurrent.futures import ThreadPoolExecutor

        epoch = self.epoch
        self.epoch += 1
        batches = epoch_positions(len(self.train), self.batch_size, self.seed, epoch)
        with ThreadPoolExecutor(self.workers) as pool:
            pending = []
            for i, pos in enumerate(batches):
                rng = np.random.default_rng([self.seed, epoch, i, 2])
                pending.append(pool.submit(self.sample, self.train[pos], rng))
                if len(pending) > self.prefetch:
                    yield pending.pop(0).result()
            for f in pending:
                yield f.result()


def make_model(dim: int, seed: int):
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import SAGEConv

    torch.manual_seed(seed)

    class SAGE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = SAGEConv(dim, 128)
            self.conv2 = SAGEConv(128, CLASSES)

        def forward(self, x, edge_index):
            return self.conv2(F.relu(self.conv1(x, edge_index)), edge_index)

    model = SAGE()
    return model, torch.optim.Adam(model.parameters(), lr=0.01)


def labels_of(x, w):
    """The task: a fixed linear function of a vertex's own features."""
    return ((x - 0.5) @ w).argmax(dim=1)


def step(model, opt, b, w) -> tuple[float, int]:
    import torch.nn.functional as F

    opt.zero_grad()
    out = model(b.x, b.edge_index)[: b.batch_size]
    y = labels_of(b.x[: b.batch_size], w)
    loss = F.cross_entropy(out, y)
    loss.backward()
    opt.step()
    return loss.item(), int((out.argmax(dim=1) == y).sum())


def os_read_bytes() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("read_bytes:"):
            return int(line.split()[1])
    return 0


def vm_hwm() -> int:
    """The process's peak resident set since the last `reset_hwm`."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def reset_hwm() -> None:
    """Frees what glibc's arenas keep of released buffers, then restarts the
    peak resident set at the current one (Linux's clear_refs 5)."""
    import ctypes
    import gc

    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    Path("/proc/self/clear_refs").write_text("5\n")


def torch_footprint(a: argparse.Namespace, data: Data, train: np.ndarray, model, opt, w) -> int:
    """The process's peak resident set outside the loader: Python, torch,
    the model and optimizer, and training steps on two batches of the run's
    shape (their activations and gradients). The batches come from a probe
    loader that is dropped before the steps; they are held as the loader's
    last two handed-out batches are, which its memory_budget counts, so
    their bytes are not counted here. Resident file pages (torch's
    libraries) count, as the cgroup counts them. The model updates are
    undone."""
    import solidgraph
    from solidgraph.torch import NeighborLoader

    state = {k: v.clone() for k, v in model.state_dict().items()}
    probe = solidgraph.open(data.store, cache_bytes=0)
    batches = list(NeighborLoader(probe, train[: 2 * a.batch_size], a.fanouts, batch_size=a.batch_size, labels=None, num_workers=1, prefetch=1,
                                  lookahead=0, seed=a.seed))
    del probe
    held = sum(t.numel() * t.element_size() for b in batches for t in (b.x, b.edge_index, b.n_id, b.e_id, b.input_id))
    reset_hwm()
    for b in batches:
        step(model, opt, b, w)
    peak = vm_hwm()
    del batches, b
    model.load_state_dict(state)
    reset_hwm()
    return peak - held


def worker(a: argparse.Namespace) -> dict:
    import warnings

    # torch_geometric's import warns of torch.jit.script's deprecation.
    warnings.filterwarnings("ignore", category=FutureWarning)
    import torch

    import solidgraph
    from solidgraph.torch import NeighborLoader

    data = Data(a.dir)
    train = data.train(a.batches * a.batch_size, a.seed)
    dim = int(np.load(data.features, mmap_mode="r").shape[1])
    model, opt = make_model(dim, a.seed)
    w = torch.from_numpy(np.random.default_rng(a.seed).standard_normal((dim, CLASSES)).astype(np.float32))
    rep: dict = {"contender": a.run, "in_cgroup": a.cgroup is not None}
    if a.run == "solidgraph":
        # The loader takes a memory_budget and splits it itself between its
        # page cache, row cache and batch buffers; the budget is the limit
        # less what the process holds beside the loader (torch_footprint)
        # and headroom.
        torch_bytes = torch_footprint(a, data, train, model, opt, w)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        headroom = max(64 * MIB, torch_bytes // 8)
        budget = a.memory_limit - torch_bytes - headroom
        g = solidgraph.open(data.store, cache_bytes=0)
        loader = NeighborLoader(
            g, train, a.fanouts, batch_size=a.batch_size, shuffle=True, labels=None, num_workers=2, prefetch=PREFETCH, seed=a.seed,
            lookahead=LOOKAHEAD, memory_budget=budget,
        )
        m = loader.memory
        rep.update(torch_bytes=torch_bytes, headroom_bytes=headroom, budget_bytes=budget, page_cache_bytes=m["cache_bytes"],
                   row_cache_bytes=m["row_cache_bytes"], loader_bytes=m["total"], buffer_cap_bytes=m["buffer_bytes"])
        print(f"    (S) torch {torch_bytes / MIB:.0f} MiB, headroom {headroom / MIB:.0f} MiB: memory_budget {budget / MIB:.0f} MiB = page cache "
              f"{m['cache_bytes'] / MIB:.0f} + row cache {m['row_cache_bytes'] / MIB:.0f} + loader (bound) {m['total'] / MIB:.0f} MiB", file=sys.stderr, flush=True)
    else:
        g = None
        loader = MmapLoader(data, train, a.fanouts, a.batch_size, a.seed)
    io0 = os_read_bytes()
    epochs, spent, capped = [], 0.0, False
    for e in range(a.epochs):
        t0, wait, loss_sum, correct, seeds, nodes, done = time.perf_counter(), 0.0, 0.0, 0, 0, 0, 0
        it = iter(loader)
        while True:
            t = time.perf_counter()
            b = next(it, None)
            wait += time.perf_counter() - t
            if b is None:
                break
            loss, ok = step(model, opt, b, w)
            loss_sum, correct, seeds, nodes, done = loss_sum + loss * b.batch_size, correct + ok, seeds + b.batch_size, nodes + b.num_nodes, done + 1
            if spent + time.perf_counter() - t0 > a.max_seconds:
                capped = True
                break
        del it
        dt = time.perf_counter() - t0
        spent += dt
        epochs.append({"seconds": dt, "waited": wait, "batches": done, "seeds": seeds, "nodes": nodes, "loss": loss_sum / max(seeds, 1), "train_acc": correct / max(seeds, 1)})
        if capped:
            break
    rep.update(epochs=epochs, capped=capped, os_read_bytes=os_read_bytes() - io0)
    if g is not None:
        rep["store_read_bytes"] = g.stats()["bytes_read"]
    return rep


# ---- the driver -----------------------------------------------------------


def drop_caches() -> bool:
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def cgroups_usable() -> bool:
    return os.geteuid() == 0 and (CGROUP_ROOT / "cgroup.procs").exists()


def run_contender(a: argparse.Namespace, c: str) -> dict:
    cg = None
    if cgroups_usable():
        cg = CGROUP_ROOT / f"solidgraph-demo-{os.getpid()}-{c}"
        if cg.exists():
            cg.rmdir()
        cg.mkdir()
        (cg / "memory.limit_in_bytes").write_text(str(a.memory_limit))
    cmd = [sys.executable, __file__, "--run", c, "--dir", str(a.dir), "--memory-limit", str(a.memory_limit), "--epochs", str(a.epochs),
           "--batches", str(a.batches), "--batch-size", str(a.batch_size), "--fanouts", ",".join(map(str, a.fanouts)),
           "--max-seconds", str(a.max_seconds), "--seed", str(a.seed)]
    if cg is not None:
        cmd += ["--cgroup", str(cg)]

    def join():
        if cg is not None:
            (cg / "cgroup.procs").write_text(str(os.getpid()))

    try:
        p = subprocess.run(cmd, preexec_fn=join, stdout=subprocess.PIPE, stderr=subprocess.PIPE if a.json else None, text=True)
        peak = int((cg / "memory.max_usage_in_bytes").read_text()) if cg else None
        failcnt = int((cg / "memory.failcnt").read_text()) if cg else None
    finally:
        if cg is not None:
            for _ in range(50):
                try:
                    cg.rmdir()
                    break
                except OSError:
                    time.sleep(0.05)
    if p.returncode != 0:
        why = "killed: out of memory in its cgroup" if p.returncode == -9 and cg else f"exit status {p.returncode}"
        return {"contender": c, "failed": why, "peak_bytes": peak}
    rep = json.loads(p.stdout.strip().splitlines()[-1])
    rep.update(peak_bytes=peak, limit_hits=failcnt)
    return rep


def summarize(r: dict) -> dict:
    """Whole-run figures of one contender's report."""
    ep = r["epochs"]
    secs, seeds = sum(e["seconds"] for e in ep), sum(e["seeds"] for e in ep)
    batches = sum(e["batches"] for e in ep)
    return {
        "seconds": secs,
        "seeds_per_s": seeds / secs,
        "s_per_epoch": secs / len(ep) if not r["capped"] else None,
        "nodes_per_batch": sum(e["nodes"] for e in ep) / max(batches, 1),
        "waited": sum(e["waited"] for e in ep) / secs,
        "batches": batches,
        "last_loss": ep[-1]["loss"],
        "first_loss": ep[0]["loss"],
        "last_acc": ep[-1]["train_acc"],
    }


def main() -> int:
    a = parse_args()
    if a.run:
        print(json.dumps(worker(a)))
        return 0
    data = Data(a.dir)
    data.train(a.batches * a.batch_size, a.seed)
    cg = cgroups_usable()
    runs: dict[str, list[dict]] = {c: [] for c in CONTENDERS}
    order = a.contenders
    for r in range(a.rounds):
        for c in order if r % 2 == 0 else order[::-1]:
            dropped = drop_caches()
            rep = run_contender(a, c)
            rep["caches_dropped"] = dropped
            runs[c].append(rep)
            if not a.json:
                print(f"  round {r + 1}/{a.rounds} {c}: " + (rep["failed"].splitlines()[0] if "failed" in rep else f"{summarize(rep)['seconds']:.1f} s"), flush=True)
    if a.json:
        print(json.dumps({"args": {k: str(v) for k, v in vars(a).items()}, "runs": runs}))
        return 0
    report(a, data, runs, cg)
    return 0


def median_run(rs: list[dict]) -> dict | None:
    ok = sorted((r for r in rs if "failed" not in r), key=lambda r: summarize(r)["seeds_per_s"])
    return ok[len(ok) // 2] if ok else None


def report(a: argparse.Namespace, data: Data, runs: dict[str, list[dict]], cg: bool) -> None:
    sb, bb = data.store_bytes(), data.baseline_bytes()
    print(
        f"graph: {data.nodes:,} vertices, {data.edges:,} stored edges, 128-dim f32 features; store {sb / MIB:,.0f} MiB, "
        f"CSR + features.npy {bb / MIB:,.0f} MiB"
    )
    print(
        f"memory: {a.memory_limit / MIB:,.0f} MiB for each contender's whole process "
        f"({'cgroup v1 memory limit' if cg else 'NOT enforced: not root or no cgroup v1'}), "
        f"{sb / a.memory_limit:.1f}x less than the store; OS caches dropped before each run"
    )
    s = median_run(runs["solidgraph"])
    if s and "budget_bytes" in s:
        print(
            f"  (S) memory_budget {s['budget_bytes'] / MIB:.0f} MiB = the limit - its process's {s['torch_bytes'] / MIB:.0f} MiB beside the loader "
            f"(measured: Python, torch, model, training steps) - {s['headroom_bytes'] / MIB:.0f} MiB headroom; the loader's split: page cache "
            f"{s['page_cache_bytes'] / MIB:.0f} MiB + row cache {s['row_cache_bytes'] / MIB:.0f} MiB + its bound {s['loader_bytes'] / MIB:.0f} MiB"
        )
    print("  (a) the OS page cache over its memmaps: whatever of the limit its process does not use")
    print(
        f"training: GraphSAGE (2 SAGEConv layers, hidden 128, {CLASSES} classes), {a.epochs} epochs x {a.batches} batches of {a.batch_size} seeds "
        f"({a.batches * a.batch_size:,} training vertices), fanouts {a.fanouts}, the same seed batches for both, {a.rounds} round(s) alternated"
    )
    print(f"{'contender':<34} {'s/epoch':>8} {'seeds/s':>8} {'nodes/batch':>11} {'waited':>7} {'GB read':>8} {'peak MiB':>9} {'loss':>13}")
    for c, label in CONTENDERS.items():
        m = median_run(runs[c])
        if m is None:
            fails = "; ".join(r["failed"].splitlines()[0] for r in runs[c])
            print(f"{label:<34} failed: {fails}")
            continue
        x = summarize(m)
        spe = f"{x['s_per_epoch']:.1f}" if x["s_per_epoch"] is not None else f">{a.max_seconds / a.epochs:.0f} (cap)"
        peak = f"{m['peak_bytes'] / MIB:.0f}" if m.get("peak_bytes") else "-"
        print(
            f"{label:<34} {spe:>8} {x['seeds_per_s']:>8.0f} {x['nodes_per_batch']:>11,.0f} {x['waited']:>7.0%} {m['os_read_bytes'] / 1e9:>8.2f} {peak:>9} "
            f"{x['first_loss']:>5.2f} -> {x['last_loss']:<5.2f}"
        )
    sm, am = median_run(runs["solidgraph"]), median_run(runs["mmap"])
    if sm and am:
        ratio = summarize(sm)["seeds_per_s"] / summarize(am)["seeds_per_s"]
        per_round = [summarize(x)["seeds_per_s"] / summarize(y)["seeds_per_s"] for x, y in zip(runs["solidgraph"], runs["mmap"]) if "failed" not in x and "failed" not in y]
        print(f"S/a training throughput (seeds/s): {ratio:.2f}x (per round: {', '.join(f'{q:.2f}x' for q in per_round)})")
        print(f"bar: S trains faster than (a) on the same memory: {'met' if ratio > 1 else 'NOT met'}")
        summary = {"ratio": ratio, "s": summarize(sm), "a": summarize(am), "a_capped": am["capped"]}
    else:
        print("bar: S trains faster than (a) on the same memory: NOT measured (a contender failed)")
        summary = {"ratio": None}
    summary.update(memory_limit=a.memory_limit, store_bytes=sb, nodes=data.nodes, edges=data.edges)
    out = os.environ.get("DEMO_SUMMARY")
    if out:
        Path(out).write_text(json.dumps(summary))


if __name__ == "__main__":
    sys.exit(main())
