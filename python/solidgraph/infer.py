"""GNN inference next to the store: export PyTorch / PyG models to the
runner's model directory, load them, and run them with `Graph.infer`.

    model = torch_geometric.nn.models.GraphSAGE(1433, 64, 2, out_channels=7).eval()
    solidgraph.infer.export(model, "sage.model")
    g = solidgraph.open("cora.sg")
    out = g.infer("sage.model", nodes, fanouts=[25, 10])   # (len(nodes), 7) float32

A model directory holds `model.json` (a versioned dataflow graph of ops,
format "solidgraph-dfg" version 1) and `weights.safetensors` (f32 weights
named after the model's `state_dict` keys).

What `export` supports (anything else raises `InvalidArgumentError` naming
the module or function):

- PyG's basic models `GCN`, `GraphSAGE`, `GIN`, `GAT` (torch_geometric.nn.models)
  with `jk=None` and `norm=None`, walked layer by layer;
- any other `nn.Module` whose `forward(x, edge_index)` traces with
  `torch_geometric.nn.fx.symbolic_trace` into these leaves:
  - convolutions: `GCNConv` (normalize, add_self_loops, not improved),
    `SAGEConv` (aggr="mean", project=False), `GINConv` (its `nn` made of the
    leaves below), `GATConv` (one input width, edge_dim=None, add_self_loops,
    no residual), each reading one more layer of graph (block);
  - `nn.Linear`, PyG `Linear`, `MLP` (no norms), `nn.Sequential` of these;
  - `nn.ReLU`, `LeakyReLU`, `ELU`, `Sigmoid`, `Tanh`, `Identity`,
    `Dropout` (dropped: inference is eval mode), `BatchNorm1d` (eval, running stats);
  - the functions and methods relu, leaky_relu, elu, sigmoid, tanh, dropout,
    normalize (p=2 over the last dim), torch.cat over the last dim, and
    `+` / `*` between values or with a constant (residual adds);
- `NGCF` below (the recommendation model of HolisticGNN; not in PyG).

Every conv runs on the whole sampled subgraph (PyG's trim-free convention):
`g.infer` with `fanouts` equals `model(x[s.node], s.edge_index)[:len(seeds)]`
for `s = g.sample_neighbors(seeds, fanouts, seed=batch_seed(seed, i))`, and
`fanouts=None` (the full neighbourhood) equals `model(x, edge_index)[nodes]`.
"""

from __future__ import annotations

import json
import operator
import os
import struct
from pathlib import Path

import numpy as np

from solidgraph._native import InferModel, InvalidArgumentError, batch_seed, last_request, load_model, time_kernel

__all__ = ["NGCF", "InferModel", "batch_seed", "export", "last_request", "load", "time_kernel"]

FORMAT = "solidgraph-dfg"
VERSION = 1


def load(path, plugins=None, plugin_names=None) -> InferModel:
    """Loads and checks a model directory (model.json + weights.safetensors).

    `plugins`: a directory of kernel plugins (shared libraries with the C ABI
    of crates/runner/include/solidgraph_plugin.h), whose kernels join the
    built-in ones; the highest priority per op runs (`InferModel.kernels()`
    says which). Every `*.so` there loads, or only `plugin_names` (file names
    in that directory; a path leading out of it is refused). A plugin that
    fails to load or has another ABI version raises InvalidArgumentError."""
    if plugins is None:
        if plugin_names is not None:
            raise InvalidArgumentError("plugin_names needs plugins=DIR, the directory they load from")
        return load_model(os.fspath(path))
    names = None if plugin_names is None else [os.fspath(n) for n in plugin_names]
    return load_model(os.fspath(path), os.fspath(plugins), names)


def _torch():
    import torch

    return torch


def _ngcf_module():
    torch = _torch()

    class NGCFLayer(torch.nn.Module):
        def __init__(self, in_dim, out_dim):
            super().__init__()
            self.W_gc = torch.nn.Linear(in_dim, out_dim)
            self.W_bi = torch.nn.Linear(in_dim, out_dim)

    class NGCF(torch.nn.Module):
        """NGCF (Wang et al., SIGIR 2019) as NGCF-PyTorch computes it, over any
        edge set: per layer `side = D^-1/2 A D^-1/2 e` (in-degrees, no
        self-loops), `e' = leaky_relu(W_gc side) + leaky_relu(W_bi (e * side))`
        (slope 0.2); the output is `concat(e_0, normalize(e_1), ..., normalize(e_L))`.
        `forward(x, edge_index)`: x holds the node embeddings (users and items)."""

        def __init__(self, in_dim: int, widths):
            super().__init__()
            dims = [in_dim, *widths]
            self.in_dim = in_dim
            self.layers = torch.nn.ModuleList(NGCFLayer(a, b) for a, b in zip(dims, dims[1:]))

        def forward(self, x, edge_index):
            F = torch.nn.functional
            row, col = edge_index
            n = x.size(0)
            deg = torch.zeros(n, dtype=x.dtype, device=x.device).index_add_(0, col, torch.ones_like(col, dtype=x.dtype))
            inv = deg.pow(-0.5)
            inv[torch.isinf(inv)] = 0
            norm = (inv[row] * inv[col]).unsqueeze(-1)
            ego, parts = x, [x]
            for layer in self.layers:
                side = torch.zeros_like(ego).index_add_(0, col, norm * ego[row])
                s = F.leaky_relu(layer.W_gc(side), 0.2)
                b = F.leaky_relu(layer.W_bi(ego * side), 0.2)
                ego = s + b
                parts.append(F.normalize(ego, p=2, dim=1))
            return torch.cat(parts, dim=1)

    return NGCF


_NGCF = None


def __getattr__(name):
    # torch loads on first use of NGCF, so `solidgraph.infer` needs numpy only.
    global _NGCF
    if name == "NGCF":
        if _NGCF is None:
            _NGCF = _ngcf_module()
            _NGCF.__module__ = __name__
        return _NGCF
    raise AttributeError(f"module 'solidgraph.infer' has no attribute {name!r}")


def _unsupported(what: str, why: str = "") -> InvalidArgumentError:
    return InvalidArgumentError(f"solidgraph.infer.export: {what} is not supported{': ' + why if why else ''} (see solidgraph.infer's docs for what is)")


class _Emitter:
    """The DFG under construction: fresh value names, weights by name, one block per conv call."""

    def __init__(self, edge_weight=False):
        self.edge_weight = bool(edge_weight)
        self.ops = []
        self.weights = {}
        self.next = 0
        self.blocks = 0
        self.in_dim = None
        # Width of each value, to find the input width and check concat/add.
        self.cols = {}

    def op(self, op: str, cols: int, **fields) -> str:
        out = f"v{self.next}"
        self.next += 1
        self.ops.append({"op": op, **fields, "out": out})
        self.cols[out] = cols
        return out

    def weight(self, name: str, tensor) -> str:
        a = tensor.detach().to("cpu").float().contiguous().numpy()
        if name in self.weights:
            if not np.array_equal(self.weights[name], a):
                raise _unsupported(f"weight {name!r}", "two different tensors under one name")
            return name
        self.weights[name] = a
        return name

    def input_width(self, x: str, width: int, what: str):
        if x == "x":
            if width is None or width < 0:
                raise _unsupported(f"{what} with a lazy input width (-1)", "run the model once or give in_channels")
            if self.in_dim is not None and self.in_dim != width:
                raise _unsupported(f"{what}", f"it reads x as {width} columns, another layer as {self.in_dim}")
            self.in_dim = width
            self.cols["x"] = width
        elif self.cols.get(x) not in (None, width):
            raise _unsupported(what, f"it takes {width} columns, its input has {self.cols[x]}")

    def block(self) -> int:
        self.blocks += 1
        return self.blocks - 1

    # ---- leaves -----------------------------------------------------------

    def linear(self, m, x: str, prefix: str) -> str:
        w = m.weight
        self.input_width(x, w.shape[1], prefix or "Linear")
        fields = {"x": x, "weight": self.weight(f"{prefix}weight", w)}
        if m.bias is not None:
            fields["bias"] = self.weight(f"{prefix}bias", m.bias)
        return self.op("gemm", w.shape[0], **fields)

    def module(self, m, x: str, prefix: str, edge_index_ok=False) -> str:
        """One call_module leaf (or container) applied to x; `prefix` is its state_dict prefix with a dot."""
        torch = _torch()
        import torch_geometric.nn as gnn
        from torch_geometric.nn.dense.linear import Linear as PygLinear

        nn = torch.nn
        name = prefix.rstrip(".") or type(m).__name__
        if isinstance(m, (nn.Linear, PygLinear)):
            return self.linear(m, x, prefix)
        if isinstance(m, (nn.Dropout, nn.Identity)):
            return x
        if isinstance(m, nn.ReLU):
            return self.op("relu", self.cols[x], x=x)
        if isinstance(m, nn.LeakyReLU):
            return self.op("leaky_relu", self.cols[x], x=x, slope=float(m.negative_slope))
        if isinstance(m, nn.ELU):
            return self.op("elu", self.cols[x], x=x, alpha=float(m.alpha))
        if isinstance(m, nn.Sigmoid):
            return self.op("sigmoid", self.cols[x], x=x)
        if isinstance(m, nn.Tanh):
            return self.op("tanh", self.cols[x], x=x)
        if isinstance(m, nn.BatchNorm1d):
            if not m.affine or not m.track_running_stats:
                raise _unsupported(f"module {name!r} (BatchNorm1d without affine or running stats)")
            self.input_width(x, m.num_features, name)
            return self.op(
                "batch_norm",
                m.num_features,
                x=x,
                weight=self.weight(f"{prefix}weight", m.weight),
                bias=self.weight(f"{prefix}bias", m.bias),
                mean=self.weight(f"{prefix}running_mean", m.running_mean),
                var=self.weight(f"{prefix}running_var", m.running_var),
                eps=float(m.eps),
            )
        if isinstance(m, nn.Sequential):
            for k, child in m.named_children():
                x = self.module(child, x, f"{prefix}{k}.")
            return x
        if isinstance(m, gnn.MLP):
            return self.mlp(m, x, prefix)
        raise _unsupported(f"module {name!r} ({type(m).__module__}.{type(m).__qualname__})")

    def mlp(self, m, x: str, prefix: str) -> str:
        torch = _torch()
        name = prefix.rstrip(".")
        if any(not isinstance(n, torch.nn.Identity) for n in m.norms):
            raise _unsupported(f"module {name!r} (MLP with norms)")
        if m.act is not None and m.act_first:
            pass  # no norms: the activation's place relative to them does not matter
        n = len(m.lins)
        for i, lin in enumerate(m.lins):
            x = self.linear(lin, x, f"{prefix}lins.{i}.")
            if i + 1 < n or not m.plain_last:
                if m.act is not None:
                    x = self.module(m.act, x, f"{prefix}act.")
        return x

    # ---- convolutions -----------------------------------------------------

    def conv(self, m, x: str, prefix: str) -> str:
        import torch_geometric.nn as gnn

        name = prefix.rstrip(".") or type(m).__name__
        if isinstance(m, gnn.GCNConv):
            return self.gcn(m, x, prefix, name)
        if isinstance(m, gnn.SAGEConv):
            return self.sage(m, x, prefix, name)
        if isinstance(m, gnn.GINConv):
            return self.gin(m, x, prefix, name)
        if isinstance(m, gnn.GATConv):
            return self.gat(m, x, prefix, name)
        raise _unsupported(f"module {name!r} ({type(m).__module__}.{type(m).__qualname__})")

    def gcn(self, m, x, prefix, name):
        if not m.normalize or not m.add_self_loops or m.improved or m.aggr != "add":
            raise _unsupported(f"module {name!r} (GCNConv with normalize=False, add_self_loops=False, improved=True or aggr != 'add')")
        block = self.block()
        h = self.linear(m.lin, x, f"{prefix}lin.")
        cols = self.cols[h]
        h = self.op("spmm", cols, x=h, block=block, reduce="sum", norm="sym", self_loops="add", edge_weight=self.edge_weight)
        if m.bias is not None:
            h = self.op("add", cols, a=h, b=self.weight(f"{prefix}bias", m.bias))
        return h

    def sage(self, m, x, prefix, name):
        if m.aggr != "mean" or m.project or isinstance(m.in_channels, (tuple, list)) and m.in_channels[0] != m.in_channels[1]:
            raise _unsupported(f"module {name!r} (SAGEConv with aggr={m.aggr!r}, project={m.project}; only mean without project)")
        block = self.block()
        agg = self.op("spmm", self.cols.get(x, m.lin_l.weight.shape[1]), x=x, block=block, reduce="mean", norm="none", self_loops="none", edge_weight=False)
        self.input_width(x, m.lin_l.weight.shape[1], name)
        h = self.linear(m.lin_l, agg, f"{prefix}lin_l.")
        if m.root_weight:
            root = self.op("slice_dst", self.cols[x], x=x, block=block)
            h = self.op("add", self.cols[h], a=h, b=self.linear(m.lin_r, root, f"{prefix}lin_r."))
        if m.normalize:
            h = self.op("l2_norm", self.cols[h], x=h, eps=1e-12)
        return h

    def gin(self, m, x, prefix, name):
        if m.aggr != "add":
            raise _unsupported(f"module {name!r} (GINConv with aggr={m.aggr!r})")
        block = self.block()
        first = _first_width(m.nn)
        self.input_width(x, first, name)
        cols = self.cols.get(x, first)
        agg = self.op("spmm", cols, x=x, block=block, reduce="sum", norm="none", self_loops="none", edge_weight=False)
        root = self.op("slice_dst", cols, x=x, block=block)
        root = self.op("scale", cols, x=root, factor=float(1.0 + float(m.eps)))
        z = self.op("add", cols, a=agg, b=root)
        return self.module(m.nn, z, f"{prefix}nn.")

    def gat(self, m, x, prefix, name):
        if getattr(m, "lin", None) is None:
            raise _unsupported(f"module {name!r} (GATConv with separate source and destination widths)")
        if m.edge_dim is not None or not m.add_self_loops or getattr(m, "res", None) is not None:
            raise _unsupported(f"module {name!r} (GATConv with edge_dim, add_self_loops=False or residual=True)")
        heads, c = m.heads, m.out_channels
        block = self.block()
        h = self.linear(m.lin, x, f"{prefix}lin.")
        a_src = self.op("head_dot", heads, x=h, att=self.weight(f"{prefix}att_src", m.att_src), heads=heads)
        a_dst = self.op("head_dot", heads, x=h, att=self.weight(f"{prefix}att_dst", m.att_dst), heads=heads)
        e = self.op("sddmm", heads, src=a_src, dst=a_dst, block=block, self_loops="add", mode="add", heads=heads)
        e = self.op("leaky_relu", heads, x=e, slope=float(m.negative_slope))
        alpha = self.op("edge_softmax", heads, x=e, block=block, self_loops="add")
        out = self.op(
            "spmm", heads * c, x=h, block=block, reduce="sum", norm="none", self_loops="add", edge_weight=False, edge_values=alpha
        )
        if not m.concat:
            out = self.op("head_mean", c, x=out, heads=heads)
        if m.bias is not None:
            out = self.op("add", self.cols[out], a=out, b=self.weight(f"{prefix}bias", m.bias))
        return out

    # ---- whole models -----------------------------------------------------

    def basic_gnn(self, m) -> str:
        torch = _torch()
        if m.jk_mode is not None or getattr(m, "jk", None) is not None:
            raise _unsupported(f"{type(m).__name__} with jk={m.jk_mode!r}")
        if any(not isinstance(n, torch.nn.Identity) for n in m.norms):
            raise _unsupported(f"{type(m).__name__} with norm layers")
        x = "x"
        n = len(m.convs)
        for i, conv in enumerate(m.convs):
            x = self.conv(conv, x, f"convs.{i}.")
            if i + 1 < n and m.act is not None:
                x = self.module(m.act, x, "act.")
        return x

    def ngcf(self, m) -> str:
        self.input_width("x", m.in_dim, "NGCF")
        ego, parts = "x", ["x"]
        self.cols["x"] = m.in_dim
        for i, layer in enumerate(m.layers):
            p = f"layers.{i}."
            block = self.block()
            side = self.op("spmm", self.cols[ego], x=ego, block=block, reduce="sum", norm="sym", self_loops="none", edge_weight=False)
            root = self.op("slice_dst", self.cols[ego], x=ego, block=block)
            bi = self.op("mul", self.cols[ego], a=root, b=side)
            s = self.linear(layer.W_gc, side, f"{p}W_gc.")
            s = self.op("leaky_relu", self.cols[s], x=s, slope=0.2)
            b = self.linear(layer.W_bi, bi, f"{p}W_bi.")
            b = self.op("leaky_relu", self.cols[b], x=b, slope=0.2)
            ego = self.op("add", self.cols[s], a=s, b=b)
            parts.append(self.op("l2_norm", self.cols[ego], x=ego, eps=1e-12))
        return self.op("concat", sum(self.cols[p] for p in parts), xs=parts)

    def traced(self, model) -> str:
        torch = _torch()
        import torch_geometric.nn as gnn
        from torch_geometric.nn.conv import MessagePassing
        from torch_geometric.nn.fx import symbolic_trace

        try:
            gm = symbolic_trace(model)
        except Exception as e:  # noqa: BLE001 (any tracing failure is reported as unsupported)
            raise _unsupported(f"model {type(model).__name__}", f"torch_geometric.nn.fx.symbolic_trace failed: {e}") from e
        F = torch.nn.functional
        env = {}
        placeholders = []
        out = None
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                placeholders.append(node)
                if len(placeholders) == 1:
                    env[node.name] = "x"
                elif len(placeholders) == 2:
                    env[node.name] = _EDGE_INDEX
                elif not node.args:
                    raise _unsupported(f"forward argument {node.target!r}", "forward takes (x, edge_index) and arguments with defaults")
                else:
                    env[node.name] = node.args[0]
                continue
            if node.op == "output":
                out = _arg(env, node.args[0])
                continue
            args = [_arg(env, a) for a in node.args]
            kwargs = {k: _arg(env, v) for k, v in node.kwargs.items()}
            if node.op == "call_module":
                m = gm.get_submodule(node.target)
                prefix = f"{node.target}."
                if isinstance(m, MessagePassing):
                    if len(args) < 2 or args[1] is not _EDGE_INDEX or any(v is not None for v in list(args[2:]) + list(kwargs.values())):
                        raise _unsupported(f"call of {node.target!r}", "a conv takes (x, edge_index) only")
                    env[node.name] = self.conv(m, _value(args[0], node), prefix)
                elif isinstance(m, gnn.MLP):
                    env[node.name] = self.mlp(m, _value(args[0], node), prefix)
                else:
                    env[node.name] = self.module(m, _value(args[0], node), prefix)
            elif node.op in ("call_function", "call_method"):
                env[node.name] = self.function(node, args, kwargs, F, torch)
            else:
                raise _unsupported(f"{node.op} {node.target!r}")
        if not isinstance(out, str) or out is _EDGE_INDEX:
            raise _unsupported("the model's output", "forward returns one node tensor")
        return out

    def function(self, node, args, kwargs, F, torch):
        t = node.target
        name = t if isinstance(t, str) else getattr(t, "__name__", repr(t))

        def unary(op, **fields):
            x = _value(args[0], node)
            return self.op(op, self.cols[x], x=x, **fields)

        def opt(key, pos, default):
            if key in kwargs:
                return kwargs[key]
            return args[pos] if len(args) > pos else default

        if t in (F.relu, torch.relu, "relu"):
            return unary("relu")
        if t in (F.elu, "elu"):
            return unary("elu", alpha=float(opt("alpha", 1, 1.0)))
        if t in (F.leaky_relu, "leaky_relu"):
            return unary("leaky_relu", slope=float(opt("negative_slope", 1, 0.01)))
        if t in (torch.sigmoid, F.sigmoid, "sigmoid"):
            return unary("sigmoid")
        if t in (torch.tanh, F.tanh, "tanh"):
            return unary("tanh")
        if t in (F.dropout,):
            return _value(args[0], node)
        if t in (F.normalize,):
            if float(opt("p", 1, 2.0)) != 2.0 or opt("dim", 2, 1) not in (1, -1):
                raise _unsupported(f"function {name!r}", "only p=2 over the last dimension")
            return unary("l2_norm", eps=float(opt("eps", 3, 1e-12)))
        if t in (torch.cat, torch.concat):
            xs = args[0] if args else kwargs.get("tensors")
            if opt("dim", 1, 0) not in (1, -1):
                raise _unsupported(f"function {name!r}", "only concatenation of columns (dim=1 or -1)")
            xs = [_value(x, node) for x in xs]
            return self.op("concat", sum(self.cols[x] for x in xs), xs=xs)
        if t in (operator.add, torch.add, "add", operator.mul, torch.mul, "mul"):
            mul = t in (operator.mul, torch.mul, "mul")
            a, b = args[0], args[1]
            if isinstance(a, (int, float)):
                a, b = b, a
            a = _value(a, node)
            if isinstance(b, (int, float)):
                if mul:
                    return self.op("scale", self.cols[a], x=a, factor=float(b))
                raise _unsupported(f"function {name!r}", "adding a constant")
            b = _value(b, node)
            if self.cols[a] != self.cols[b]:
                raise _unsupported(f"function {name!r}", f"operands of {self.cols[a]} and {self.cols[b]} columns")
            return self.op("mul" if mul else "add", self.cols[a], a=a, b=b)
        raise _unsupported(f"{node.op} {name!r}")

    def dfg(self, name: str, output: str) -> dict:
        if self.blocks == 0:
            raise _unsupported(f"model {name!r}", "it has no graph convolution")
        if self.in_dim is None:
            raise _unsupported(f"model {name!r}", "its input width is unknown")
        return {
            "format": FORMAT,
            "version": VERSION,
            "name": name,
            "blocks": self.blocks,
            "inputs": [{"name": "x", "cols": self.in_dim}],
            "weights": {k: list(v.shape) for k, v in sorted(self.weights.items())},
            "ops": self.ops,
            "output": output,
        }


class _EdgeIndex:
    def __repr__(self):
        return "edge_index"


_EDGE_INDEX = _EdgeIndex()


def _arg(env, a):
    from torch.fx import Node

    if isinstance(a, Node):
        return env[a.name]
    if isinstance(a, (list, tuple)):
        return type(a)(_arg(env, x) for x in a)
    return a


def _value(a, node):
    if not isinstance(a, str):
        raise _unsupported(f"{node.op} {node.target!r}", f"its input {a!r} is not a node tensor")
    return a


def _first_width(m):
    """The input width of the first Linear in a GIN `nn`."""
    torch = _torch()
    from torch_geometric.nn.dense.linear import Linear as PygLinear

    for sub in m.modules():
        if isinstance(sub, (torch.nn.Linear, PygLinear)):
            return sub.weight.shape[1]
    raise _unsupported(f"GINConv nn {type(m).__name__}", "it has no Linear")


def _write_safetensors(path: Path, weights: dict):
    """safetensors by hand (8-byte header length, JSON header, raw little-endian f32),
    which keeps the exporter free of the safetensors package."""
    header, blobs, offset = {}, [], 0
    for name in sorted(weights):
        a = np.ascontiguousarray(weights[name], dtype="<f4")
        b = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def export(model, path, name: str | None = None, edge_weight: bool = False) -> InferModel:
    """Writes `model` (see the module docs for what is supported) as a model
    directory at `path` (model.json + weights.safetensors) and returns it
    loaded, which checks it. Dropout is dropped and batch norm uses its
    running statistics: the export is of the model in eval mode.
    `edge_weight=True`: every GCNConv weighs edges by the store's edge
    weights (the model's `forward(x, edge_index, edge_weight)`; the store
    must be imported with weights).
    Raises InvalidArgumentError naming the first unsupported module or function."""
    from torch_geometric.nn.models.basic_gnn import BasicGNN

    torch = _torch()
    if not isinstance(model, torch.nn.Module):
        raise InvalidArgumentError(f"solidgraph.infer.export takes a torch.nn.Module, not {type(model).__name__}")
    em = _Emitter(edge_weight)
    with torch.no_grad():
        if isinstance(model, BasicGNN):
            out = em.basic_gnn(model)
        elif isinstance(model, __getattr__("NGCF")):
            out = em.ngcf(model)
        else:
            out = em.traced(model)
    dfg = em.dfg(name or type(model).__name__.lower(), out)
    bad = [k for k, v in em.weights.items() if not np.all(np.isfinite(v))]
    if bad:
        raise InvalidArgumentError(f"solidgraph.infer.export: weight {bad[0]!r} holds NaN or inf")
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    _write_safetensors(path / "weights.safetensors", em.weights)
    (path / "model.json").write_text(json.dumps(dfg, indent=1) + "\n")
    return load(path)
