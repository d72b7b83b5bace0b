#!/usr/bin/env python3
"""GraphSAGE trained with DDP over a graph partitioned on shard servers.

Launcher (one machine): partitions a store into K shards (once), starts one
`solidgraph serve` per shard on loopback, runs `torchrun --nproc_per_node N`
with this script as the trainer, and stops the servers:

    python examples/train_distributed.py --store g.sg --parts 4 --nproc 2 --epochs 2

Trainer (what torchrun runs; or run it yourself against servers elsewhere):

    torchrun --nproc_per_node 2 examples/train_distributed.py \\
        --shards h0:50051,h1:50051,h2:50051,h3:50051 --book shards/book.sgb

Each rank trains on its own share of the training seeds every epoch (a
permutation drawn from (seed, epoch), dealt round-robin, cut to equal
lengths so that every rank takes the same number of steps); gloo on CPU.
Batch i of an epoch is `sample_neighbors(seeds_i, fanouts,
seed=batch_seed(epoch_seed, i))`, so it depends on (seed, epoch, rank, i)
only. `--checkpoint FILE` saves the model, the optimiser, torch's RNG state
and the loader position (epoch, next batch) every `--checkpoint-every`
batches; a trainer started with an existing checkpoint resumes there and
ends with the same model as an uninterrupted run.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shards", help="trainer: shard server addresses, comma-separated")
    p.add_argument("--book", type=Path, help="trainer: the partition book (book.sgb)")
    p.add_argument("--store", type=Path, help="launcher: the store to partition and serve")
    p.add_argument("--parts", type=int, default=4, help="launcher: shards (default 4)")
    p.add_argument("--method", default="stream", help="launcher: partition method (hash, stream)")
    p.add_argument("--shard-dir", type=Path, help="launcher: where the shards are (made if missing; default: beside the store)")
    p.add_argument("--nproc", type=int, default=2, help="launcher: trainer processes (torchrun --nproc_per_node)")
    p.add_argument("--bin", default=os.environ.get("SOLIDGRAPH_BIN", "solidgraph"), help="launcher: the solidgraph command")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--fanouts", default="25,10")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train-share", type=float, default=0.1, help="share of vertices used as training seeds when the graph has no train_mask")
    p.add_argument("--prefetch", type=int, default=4, help="batches sampled ahead")
    p.add_argument("--timeout", type=float, default=30.0, help="deadline of each shard call, seconds")
    p.add_argument("--checkpoint", type=Path, help="checkpoint file (resumed from when it exists)")
    p.add_argument("--checkpoint-every", type=int, default=10, help="batches between checkpoints")
    p.add_argument("--stop-after", type=int, help="exit after this many batches in this run, right after a checkpoint (to test resuming)")
    p.add_argument("--save-model", type=Path, help="write the final model's state_dict here (rank 0)")
    a = p.parse_args(argv)
    a.fanouts = [int(x) for x in a.fanouts.split(",")]
    if a.shards is None and a.store is None:
        p.error("give --shards and --book (trainer) or --store (launcher)")
    return a


# ---- launcher ----------------------------------------------------------------


def launch(a, argv) -> int:
    shard_dir = a.shard_dir or a.store.with_name(a.store.name + f".{a.parts}shards")
    if not shard_dir.exists():
        subprocess.run([a.bin, "partition", str(a.store), str(shard_dir), "--parts", str(a.parts), "--method", a.method], check=True)
    servers = []
    try:
        for k in range(a.parts):
            d = shard_dir / f"shard-{k}"
            stores = sorted(str(p) for p in d.glob("adj-*")) + [str(d / "rows")]
            env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "warn"))
            proc = subprocess.Popen([a.bin, "serve", *stores, "--read-only", "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE, text=True, env=env)
            servers.append(proc)
            line = proc.stdout.readline()
            if not line.startswith("listening on "):
                raise SystemExit(f"shard {k}'s server did not start: {line!r}")
            proc.addr = line.split()[-1]
        drop = {"--store", "--parts", "--method", "--shard-dir", "--nproc", "--bin"}
        rest, skip = [], False
        for x in argv:
            if skip:
                skip = False
            elif x.split("=")[0] in drop:
                skip = "=" not in x
            else:
                rest.append(x)
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={a.nproc}", __file__]
        cmd += ["--shards", ",".join(s.addr for s in servers), "--book", str(shard_dir / "book.sgb"), *rest]
        return subprocess.run(cmd).returncode
    finally:
        for s in servers:
            s.send_signal(signal.SIGTERM)
        for s in servers:
            s.wait(30)


# ---- trainer -----------------------------------------------------------------


def train(a) -> int:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch_geometric.nn import SAGEConv

    from solidgraph import distributed
    from solidgraph.infer import batch_seed

    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    dist.init_process_group("gloo", rank=rank, world_size=world, init_method=None if "MASTER_ADDR" in os.environ else f"file://{tempfile.mktemp()}")
    torch.manual_seed(a.seed)
    torch.use_deterministic_algorithms(True)
    g = distributed.connect(a.shards.split(","), book=a.book, timeout=a.timeout)
    n = g.num_nodes
    if "train_mask" in g.tensors:
        train_ids = np.flatnonzero(g.tensor("train_mask", np.arange(n)))
    else:
        train_ids = np.sort(np.random.default_rng(a.seed).permutation(n)[: max(world, int(n * a.train_share))])
    num_classes = int(g.tensor("y", np.arange(n)).max()) + 1
    in_dim = g.tensors["x"][1]

    class SAGE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = SAGEConv(in_dim, a.hidden)
            self.conv2 = SAGEConv(a.hidden, num_classes)

        def forward(self, x, edge_index):
            x = F.relu(self.conv1(x, edge_index))
            x = F.dropout(x, p=a.dropout, training=self.training)
            return self.conv2(x, edge_index)

    model = DDP(SAGE())
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    epoch, first = 0, 0
    if a.checkpoint and a.checkpoint.exists():
        ck = torch.load(a.checkpoint, weights_only=False)
        model.module.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        torch.set_rng_state(ck["rng"][rank])
        epoch, first = ck["epoch"], ck["batch"]
        if rank == 0:
            print(f"resumed from {a.checkpoint}: epoch {epoch}, batch {first}", flush=True)

    def save(epoch: int, batch: int) -> None:
        # Every rank's RNG state goes in (dropout draws differ per rank).
        states = [None] * world
        dist.all_gather_object(states, torch.get_rng_state())
        if rank == 0:
            tmp = a.checkpoint.with_suffix(".tmp")
            torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(), "rng": states, "epoch": epoch, "batch": batch}, tmp)
            os.replace(tmp, a.checkpoint)
        dist.barrier()

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)
    done = 0
    while epoch < a.epochs:
        perm = np.random.default_rng([a.seed, epoch]).permutation(train_ids)
        per_rank = len(perm) // world
        mine = perm[rank::world][:per_rank]
        batches = [mine[i : i + a.batch_size] for i in range(0, per_rank, a.batch_size)]
        epoch_seed = int(np.random.default_rng([a.seed, epoch, rank]).integers(0, 2**63))

        def sample(i):
            return g.sample_neighbors(batches[i], a.fanouts, seed=batch_seed(epoch_seed, i), tensors=["x", "y"])

        ahead = {i: pool.submit(sample, i) for i in range(first, min(first + a.prefetch, len(batches)))}
        model.train()
        total = 0.0
        for i in range(first, len(batches)):
            s = ahead.pop(i).result()
            if i + a.prefetch < len(batches):
                ahead[i + a.prefetch] = pool.submit(sample, i + a.prefetch)
            x, y = torch.from_numpy(s.tensors["x"]), torch.from_numpy(s.tensors["y"])
            edge_index = torch.from_numpy(s.edge_index)
            b = int(s.num_sampled_nodes[0])
            opt.zero_grad()
            loss = F.cross_entropy(model(x, edge_index)[:b], y[:b])
            loss.backward()
            opt.step()
            total += loss.item()
            done += 1
            last = i + 1 == len(batches)
            if a.checkpoint and ((i + 1) % a.checkpoint_every == 0 or last):
                save(epoch + 1 if last else epoch, 0 if last else i + 1)
            if a.stop_after is not None and done >= a.stop_after:
                if rank == 0:
                    print(f"stopping after {done} batches (epoch {epoch}, batch {i + 1})", flush=True)
                dist.destroy_process_group()
                return 3
        if rank == 0:
            print(f"epoch {epoch}: {len(batches)} batches per rank, mean loss {total / max(1, len(batches) - first):.4f}", flush=True)
        epoch, first = epoch + 1, 0
    if a.save_model and rank == 0:
        torch.save(model.module.state_dict(), a.save_model)
    dist.barrier()
    dist.destroy_process_group()
    g.close()
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    a = parse_args(argv)
    if a.shards is None:
        return launch(a, argv)
    return train(a)


if __name__ == "__main__":
    sys.exit(main())
