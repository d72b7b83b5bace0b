# Two entry points work on a fresh machine: `make demo` and `make test`.
# Each installs what it needs (a venv in .venv, pip packages, Debian packages).

VENV      := .venv
PY        := $(VENV)/bin/python
PIP       := $(VENV)/bin/pip
CARGO     ?= cargo
# The cargo profile of `build`, `develop`, `lint` and `test`: release by
# default (what users and benchmarks run); CI passes PROFILE=ci (Cargo.toml
# says why).
PROFILE   ?= release
BIN       := target/$(PROFILE)/solidgraph
BENCH_BIN := target/$(PROFILE)/solidgraph-bench
DEMO_DIR  ?= demo-data
# pymetis: `solidgraph partition --method metis` (a manylinux wheel per CPython).
PIP_DEPS  := maturin pytest numpy networkx mypy pyoxigraph hypothesis pymetis
# The GNN extras (solidgraph[torch]) and scipy for the tests' statistics;
# `make test` tests the PyTorch/PyG integration for real. PyPI's torch wheels
# pull CUDA libraries: ~100 s and ~5 GB, once (stamp file).
TORCH_DEPS := torch torch_geometric scipy

.PHONY: test demo build develop stubtest lint venv venv-torch apt-fio clean protos venv-client fuzz

$(VENV)/.ready:
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q $(PIP_DEPS)
	touch $@

venv: $(VENV)/.ready

$(VENV)/.torch-ready: $(VENV)/.ready
	$(PIP) install -q $(TORCH_DEPS)
	touch $@

venv-torch: $(VENV)/.torch-ready

# The gRPC client's extra (solidgraph[client]) and the stub generator, for
# tests/test_server.py; a stamp of its own so existing venvs get it too.
CLIENT_DEPS := grpcio grpcio-tools

$(VENV)/.client-ready: $(VENV)/.ready
	$(PIP) install -q $(CLIENT_DEPS)
	touch $@

venv-client: $(VENV)/.client-ready

apt-fio:
	@command -v fio >/dev/null || (apt-get install -y -q fio >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q fio >/dev/null))

# The binaries and every Rust test target in one cargo invocation, so one
# feature resolution: `cargo test` turns on what the dev-dependencies ask of
# shared dependencies (bitflags/std, regex-syntax's defaults), and binaries
# built without the tests got other builds of those and of every crate above
# them, all compiled a second time by `cargo test` (issue 27). After this,
# `cargo test` with the same selection compiles nothing (and `make demo`,
# which builds the same, leaves nothing for `make test`). The extension is
# maturin's (develop); crates/workspace-hack gives its `-p solidgraph-py`
# build the same dependency features, so it reuses these artifacts.
CARGO_SEL := --profile $(PROFILE) --workspace --exclude solidgraph-py

build:
	$(CARGO) build $(CARGO_SEL) --all-targets

# Builds the Python extension into the venv (optimised: tests run real I/O),
# with the `solidgraph` console script. maturin reinstalls the package even
# when cargo has nothing to do (3-4 s, and a race with anything else using
# the venv), so it runs only when a Rust source, manifest or the lockfile is
# newer than the module it wrote; python/ is installed in place (editable)
# and needs no rebuild.
NATIVE   := python/solidgraph/_native.abi3.so
RUST_SRC := $(shell find crates -name '*.rs' -o -name '*.toml' -o -name '*.h') Cargo.toml Cargo.lock pyproject.toml

develop: $(NATIVE)

$(NATIVE): $(VENV)/.ready $(RUST_SRC)
	VIRTUAL_ENV=$(abspath $(VENV)) PATH=$(abspath $(VENV))/bin:$$PATH \
	  $(VENV)/bin/maturin develop --profile $(PROFILE) -q
	touch $@

# Checks python/solidgraph/_native.pyi against the built module (names,
# signatures, defaults, classes). A venv made before mypy joined PIP_DEPS
# gets it here.
stubtest: develop
	@$(PY) -c "import mypy" 2>/dev/null || $(PIP) install -q mypy
	$(PY) -m mypy.stubtest solidgraph._native

# The Python client's message classes from the protos (checked in, so
# `solidgraph[client]` needs grpcio and protobuf only; tests/test_server.py
# checks they match proto/).
protos: $(VENV)/.client-ready
	T=$$(mktemp -d) && $(PY) -m grpc_tools.protoc -Iproto --python_out=$$T --pyi_out=$$T proto/solidgraph/v1/solidgraph.proto \
	  && cp $$T/solidgraph/v1/solidgraph_pb2.py $$T/solidgraph/v1/solidgraph_pb2.pyi python/solidgraph/_proto/ && rm -r $$T

# What CI checks besides the tests: formatting (rustfmt.toml), clippy with
# every warning an error, and the stub against the module. Clippy runs in
# $(PROFILE) so the build scripts and proc macros it compiles are the ones
# `make build` uses.
lint: venv
	$(CARGO) fmt --all --check
	PYO3_PYTHON=$(abspath $(PY)) $(CARGO) clippy --profile $(PROFILE) --workspace --all-targets -- -D warnings
	$(MAKE) stubtest

# Each cargo-fuzz target (fuzz/) for FUZZ_SECONDS, one at a time and one
# job, on nightly (libFuzzer); new inputs go to FUZZ_WORK, the kept corpora
# in fuzz/corpus are only read. `make test` replays those corpora on stable
# (crates/fuzzcheck/tests/corpus.rs).
FUZZ_SECONDS ?= 20
FUZZ_WORK    ?= /tmp/solidgraph-fuzz
FUZZ_TARGETS := edges tensor_npy page store_bytes wal rdf_bytes rdf_wal server model

fuzz:
	@command -v cargo-fuzz >/dev/null || $(CARGO) install -q cargo-fuzz
	@for t in $(FUZZ_TARGETS); do mkdir -p $(FUZZ_WORK)/$$t; \
	  (cd fuzz && $(CARGO) +nightly fuzz run -O $$t $(FUZZ_WORK)/$$t corpus/$$t -- \
	    -max_total_time=$(FUZZ_SECONDS) -jobs=1 -workers=1 -rss_limit_mb=4096 -timeout=20) || exit 1; done

test: venv venv-torch venv-client build develop
	$(CARGO) test $(CARGO_SEL)
	SOLIDGRAPH_BIN=$(abspath $(BIN)) SOLIDGRAPH_BENCH_BIN=$(abspath $(BENCH_BIN)) $(PY) -m pytest -q tests

demo: venv venv-torch build develop apt-fio
	benchmarks/demo.sh

clean:
	rm -rf $(DEMO_DIR)
