"""The `solidgraph` console script that installing the package puts on PATH
(`make develop`, `pip install .`): the Rust command run by the extension
(python/solidgraph/cli.py), with the binary's output and exit codes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import solidgraph

# Installers write console scripts beside the interpreter (.venv/bin).
SCRIPT = Path(sys.executable).parent / "solidgraph"


def sg(*args, **kw):
    return subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=120, **kw)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "g.sg"
    src, dst = np.array([0, 0, 1, 2, 3]), np.array([1, 2, 2, 3, 4])
    solidgraph.import_graph(path, (src, dst), {"x": np.eye(5, dtype=np.float32)}, num_nodes=5)
    return path


def test_script_is_installed():
    assert SCRIPT.is_file(), f"{SCRIPT} is missing: build the package with `make develop` or `pip install .`"


def test_help_and_version():
    p = sg("--help")
    assert p.returncode == 0, p.stderr
    assert "Usage: solidgraph" in p.stdout
    for cmd in ("import", "info", "verify", "neighbors", "apply", "merge", "run", "infer"):
        assert f"\n  {cmd} " in p.stdout, cmd
    p = sg("--version")
    assert p.returncode == 0 and p.stdout.strip() == f"solidgraph {solidgraph.__version__}"


def test_info_and_queries_on_a_store_imported_from_python(store):
    p = sg("info", store, "--json")
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)
    assert (info["num_nodes"], info["num_edges"]) == (5, 5)
    p = sg("info", store)
    assert p.returncode == 0 and p.stdout.strip(), p.stderr
    p = sg("neighbors", store, "--ids", "0,2")
    assert p.returncode == 0 and p.stdout.splitlines() == ["0: 1 2", "2: 3"], p.stdout
    # A BufWriter on stdout and no newline-flush at the end: every line arrives.
    p = sg("run", "bfs", store, "--source", "0")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["0 0", "1 1", "2 1", "3 2", "4 3"]
    assert sg("verify", store).stdout.startswith("ok:")


def test_import_from_the_shell(tmp_path):
    edges = tmp_path / "e.txt"
    edges.write_text("0 1\n1 2\n")
    p = sg("import", tmp_path / "s.sg", "--edges", edges, "--undirected")
    assert p.returncode == 0, p.stderr
    g = solidgraph.open(tmp_path / "s.sg")
    assert (g.num_nodes, g.num_edges) == (3, 4)


def test_exit_codes(tmp_path):
    p = sg("info", tmp_path / "nosuch.sg")
    assert p.returncode == 1 and p.stderr.startswith("error: ") and "nosuch.sg" in p.stderr
    p = sg("frobnicate")
    assert p.returncode == 2 and "frobnicate" in p.stderr and p.stdout == ""
    p = sg("run", "bfs")
    assert p.returncode == 2 and "Usage:" in p.stderr


def test_cli_main_from_python(store, capfd):
    """The function behind the script returns the code instead of exiting."""
    from solidgraph._native import cli_main

    assert cli_main(["solidgraph", "info", str(store), "--json"]) == 0
    assert json.loads(capfd.readouterr().out)["num_nodes"] == 5
    assert cli_main(["solidgraph", "nope"]) == 2
    assert cli_main(["solidgraph", "--help"]) == 0


def test_bench_runs_the_benchmark_binary(tmp_path):
    """`solidgraph bench ...` hands its arguments to `solidgraph-bench` (found
    next to the command, else on PATH) and passes its exit code through;
    without it, an error says what to build."""
    env = {"PATH": str(tmp_path)}  # the console script's interpreter is absolute
    p = sg("bench", "--help", env=env)
    assert p.returncode == 1 and "solidgraph-bench" in p.stderr and "cargo build" in p.stderr, p.stderr
    bench = Path(os.environ.get("SOLIDGRAPH_BENCH_BIN", "target/release/solidgraph-bench")).resolve()
    if not bench.is_file():
        pytest.skip(f"{bench} is not built")
    (tmp_path / "solidgraph-bench").symlink_to(bench)
    p = sg("bench", "--help", env=env)
    assert p.returncode == 0 and "analytics" in p.stdout and "sampling" in p.stdout, p.stderr
    p = sg("bench", "no-such-benchmark", env=env)
    assert p.returncode == 2 and "no-such-benchmark" in p.stderr, p.stderr
