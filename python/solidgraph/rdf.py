"""SolidGraph's RDF store, with pyoxigraph's API: code written for
pyoxigraph switches by changing its import.

    from solidgraph.rdf import Store, RdfFormat, NamedNode
    store = Store("lubm.rdf")
    store.bulk_load(path="lubm.nt", format=RdfFormat.N_TRIPLES)
    for solution in store.query("SELECT ?s WHERE { ?s a <http://example.org/C> }"):
        print(solution["s"])

`Store(path)` opens (or, on its first load or update, creates) the store
directory at `path`. `bulk_load` into a new store is the external-memory
loader; into an existing one it is `load`, one durable update. `query`
returns `QuerySolutions` (iterate; `solution["s"]`, `.variables`),
`QueryBoolean` (`bool(result)`) or `QueryTriples`, each with
`.serialize(format=...)`; results are streamed from the store in batches
with the GIL released. `update` runs SPARQL Update, durable when it returns.

Differences from pyoxigraph: a store always has a path (no in-memory
store); `Store(path, read_only=True)` replaces `Store.read_only(path)`;
queries take `timeout` (seconds) and `result_limit`; bad syntax raises
`RdfSyntaxError` (a SyntaxError, with `lineno` and `offset`), a timeout
`QueryTimeoutError` (a TimeoutError); other errors are solidgraph's
classes (`InvalidArgumentError` is a ValueError, `SolidGraphIOError` an
OSError).
"""

from solidgraph._native import (
    BlankNode,
    DefaultGraph,
    RdfLiteral as Literal,
    NamedNode,
    QuadIter,
    Quad,
    QueryBoolean,
    QueryResultsFormat,
    QuerySolution,
    QuerySolutions,
    QueryTriples,
    RdfFormat,
    SolidGraphError,
    Triple,
    Variable,
    rdf_error_classes,
)
from solidgraph._native import RdfStore as Store

RdfSyntaxError, QueryTimeoutError = rdf_error_classes()

__all__ = [
    "BlankNode",
    "DefaultGraph",
    "Literal",
    "NamedNode",
    "Quad",
    "QuadIter",
    "QueryBoolean",
    "QueryResultsFormat",
    "QuerySolution",
    "QuerySolutions",
    "QueryTimeoutError",
    "QueryTriples",
    "RdfFormat",
    "RdfSyntaxError",
    "SolidGraphError",
    "Store",
    "Triple",
    "Variable",
]
