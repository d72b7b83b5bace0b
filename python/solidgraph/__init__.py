"""SolidGraph: a graph engine native to solid-state storage.

Graphs, edge weights and labels, and node tensors live on SSD pages; the
graph work (neighbor reads, sampling, analytics) runs in the Rust engine and
only results cross into Python, as numpy arrays.
"""

from solidgraph._native import SolidGraphError, __version__, bench_io

__all__ = ["SolidGraphError", "__version__", "bench_io"]
