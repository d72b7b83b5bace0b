import solidgraph


def test_version_and_import_without_optional_deps():
    assert solidgraph.__version__.count(".") == 2


def test_bench_io_small(tmp_path):
    r = solidgraph.bench_io([str(tmp_path / "a"), str(tmp_path / "b")], size=8 << 20, depth=8, seconds=0.2)
    assert r["ios"] > 0 and r["iops"] > 0
    assert r["backend"] in ("uring", "posix")


def test_bench_io_bad_input_is_a_clear_error(tmp_path):
    import pytest

    with pytest.raises(solidgraph.SolidGraphError, match="pattern"):
        solidgraph.bench_io([str(tmp_path / "a")], size=1 << 20, pattern="sideways")
