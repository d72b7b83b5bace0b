#!/usr/bin/env python3
"""GraphSAGE node classification trained from a SolidGraph store.

The mini-batches (sampled neighborhoods plus their features and labels) come
from `solidgraph.torch.NeighborLoader`: Rust threads sample and gather them
straight from the store's SSD pages, `--prefetch` batches ahead of the
training loop, with a page cache of `--cache-bytes`.

    # Cora (Planetoid split 140/500/1000), imported into a store first:
    python examples/train_graphsage.py
    # A Graph500 Kronecker graph (R-MAT, edge factor 16) with random 128-dim
    # features and labels, out of core; prints time per epoch and the share
    # of it the trainer waited for data:
    python examples/train_graphsage.py --kron 20 --cache-bytes 64MiB --epochs 1 --max-batches 50
    # Reuse a store (made by an earlier run with --store, or any store with
    # tensors x, y and optionally train_mask/val_mask/test_mask):
    python examples/train_graphsage.py --kron 20 --store /data/kron20.sg
    # A short run from SSD (for `make demo`): Cora with a 1 MiB cache.
    python examples/train_graphsage.py --quick
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import solidgraph
from solidgraph.datasets import load_planetoid, rmat_edges

REPO = Path(__file__).resolve().parents[1]
CORA = REPO.parent / "shared" / "datasets" / "planetoid" / "Cora" / "raw"


def size_arg(s: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?B)?\s*", s, re.I)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {s!r} (e.g. 64MiB, 1G, 4096)")
    return int(float(m.group(1)) * 1024 ** " KMGT".index((m.group(2) or " ").upper()))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=CORA, help="Planetoid raw directory (default: ../shared/.../Cora/raw)")
    p.add_argument("--kron", type=int, metavar="SCALE", help="train on a generated Kronecker graph of 2**SCALE vertices instead")
    p.add_argument("--edge-factor", type=int, default=16)
    p.add_argument("--store", type=Path, help="store to use; imported there first if it does not exist (default: a temporary one)")
    p.add_argument("--workdir", type=Path, help="where a temporary store goes (default: the system temp dir)")
    p.add_argument("--cache-bytes", type=size_arg, help="cache budget (default: 256MiB; Kronecker: 64MiB; --quick: 1MiB)")
    p.add_argument(
        "--row-cache-share",
        type=float,
        default=0.8,
        help="share of --cache-bytes that caches feature rows, the rest pages (default 0.8, the share with the fewest I/Os per batch in the sampling benchmark)",
    )
    p.add_argument("--epochs", type=int, help="default: Cora 30, Kronecker 1, --quick 10 (Cora)")
    p.add_argument("--max-batches", type=int, help="stop each epoch after this many batches (Kronecker default: 50)")
    p.add_argument("--batch-size", type=int, help="default: Cora 32, Kronecker 1024")
    p.add_argument("--fanouts", default="25,10")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--workers", type=int, default=2, help="Rust sampler threads")
    p.add_argument("--prefetch", type=int, default=4, help="batches prepared ahead")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="a short run from SSD: few epochs/batches, tiny cache")
    p.add_argument("--min-accuracy", type=float, help="exit with status 1 if the test accuracy is below this")
    a = p.parse_args(argv)
    if not 0.0 <= a.row_cache_share <= 1.0:
        p.error(f"--row-cache-share {a.row_cache_share} must be in [0, 1]")
    kron = a.kron is not None
    if a.quick and kron:
        defaults = dict(cache_bytes=8 << 20, epochs=1, max_batches=10, batch_size=512)
    elif a.quick:
        defaults = dict(cache_bytes=1 << 20, epochs=10, max_batches=None, batch_size=32)
    elif kron:
        defaults = dict(cache_bytes=64 << 20, epochs=1, max_batches=50, batch_size=1024)
    else:
        defaults = dict(cache_bytes=256 << 20, epochs=30, max_batches=None, batch_size=32)
    for k, v in defaults.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    a.fanouts = [int(x) for x in a.fanouts.split(",")]
    return a


def mib(n: float) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def hit_rate(hits: int, misses: int) -> str:
    """Hits as a share of lookups, with the lookups counted ("-" for none)."""
    n = hits + misses
    return f"{hits / n:.0%} hits of {n:,}" if n else "-"


def import_cora(path: Path, raw: Path) -> None:
    if not raw.is_dir():
        sys.exit(f"{raw} is missing: check out the shared datasets as ../shared beside the repository, or pass --data")
    ds = load_planetoid(raw, "Cora")
    # Row-normalized bag-of-words features (PyG's NormalizeFeatures).
    x = ds.x / np.maximum(ds.x.sum(axis=1, keepdims=True), 1)
    tensors = {"x": x, "y": ds.y, "train_mask": ds.train_mask, "val_mask": ds.val_mask, "test_mask": ds.test_mask}
    rep = solidgraph.import_graph(path, (ds.src, ds.dst), tensors, undirected=True, dedup=True)
    print(f"imported Cora: {rep['num_nodes']} nodes, {rep['num_edges']} edges, {mib(rep['bytes'])} in {rep['seconds']:.2f} s")


def import_kron(path: Path, scale: int, edge_factor: int, seed: int) -> None:
    t = time.perf_counter()
    src, dst = rmat_edges(scale, edge_factor, seed=seed)
    n = 1 << scale
    rng = np.random.default_rng(seed + 1)
    x = rng.standard_normal((n, 128), dtype=np.float32)
    y = rng.integers(0, 16, n)
    train_mask = rng.random(n) < 0.1
    print(f"generated R-MAT scale {scale}: {n} vertices, {len(src)} edges, {mib(x.nbytes)} of features in {time.perf_counter() - t:.1f} s")
    # Degree order packs the hubs' lists and feature rows, which most
    # batches touch, into few pages.
    rep = solidgraph.import_graph(path, (src, dst), {"x": x, "y": y, "train_mask": train_mask}, undirected=True, dedup=True, order="degree")
    del src, dst, x
    print(f"imported: {rep['num_edges']} stored edges, store {mib(rep['bytes'])}, {rep['seconds']:.1f} s")


def main(argv=None) -> int:
    a = parse_args(argv)
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import SAGEConv

    from solidgraph.torch import NeighborLoader

    torch.manual_seed(a.seed)
    np.random.seed(a.seed)

    tmp = None
    path = a.store
    if path is None:
        tmp = Path(tempfile.mkdtemp(prefix="sg-train-", dir=a.workdir))
        path = tmp / ("kron.sg" if a.kron is not None else "cora.sg")
    try:
        if not path.exists():
            if a.kron is not None:
                import_kron(path, a.kron, a.edge_factor, a.seed)
            else:
                import_cora(path, a.data)
        rows = int(a.cache_bytes * a.row_cache_share)
        g = solidgraph.open(path, cache_bytes=a.cache_bytes - rows, row_cache_bytes=rows)
        store_bytes = sum(f.stat().st_size for f in path.iterdir() if f.name.startswith("sg."))
        print(
            f"{g}\nstore {mib(store_bytes)}, cache {mib(a.cache_bytes)} ({a.cache_bytes / store_bytes:.0%} of the store; "
            f"{mib(rows)} of it for feature rows)"
        )
        tensors = g.tensors
        n = g.num_nodes
        ids = np.arange(n)

        def mask(name, default):
            return np.flatnonzero(g.tensor(name, ids)) if name in tensors else default

        rng = np.random.default_rng(a.seed)
        train = mask("train_mask", rng.permutation(n)[: max(1, n // 10)])
        val = mask("val_mask", None)
        test = mask("test_mask", None)
        num_classes = int(g.tensor("y", ids).max()) + 1
        in_dim = tensors["x"][1]

        class SAGE(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.conv1 = SAGEConv(in_dim, a.hidden)
                self.conv2 = SAGEConv(a.hidden, num_classes)

            def forward(self, x, edge_index):
                x = F.relu(self.conv1(x, edge_index))
                x = F.dropout(x, p=a.dropout, training=self.training)
                return self.conv2(x, edge_index)

        model = SAGE()
        opt = torch.optim.Adam(model.parameters(), lr=a.lr, weight_decay=a.weight_decay)
        loader = NeighborLoader(
            g, train, a.fanouts, batch_size=a.batch_size, shuffle=True, prefetch=a.prefetch, num_workers=a.workers, seed=a.seed
        )

        @torch.no_grad()
        def accuracy(nodes):
            # Exact 2-hop inference: every neighbor, from the store.
            model.eval()
            correct = 0
            for b in NeighborLoader(g, nodes, [-1] * len(a.fanouts), batch_size=1024, num_workers=a.workers, seed=a.seed):
                pred = model(b.x, b.edge_index)[: b.batch_size].argmax(dim=1)
                correct += int((pred == b.y[: b.batch_size]).sum())
            return correct / len(nodes)

        batches = len(loader) if a.max_batches is None else min(len(loader), a.max_batches)
        print(f"training GraphSAGE on {len(train)} nodes: {batches} batches of {a.batch_size}, fanouts {a.fanouts}, {a.workers} sampler threads, prefetch {a.prefetch}")
        # Each epoch's counters, so that "read" beside a small cache reads as
        # what it is: pages evicted and read again count each time.
        print(
            "per epoch: SSD read = bytes read from the device this epoch (a page evicted and needed again is read again); "
            "page cache = hits of adjacency-page lookups; row cache = hits of feature-row lookups"
        )
        best_val, test_at_best, times = -1.0, None, []
        for epoch in range(1, a.epochs + 1):
            model.train()
            g.reset_stats()
            t0 = time.perf_counter()
            wait = 0.0
            loss_sum = nodes_seen = 0
            it = iter(loader)
            for i in range(batches):
                t = time.perf_counter()
                b = next(it)
                wait += time.perf_counter() - t
                opt.zero_grad()
                out = model(b.x, b.edge_index)[: b.batch_size]
                loss = F.cross_entropy(out, b.y[: b.batch_size])
                loss.backward()
                opt.step()
                loss_sum += loss.item() * b.batch_size
                nodes_seen += len(b.n_id)
            del it  # stops the sampler threads when the epoch was cut short
            dt = time.perf_counter() - t0
            times.append((dt, wait))
            s = g.stats()
            line = (
                f"epoch {epoch:3d}: loss {loss_sum / max(1, min(len(train), batches * a.batch_size)):.4f}  "
                f"{dt:.2f} s ({dt / batches * 1000:.1f} ms/batch, waited for data {wait / dt:.0%})  "
                f"{nodes_seen / dt:,.0f} sampled nodes/s, SSD read {mib(s['bytes_read'])} in {s['ios']:,} I/Os, "
                f"page cache {hit_rate(s['cache_hits'], s['cache_misses'])}, row cache {hit_rate(s['row_cache_hits'], s['row_cache_misses'])}"
            )
            if val is not None:
                v = accuracy(val)
                line += f"  val {v:.4f}"
                if v > best_val:
                    best_val, test_at_best = v, (accuracy(test) if test is not None else None)
            print(line, flush=True)
        total, waited = sum(t for t, _ in times), sum(w for _, w in times)
        print(f"time per epoch {total / len(times):.2f} s, waited for data {waited / total:.1%} of it")
        if test is not None:
            final = accuracy(test)
            if test_at_best is None:
                test_at_best = final
            print(f"test accuracy {test_at_best:.4f} (model of the best validation epoch; last epoch: {final:.4f})")
            if a.min_accuracy is not None and test_at_best < a.min_accuracy:
                print(f"below the required {a.min_accuracy}", file=sys.stderr)
                return 1
        return 0
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
