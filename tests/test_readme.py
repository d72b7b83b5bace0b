"""Every code block in README.md runs as written, or says why not.

- A ```python block runs in a fresh namespace in an empty directory, so it
  must define everything it uses (blocks that import torch need the torch
  extras, `solidgraph[torch]`).
- A block right after `<!-- not-tested: REASON -->` is not run; the reason
  is required.
- A block right after `<!-- synopsis: ... -->` is a command synopsis with
  placeholders: every `solidgraph` / `solidgraph-bench` subcommand, algorithm
  and `--flag` in it (and in inline `solidgraph ...` spans of the prose)
  must be in that command's `--help`.
- Any other block fails the test: run it, or mark it with its reason.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
SCRIPT = Path(sys.executable).parent / "solidgraph"
MARKER = re.compile(r"<!--\s*(not-tested|synopsis):\s*(.*?)\s*-->")


def blocks():
    """(lang, first code line number, code, marker kind, marker reason) per fenced block."""
    out, lines = [], README.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        prev = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        mark = MARKER.fullmatch(prev.strip())
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        out.append((m.group(1), i + 2, "\n".join(lines[i + 1 : end]) + "\n", *(mark.groups() if mark else (None, None))))
        i = end + 1
    return out


BLOCKS = blocks()


def test_readme_has_blocks():
    langs = [b[0] for b in BLOCKS]
    assert langs.count("python") >= 4 and "sh" in langs


@pytest.mark.parametrize("lang,line,code,kind,reason", BLOCKS, ids=[f"README.md:{b[1]}" for b in BLOCKS])
def test_block(lang, line, code, kind, reason, tmp_path, monkeypatch):
    if kind == "not-tested":
        assert reason, f"README.md:{line}: say why the block is not tested"
        pytest.skip(f"README.md:{line} is illustrative: {reason}")
    if kind == "synopsis":
        return check_synopsis(code, line)
    assert lang == "python", f"README.md:{line}: a {lang or 'plain'} block must run as Python or be marked not-tested/synopsis with a reason"
    if re.search(r"^\s*(import|from) torch", code, re.M):
        pytest.importorskip("torch_geometric", reason="the block needs the torch extras (solidgraph[torch])")
    monkeypatch.chdir(tmp_path)
    # Padding keeps README line numbers in a traceback.
    exec(compile("\n" * (line - 1) + code, str(README), "exec"), {"__name__": "__readme__"})


def check_synopsis(code, line):
    text = code.replace("\\\n", " ")
    cmds = [ln.split("#")[0] for ln in text.splitlines() if ln.lstrip().startswith("solidgraph")]
    # Inline commands in the prose are held to the same standard.
    cmds += [m.replace("\n", " ") for m in re.findall(r"`(solidgraph(?:-bench)? [^`]+)`", README.read_text())]
    bench = Path(os.environ.get("SOLIDGRAPH_BENCH_BIN", REPO / "target/release/solidgraph-bench"))
    helps, missing = {}, []

    def help_of(*args):
        exe = SCRIPT if args[0] == "solidgraph" else bench
        if args not in helps:
            p = subprocess.run([str(exe), *args[1:], "--help"], capture_output=True, text=True, timeout=60)
            assert p.returncode == 0, f"{' '.join(args)} --help: {p.stderr}"
            helps[args] = p.stdout
        return helps[args]

    checked = 0
    for cmd in cmds:
        tokens = cmd.split()
        prog = tokens[0]
        if prog == "solidgraph-bench" and not bench.is_file():
            missing.append(cmd)
            continue
        sub = tokens[1] if len(tokens) > 1 and not tokens[1].startswith(("-", "<")) else None
        if sub is None:
            continue
        assert f"\n  {sub} " in help_of(prog), f"README.md:{line}: `{prog} {sub}` is not a command"
        h = help_of(prog, sub)
        if prog == "solidgraph" and sub == "run":
            for algo in tokens[2].strip("{}").split("|"):
                assert re.search(rf"\b{algo}\b", h), f"README.md: `solidgraph run {algo}` is not an algorithm"
        for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", cmd):
            if flag != "--help":
                assert re.search(rf"{flag}\b", h), f"README.md: `{prog} {sub}` has no {flag} ({cmd.strip()})"
        checked += 1
    assert checked >= 10
    if missing:
        pytest.skip(f"{bench} is missing (cargo build --release -p solidgraph-bench): {len(missing)} solidgraph-bench lines not checked")
