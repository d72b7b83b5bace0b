"""SolidGraph: a graph engine native to solid-state storage.

Graphs, edge weights and labels, and node tensors live on SSD pages; the
graph work (neighbor reads, sampling, analytics) runs in the Rust engine and
only results cross into Python, as numpy arrays.

    report = solidgraph.import_graph("cora.sg", edges, {"x": features}, undirected=True)
    g = solidgraph.open("cora.sg")
    indptr, indices = g.neighbors([0, 1, 2])
    x = g.tensor("x", indices)
"""

from solidgraph._native import Graph, SolidGraphError, __version__, bench_io, import_graph, open

__all__ = ["Graph", "SolidGraphError", "__version__", "bench_io", "import_graph", "open"]
