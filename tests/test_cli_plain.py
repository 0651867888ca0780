"""``discover``'s usual command lines are read without argparse (``agent.cli.discover.plain_args``): for each
one it takes, the names and values are the ones argparse gives; each one it does not take (help, an
abbreviation, a bad choice, ``--``, a value that looks like a flag) is left to argparse, whose messages and
exit statuses stay as they were."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.cli import build_parser
from agent.cli.discover import plain_args
from agent.discovery import SOURCE_FLAGS

REPO = Path(__file__).resolve().parents[1]
SOURCES = [name for name, _, _ in SOURCE_FLAGS]

TAKEN = [
    ["discover"],
    ["discover", "--format", "json"],
    ["discover", "--format", "json", "-o", "node.json"],
    ["discover", "--format=dot", "--output", "x.dot"],
    ["discover", "-o", "-", "--format", "table"],
    ["discover", "--output=-o", "--format", "json"],  # after "=", whatever follows is the value
    ["discover", "--format", "json", "--format", "dot"],  # the last one counts
    ["discover", "-o", "a", "--output", "b"],
    ["discover", "--sysfs-root", "/tmp/tree", "--nvml-library", "/opt/lib.so", "--node-name", "n1"],
    ["discover", "--sysfs-root=/", "--nvml-library=libnvidia-ml.so.1", "--node-name=x=y"],
    ["discover", "-o", "with space.json", "--node-name", "n 1"],
    ["discover", *[f"--no-source.{name}" for name in SOURCES]],
    ["discover", *[f"--source.{name}" for name in SOURCES], f"--no-source.{SOURCES[0]}"],
    ["discover", "--format", "json", "-o", "discover"],
]

LEFT_TO_ARGPARSE = [
    ["topo"],
    ["--version"],
    ["discover", "-h"],
    ["discover", "--format", "json", "--help"],
    ["discover", "--form", "json"],  # an abbreviation
    ["discover", "--format", "xml"],  # not a choice
    ["discover", "--format"],  # no value
    ["discover", "-o"],
    ["discover", "-o", "-x"],  # a value like a flag
    ["discover", "-o", "--format", "json"],
    ["discover", "-onode.json"],  # a value joined to a short flag
    ["discover", "-o=node.json"],
    ["discover", "--output="],  # an empty value after "="
    ["discover", "--", "-o"],
    ["discover", "stray"],
    ["discover", f"--source.{SOURCES[0]}=yes"],
    ["discover", "--no-format"],
    ["--", "discover"],
    ["discover", "--node-name", ""],  # a value the settings' text rule refuses
    ["discover", "-o", " "],
]


def argparse_values(argv: list[str]) -> dict[str, object]:
    return vars(build_parser(argv[0]).parse_args(argv))


@pytest.mark.parametrize("argv", TAKEN, ids=" ".join)
def test_a_usual_command_line_gets_what_argparse_gives(argv: list[str]) -> None:
    plain = plain_args(argv)
    assert plain is not None
    assert vars(plain) == argparse_values(argv)


@pytest.mark.parametrize("env", [{}, {"TOPOLINK_SYSFS_ROOT": "/srv/tree", "TOPOLINK_NVML_LIBRARY": "/opt/nvml.so"}])
def test_the_defaults_read_from_the_environment_alike(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for name in ("TOPOLINK_SYSFS_ROOT", "TOPOLINK_NVML_LIBRARY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    for argv in (["discover"], ["discover", "--sysfs-root", "/", "--format", "json"]):
        plain = plain_args(argv)
        assert plain is not None and vars(plain) == argparse_values(argv)


@pytest.mark.parametrize("argv", LEFT_TO_ARGPARSE, ids=" ".join)
def test_anything_else_is_left_to_argparse(argv: list[str]) -> None:
    assert plain_args(argv) is None


def test_argparse_still_answers_what_is_left_to_it(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_")}

    def topolink(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "agent.cli", *argv], capture_output=True, text=True, cwd=tmp_path,
                              env={**env, "PYTHONPATH": str(REPO)}, timeout=120, check=False)

    bad = topolink("discover", "--format", "xml")
    assert bad.returncode == 2 and "argument --format: invalid choice: 'xml'" in bad.stderr
    flag_like = topolink("discover", "-o", "-x")
    assert flag_like.returncode == 2 and "argument -o/--output: expected one argument" in flag_like.stderr
    abbreviated = topolink("discover", "--form", "json", "--no-source.nvml", "--outp", "a.json")
    assert abbreviated.returncode in (0, 1), abbreviated.stderr
    assert (tmp_path / "a.json").read_text().startswith("{")
