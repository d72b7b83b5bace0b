"""solidgraph.rdf against pyoxigraph: the same random graphs, basic graph
patterns, property paths and updates give the same results (as multisets)
in both, through bulk loads, incremental loads, updates and reopening; and
bad input (data and query syntax, unknown prefixes) raises a SyntaxError
naming line and column and leaves the store's files as they were.

Both stores are driven through the same pyoxigraph-shaped calls. Blank
node labels differ between stores, so results compare with every blank
node written as `_:`.
"""

from __future__ import annotations

import gc
import hashlib
import os
import random
from collections import Counter

import pytest

ox = pytest.importorskip("pyoxigraph")
sg = pytest.importorskip("solidgraph.rdf")

EX = "http://ex.org/"
XSD = "http://www.w3.org/2001/XMLSchema#"
NODES = [f"<{EX}n{i}>" for i in range(10)] + ["_:b0", "_:b1", "_:b2"]
PREDS = [f"<{EX}p{i}>" for i in range(4)]
# Literals of every kind. Only canonical lexical forms: pyoxigraph stores
# numbers and booleans by value and writes "01"^^xsd:integer back as "1";
# test_non_canonical_forms_stay_distinct checks those on our store alone.
LITERALS = [
    '"a"', '"b"', '"a"@en', '"a"@fr', '"a b\\n\\"c\\""', '"é"',
    f'"1"^^<{XSD}integer>', f'"-7"^^<{XSD}integer>', f'"0"^^<{XSD}integer>',
    f'"123456789012345678901234567890"^^<{XSD}integer>', f'"abc"^^<{XSD}integer>',
    f'"1.5"^^<{XSD}decimal>', f'"true"^^<{XSD}boolean>', f'"false"^^<{XSD}boolean>',
    f'"2020-01-31"^^<{XSD}date>', f'"2020-01-31T10:00:00Z"^^<{XSD}dateTime>',
    f'"a"^^<{XSD}string>', f'"x"^^<{EX}dt>',
]
OBJECTS = NODES + LITERALS


def random_triples(rng: random.Random, n: int) -> list[str]:
    out = set()
    while len(out) < n:
        s = rng.choice(NODES)
        p = rng.choice(PREDS[:3] if rng.random() < 0.8 else PREDS)
        o = rng.choice(NODES if rng.random() < 0.6 else LITERALS)
        out.add(f"{s} {p} {o} .")
    return sorted(out)


def write_nt(path, triples: list[str]) -> str:
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(triples) + "\n")
    return str(path)


def norm(term) -> str | None:
    if term is None:
        return None
    s = str(term)
    return "_:" if s.startswith("_:") else s


def rows(store, query: str):
    """The query's answer as something comparable: a Counter of rows, a bool, or a Counter of triples."""
    return rows_with(store, query)


def rows_with(store, query: str, **options):
    """`rows` with query options (the same keywords in both libraries)."""
    r = store.query(query, **options)
    if isinstance(r, bool) or type(r).__name__ == "QueryBoolean":
        return bool(r)
    if hasattr(r, "variables"):
        names = [v.value for v in r.variables]
        return Counter(tuple(norm(sol[n]) for n in names) for sol in r)
    return Counter((norm(t.subject), norm(t.predicate), norm(t.object)) for t in r)


def quads(it) -> Counter:
    return Counter((norm(q.subject), norm(q.predicate), norm(q.object), norm(q.graph_name)) for q in it)


def all_quads(store) -> Counter:
    return quads(store.quads_for_pattern(None, None, None, None))


def same(a, b, query: str) -> None:
    ra, rb = rows(a, query), rows(b, query)
    assert ra == rb, f"answers differ for\n{query}\n  pyoxigraph only: {ra - rb if isinstance(ra, Counter) else ra}\n" \
        f"  solidgraph only: {rb - ra if isinstance(rb, Counter) else rb}"


def files_digest(path) -> dict:
    out = {}
    for root, _, files in os.walk(path):
        for f in files:
            if f.endswith(".lock"):
                continue
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, path)] = hashlib.sha256(fh.read()).hexdigest()
    return out


# ------------------------------------------------------------ query builders

VARS = ["?a", "?b", "?c", "?d"]


def random_bgp(rng: random.Random) -> str:
    """1-4 patterns, each after the first joined to the earlier ones by a
    variable (no cross products, whose size would only test the printer)."""
    pats: list[str] = []
    used: set[str] = set()
    for _ in range(rng.randint(1, 4)):
        s = rng.choice(VARS[:3]) if rng.random() < 0.8 else rng.choice(NODES[:10])
        p = rng.choice(PREDS) if rng.random() < 0.75 else "?p" + str(rng.randint(0, 1))
        o = rng.choice(VARS) if rng.random() < 0.7 else rng.choice(OBJECTS[:10] + LITERALS)
        if used and not used & {s, o}:
            s = rng.choice(sorted(used))
        used |= {x for x in (s, o) if x.startswith("?")}
        pats.append(f"{s} {p} {o} .")
    filt = rng.choice(["", "", "FILTER(isLiteral(?b))", "FILTER(?b = 1)", "FILTER(sameTerm(?b, 1))",
                       "FILTER(?b > 0)", 'FILTER(lang(?b) = "en")', "FILTER(!sameTerm(?a, ?c))",
                       "FILTER(?a != ?c)", f'FILTER(datatype(?b) = <{XSD}integer>)', "FILTER(!BOUND(?d))"])
    return "SELECT * WHERE { " + " ".join(pats) + " " + filt + " }"


def random_atom(rng: random.Random) -> str:
    p = rng.choice(PREDS[:3])
    return "^" + p if rng.random() < 0.25 else p


def random_path(rng: random.Random, depth: int = 0) -> str:
    """A path of atoms, sequences, alternatives and closures; a closure
    applies to an atom or an alternative of atoms, which keeps every query
    to milliseconds on a graph of this size."""
    if depth > 2 or rng.random() < 0.35:
        return random_atom(rng)
    op = rng.choice(["/", "|", "+", "*", "?"])
    if op in "/|":
        return f"({random_path(rng, depth + 1)}{op}{random_path(rng, depth + 1)})"
    inner = random_atom(rng) if rng.random() < 0.6 else f"{random_atom(rng)}|{random_atom(rng)}"
    return f"({inner}){op}"


def random_path_query(rng: random.Random) -> str:
    path = random_path(rng)
    start = rng.choice(["?x", "?x", rng.choice(NODES[:10])])
    end = rng.choice(["?y", "?y", rng.choice(NODES[:10])])
    if start == "?x" and end == "?y" and "*" not in path and "?" not in path:
        return f"SELECT ?x ?y WHERE {{ ?x {path} ?y }}"
    if start == "?x" and end == "?y":
        start = NODES[rng.randrange(10)]
    if start != "?x" and end != "?y":
        return f"ASK {{ {start} {path} {end} }}"
    return f"SELECT * WHERE {{ {start} {path} {end} }}"


def random_update(rng: random.Random) -> str:
    def data(k, blank=True):
        return " ".join(t for t in random_triples(rng, k) if blank or "_:" not in t)

    p, q = rng.sample(PREDS, 2)
    return rng.choice([
        f"INSERT DATA {{ {data(rng.randint(1, 6))} }}",
        f"DELETE DATA {{ {data(rng.randint(1, 6), blank=False)} }}",
        f"DELETE {{ ?s {p} ?o }} INSERT {{ ?o {q} ?s }} WHERE {{ ?s {p} ?o . FILTER(!isLiteral(?o)) }}",
        f"DELETE WHERE {{ ?s {p} {rng.choice(NODES[:10])} }}",
        f"INSERT {{ ?s {q} ?o }} WHERE {{ ?s {p}/{p} ?o }}",
        f"INSERT DATA {{ GRAPH <{EX}g{rng.randint(0, 1)}> {{ {data(3)} }} }}",
        f"DELETE {{ GRAPH ?g {{ ?s ?p ?o }} }} WHERE {{ GRAPH ?g {{ ?s ?p ?o . FILTER(?p = {p}) }} }}",
    ])


# ------------------------------------------------------------------- fixtures


class Pair:
    """A pyoxigraph store (a) and a SolidGraph store (b) holding the same
    random graph; `b` may be dropped and reopened."""

    def __init__(self, path):
        self.path = path
        nt = write_nt(path / "g.nt", random_triples(random.Random(7), 300))
        self.a = ox.Store(str(path / "ox"))
        self.a.bulk_load(path=nt, format=ox.RdfFormat.N_TRIPLES)
        self.b = sg.Store(str(path / "sg"))
        self.b.bulk_load(path=nt, format=sg.RdfFormat.N_TRIPLES)

    def __iter__(self):
        return iter((self.a, self.b, self.path))


@pytest.fixture
def pair(tmp_path):
    return Pair(tmp_path)


# ---------------------------------------------------------------------- tests


def test_terms_and_solutions_api(pair):
    _, b, _ = pair
    r = b.query(f"SELECT ?s ?o WHERE {{ ?s <{EX}p0> ?o }} ORDER BY ?s ?o LIMIT 3")
    assert [v.value for v in r.variables] == ["s", "o"]
    sols = list(r)
    assert len(sols) == 3
    for s in sols:
        assert isinstance(s["s"], (sg.NamedNode, sg.BlankNode))
        assert s["o"] == s[1]
    lit = sg.Literal("01", datatype=sg.NamedNode(f"{XSD}integer"))
    assert lit.value == "01" and lit.datatype.value == f"{XSD}integer" and lit.language is None
    assert str(lit) == f'"01"^^<{XSD}integer>'
    en = sg.Literal("a", language="en")
    assert en.language == "en" and en.datatype.value.endswith("langString")
    assert sg.NamedNode(f"{EX}n1") == sg.NamedNode(f"{EX}n1")
    assert hash(sg.NamedNode(f"{EX}n1")) == hash(sg.NamedNode(f"{EX}n1"))
    assert bool(b.query(f"ASK {{ ?s <{EX}p0> ?o }}")) is True


def test_bulk_load_same_quads(pair):
    a, b, _ = pair
    assert len(a) == len(b)
    assert all_quads(a) == all_quads(b)
    n1 = sg.NamedNode(f"{EX}n1")
    assert quads(a.quads_for_pattern(ox.NamedNode(f"{EX}n1"), None, None, None)) == quads(
        b.quads_for_pattern(n1, None, None, None))
    p0 = sg.NamedNode(f"{EX}p0")
    assert quads(a.quads_for_pattern(None, ox.NamedNode(f"{EX}p0"), None, None)) == quads(
        b.quads_for_pattern(None, p0, None, None))
    one = sg.Literal("1", datatype=sg.NamedNode(f"{XSD}integer"))
    assert quads(a.quads_for_pattern(None, None, ox.Literal("1", datatype=ox.NamedNode(f"{XSD}integer")), None)) \
        == quads(b.quads_for_pattern(None, None, one, None))


def test_random_basic_graph_patterns(pair):
    a, b, _ = pair
    rng = random.Random(11)
    for _ in range(150):
        same(a, b, random_bgp(rng))


def test_random_property_paths(pair):
    a, b, _ = pair
    rng = random.Random(12)
    for _ in range(120):
        same(a, b, random_path_query(rng))


def test_fixed_queries(pair):
    a, b, _ = pair
    for q in [
        f"SELECT ?s (COUNT(*) AS ?n) WHERE {{ ?s <{EX}p1> ?o }} GROUP BY ?s",
        f"SELECT DISTINCT ?o WHERE {{ ?s ?p ?o FILTER(isNumeric(?o)) }}",
        f"SELECT ?s ?o WHERE {{ ?s <{EX}p0> ?o OPTIONAL {{ ?o <{EX}p1> ?z }} }}",
        f"SELECT ?x WHERE {{ {{ ?x <{EX}p0> ?y }} UNION {{ ?y <{EX}p2> ?x }} }}",
        f"SELECT ?x WHERE {{ ?x <{EX}p0> ?y MINUS {{ ?x <{EX}p1> ?z }} }}",
        f"SELECT ?x ?v WHERE {{ ?x <{EX}p1> ?o BIND(STR(?o) AS ?v) }}",
        f"SELECT ?x WHERE {{ VALUES ?x {{ <{EX}n1> <{EX}n2> 1 }} ?x ?p ?o }}",
        f"SELECT ?o WHERE {{ ?s ?p ?o FILTER(?o = 1) }}",
        f"SELECT ?o WHERE {{ ?s ?p ?o FILTER(sameTerm(?o, 1)) }}",
        f"SELECT ?o WHERE {{ ?s ?p ?o FILTER(?o = \"2020-01-31\"^^<{XSD}date>) }}",
        f"CONSTRUCT {{ ?o <{EX}inv> ?s }} WHERE {{ ?s <{EX}p2> ?o }}",
        f"ASK {{ <{EX}n0> (<{EX}p0>|<{EX}p1>)+ <{EX}n9> }}",
        "SELECT * WHERE { ?s ?p ?o }",
    ]:
        same(a, b, q)


def test_union_default_graph_is_every_graph(pair):
    """pyoxigraph's `use_default_graph_as_union`: the default graph is the
    union of every graph, the store's default graph included; `GRAPH ?g`
    still sees named graphs only, and a triple in two graphs counts twice."""
    a, b, _ = pair
    for store in (a, b):
        store.update(f"INSERT DATA {{ GRAPH <{EX}g1> {{ <{EX}n1> <{EX}p0> <{EX}n2> . <{EX}u> <{EX}p9> <{EX}v> }} "
                     f"GRAPH <{EX}g2> {{ <{EX}v> <{EX}p9> <{EX}w> }} }}")
        store.update(f"INSERT DATA {{ <{EX}w> <{EX}p9> <{EX}x> . <{EX}u> <{EX}p9> <{EX}v> }}")
    for q in [
        "SELECT * WHERE { ?s ?p ?o }",
        f"SELECT ?s ?o WHERE {{ ?s <{EX}p9> ?o }}",
        f"SELECT ?g ?s WHERE {{ GRAPH ?g {{ ?s <{EX}p9> ?o }} }}",
        f"SELECT ?o WHERE {{ <{EX}u> <{EX}p9>+ ?o }}",
        f"SELECT (COUNT(*) AS ?n) WHERE {{ ?s <{EX}p0> ?o }}",
        f"ASK {{ <{EX}w> <{EX}p9> <{EX}x> }}",
    ]:
        ra = rows_with(a, q, use_default_graph_as_union=True)
        rb = rows_with(b, q, use_default_graph_as_union=True)
        assert ra == rb, f"answers differ for\n{q}\n  pyoxigraph: {ra}\n  solidgraph: {rb}"
    assert rows_with(b, f"SELECT ?o WHERE {{ <{EX}w> <{EX}p9> ?o }}", use_default_graph_as_union=True) \
        == Counter({(f"<{EX}x>",): 1})
    # A FROM clause names the query's dataset (SPARQL 1.1, 13.2) and wins
    # over the option; pyoxigraph 0.5 lets the option replace it.
    assert rows_with(b, f"SELECT ?o FROM <{EX}g2> WHERE {{ ?s <{EX}p9> ?o }}", use_default_graph_as_union=True) \
        == Counter({(f"<{EX}w>",): 1})


def test_updates_loads_and_reopen(pair):
    a, b, path = pair
    del pair.b
    rng = random.Random(13)
    for i in range(40):
        u = random_update(rng)
        a.update(u)
        b.update(u)
        assert all_quads(a) == all_quads(b), f"after update {i}: {u}"
        if i % 10 == 0:
            for _ in range(3):
                same(a, b, random_bgp(rng))
                same(a, b, random_path_query(rng))
    extra = write_nt(path / "extra.nt", random_triples(random.Random(99), 50))
    a.load(path=extra, format=ox.RdfFormat.N_TRIPLES)
    b.load(path=extra, format=sg.RdfFormat.N_TRIPLES)
    assert all_quads(a) == all_quads(b)
    expected = all_quads(a)
    del b
    gc.collect()
    b = sg.Store(str(path / "sg"))
    assert all_quads(b) == expected
    for _ in range(12):
        same(a, b, random_bgp(rng))
        same(a, b, random_path_query(rng))
    same(a, b, "SELECT ?g (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } } GROUP BY ?g")


def test_results_serialize(pair):
    a, b, _ = pair
    import csv
    import io
    import json

    q = f"SELECT ?s ?o WHERE {{ ?s <{EX}p1> ?o }}"
    j = json.loads(b.query(q).serialize(format=sg.QueryResultsFormat.JSON))
    assert j["head"]["vars"] == ["s", "o"]
    assert len(j["results"]["bindings"]) == sum(rows(a, q).values())
    text = b.query(q).serialize(format=sg.QueryResultsFormat.CSV).decode()
    assert len(list(csv.reader(io.StringIO(text)))) == 1 + sum(rows(a, q).values())
    assert b"<boolean>true</boolean>" in b.query(f"ASK {{ ?s <{EX}p1> ?o }}").serialize(format=sg.QueryResultsFormat.XML)
    nt = b.query(f"CONSTRUCT {{ ?s <{EX}q> ?o }} WHERE {{ ?s <{EX}p1> ?o }}").serialize(format=sg.RdfFormat.N_TRIPLES)
    assert nt.decode().count(f"<{EX}q>") == sum(rows(a, q).values())


def test_bad_data_syntax_changes_nothing(pair, tmp_path):
    _, b, path = pair
    before_len, before = len(b), files_digest(path / "sg")
    bad = path / "bad.nt"
    bad.write_text(f"<{EX}x> <{EX}p0> <{EX}y> .\n<{EX}x> <{EX}p0> <{EX}y> .\n<{EX}x> <{EX}p0> oops .\n")
    with pytest.raises(SyntaxError) as ei:
        b.load(path=str(bad), format=sg.RdfFormat.N_TRIPLES)
    assert isinstance(ei.value, sg.SolidGraphError)
    assert ei.value.lineno == 3 and ei.value.offset is not None
    assert "3" in str(ei.value)
    assert len(b) == before_len and files_digest(path / "sg") == before
    # A bulk load into a new store leaves no store behind.
    with pytest.raises(SyntaxError):
        sg.Store(str(tmp_path / "fresh")).bulk_load(path=str(bad), format=sg.RdfFormat.N_TRIPLES)


def test_bad_queries_and_updates_change_nothing(pair):
    _, b, path = pair
    before_len, before = len(b), files_digest(path / "sg")
    for q in ["SELECT * WHERE { ?s foo:bar ?o }", "SELECT * WHERE { ?s ?p }", "ASK { <a> "]:
        with pytest.raises(SyntaxError):
            b.query(q)
    for u in ["INSERT DATA { foo:x foo:y foo:z }", f"INSERT DATA {{ <{EX}a> <{EX}b> }}",
              f"INSERT DATA {{ <{EX}a> <{EX}b> <{EX}c> }} ; DELETE WHERE {{ ?x unknown:p ?y }}"]:
        with pytest.raises(SyntaxError):
            b.update(u)
    assert len(b) == before_len and files_digest(path / "sg") == before
    with pytest.raises(ValueError):
        sg.NamedNode("not an iri")


def test_non_canonical_forms_stay_distinct(tmp_path):
    """Terms equal by value but not by lexical form are different terms:
    each is stored and returned as written, `=` matches all of them,
    sameTerm only itself."""
    forms = ['"1"', '"01"', '"+1"', '"1.0"']
    nt = write_nt(tmp_path / "n.nt", [f"<{EX}s> <{EX}p> {f}^^<{XSD}integer> ." for f in forms]
                  + [f'<{EX}s> <{EX}q> "1"^^<{XSD}boolean> .', f'<{EX}s> <{EX}q> "true"^^<{XSD}boolean> .'])
    b = sg.Store(str(tmp_path / "sg"))
    b.bulk_load(path=nt, format=sg.RdfFormat.N_TRIPLES)
    assert len(b) == 6
    got = sorted(str(s["o"]) for s in b.query(f"SELECT ?o WHERE {{ <{EX}s> <{EX}p> ?o }}"))
    assert got == sorted(f"{f}^^<{XSD}integer>" for f in forms)
    assert sum(1 for _ in b.query(f"SELECT ?o WHERE {{ <{EX}s> <{EX}p> ?o FILTER(?o = 1) }}")) == 3
    assert sum(1 for _ in b.query(f"SELECT ?o WHERE {{ <{EX}s> <{EX}p> ?o FILTER(sameTerm(?o, 1)) }}")) == 1
    assert sum(1 for _ in b.query(f"SELECT ?o WHERE {{ <{EX}s> <{EX}q> ?o FILTER(?o = true) }}")) == 2
    b.update(f'DELETE DATA {{ <{EX}s> <{EX}p> "01"^^<{XSD}integer> }}')
    assert len(b) == 5
    assert f'"01"^^<{XSD}integer>' not in {str(q.object) for q in b.quads_for_pattern(None, None, None, None)}


def test_input_quads_and_read_only(tmp_path):
    """`input=` data in Turtle and TriG, add/remove/in, and a read-only open."""
    ttl = f"@prefix ex: <{EX}> .\nex:a ex:p ex:b, ex:c ; ex:q \"x\"@en .\n"
    trig = f"@prefix ex: <{EX}> .\nex:g {{ ex:a ex:p ex:d }}\n"
    a, b = ox.Store(), sg.Store(str(tmp_path / "sg"))
    for s, m in ((a, ox), (b, sg)):
        s.load(input=ttl.encode(), format=m.RdfFormat.TURTLE)
        s.load(input=trig, format=m.RdfFormat.TRIG)
    assert all_quads(a) == all_quads(b) and len(b) == 4
    q = sg.Quad(sg.NamedNode(f"{EX}a"), sg.NamedNode(f"{EX}p"), sg.NamedNode(f"{EX}z"), sg.NamedNode(f"{EX}g"))
    assert q not in b
    b.add(q)
    assert q in b and len(b) == 5
    b.remove(q)
    assert q not in b and len(b) == 4
    same(a, b, "SELECT ?g ?s WHERE { GRAPH ?g { ?s ?p ?o } }")
    del b
    gc.collect()
    r = sg.Store(str(tmp_path / "sg"), read_only=True)
    assert all_quads(r) == all_quads(a)
    with pytest.raises(ValueError):
        r.update(f"INSERT DATA {{ <{EX}a> <{EX}p> <{EX}e> }}")
    assert len(r) == 4


def test_date_inequality(tmp_path):
    # xsd:date is a known type (spareval's sep-0002), so `!=` against a non-date is true, not an error.
    data = f'<{EX}s> <{EX}p> "2020-01-31"^^<{XSD}date>, "a", "0"^^<{XSD}integer> .\n'
    a, b = ox.Store(), sg.Store(str(tmp_path / "sg"))
    a.load(input=data, format=ox.RdfFormat.TURTLE)
    b.load(input=data, format=sg.RdfFormat.TURTLE)
    same(a, b, f'SELECT ?o WHERE {{ ?s ?p ?o FILTER(?o != "2020-01-31"^^<{XSD}date>) }}')
