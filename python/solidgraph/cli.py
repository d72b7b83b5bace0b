"""The `solidgraph` command of the Python package (its console script).

The command is the Rust one that `cargo build` also makes as
`target/release/solidgraph`: the extension runs it (`_native.cli_main`), so
`pip install solidgraph` puts the library and the command on PATH with one
wheel. maturin cannot put a Rust binary in a wheel beside a pyo3 module
(one `bindings` per wheel, PyO3/maturin#368), and a second wheel would
carry a second copy of the engine.
"""

import signal
import sys


def main() -> int:
    """Runs `solidgraph` with this process's arguments; returns its exit code."""
    from solidgraph._native import cli_main

    # The command runs in Rust without the GIL, where Python's handlers only
    # set a flag nobody reads until it returns: restore the defaults so that
    # Ctrl-C stops it and a closed pipe (`| head`) ends it quietly, as they
    # do a native command.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    return cli_main(["solidgraph", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
