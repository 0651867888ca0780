"""What the command line loads to start: each run builds its own command's parser alone, help asked for alone
is the stored text argparse would print (no argparse, no command module), and ``discover`` loads none of the
modules it has no use for (whoever would import them).

Not timed (benchmarks/startup.py times it): these hold the imports that the start-up budget rests on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.cli import _help, build_parser
from tests.fakenvml import FakeNode, materialize
from tests.stored_help import help_file, render, stored_keys

REPO = Path(__file__).resolve().parents[1]

# Never loaded by ``discover``, whichever module would import them: the other rooms' dependencies and ours,
# and standard modules discovery has no use for (each costs a millisecond or more).
NEVER = (
    "cupy", "torch", "numpy", "starlette", "uvicorn", "fastapi", "httpx", "lightkube", "kubernetes",
    "prometheus_client", "yaml", "msgpack",
    "agent.serve", "probes", "exporter.kube", "exporter._http", "exporter._core._http_flags",
    "exporter._core._http_limits", "exporter._metrics", "exporter._webpage", "exporter._placement",
    "urllib", "http", "email", "asyncio", "logging", "socket", "ssl", "pathlib",
    "zipfile",
    # the model's and discovery's records are built without dataclasses (topology._record), and typing is
    # read by mypy alone: together with inspect, ast, dis and tokenize they cost more than the discovery
    "dataclasses", "typing", "inspect", "ast", "dis", "tokenize",
    # importlib (with warnings where nothing else loads it) for a lookup __import__ does, contextlib for
    # suppress(), and writing a snapshot has no use for its checks (they run where one is read)
    "importlib", "contextlib", "topology._validate", "topology._coherence",
)
# Never loaded by ``discover --format json -o FILE`` either: its usual command lines are read without argparse
# (agent.cli.discover.plain_args), so neither argparse nor the gettext its messages are looked up in load
# (nor locale: see ONLY_THROUGH). Help that is not stored is argparse's, as is any unusual command line.
# The indented snapshot is written without the json package (topology._jsontext), which reading one needs.
NEVER_BY_DISCOVER = ("argparse", "gettext", "json")
# Loaded only through the module named: ``tempfile``, ``random``, ``shutil``, ``threading`` and ``math`` by
# ``ctypes.util`` alone, which pynvml imports where NVML is used (``-o`` writes without the first two, the
# parser is formatted without shutil, NVML's lock is a bare ``_thread`` lock, JSON floats are checked without
# math); ``ctypes`` by pynvml alone (whether a system NVML loads is asked of ``_ctypes.dlopen``).
ONLY_THROUGH = {"tempfile": "ctypes.util", "random": "ctypes.util", "shutil": "ctypes.util",
                "threading": "ctypes.util", "math": "ctypes.util", "ctypes": "pynvml"}
# and by ``discover``, ``locale`` too (through subprocess), never by argparse's gettext.
ONLY_THROUGH_BY_DISCOVER = {**ONLY_THROUGH, "locale": "ctypes.util"}

# Runs main() with a finder first on sys.meta_path that records, for each module loaded, the module whose code
# asked for it (the first frame outside the import machinery), then prints that map as JSON.
_RECORDER = """
import json, sys
importer = {}
class Recorder:
    @staticmethod
    def find_spec(name, path=None, target=None):
        frame = sys._getframe(1)
        while frame is not None and (frame.f_code.co_filename.startswith("<frozen importlib")
                                     or frame.f_globals.get("__name__") == "importlib"):
            frame = frame.f_back
        importer.setdefault(name, frame.f_globals.get("__name__", "?") if frame is not None else "?")
        return None
sys.meta_path.insert(0, Recorder)
from agent.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "importer": importer}), file=sys.__stderr__)
"""


def run_recorded(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, dict[str, str]]:
    """The exit code of ``topolink ARGV`` and, for each module it loaded, the module that imported it."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_")}
    full_env.update(env or {})
    out = subprocess.run([sys.executable, "-c", _RECORDER, *argv], capture_output=True, text=True, cwd=REPO,
                         env=full_env, timeout=120, check=False)
    result = json.loads(out.stderr.strip().splitlines()[-1])
    return int(result["code"] or 0), dict(result["importer"])


def chain(importer: dict[str, str], module: str) -> list[str]:
    """``module``, the module that imported it, the one that imported that, ... up to the first not recorded."""
    seen = [module]
    while (up := importer.get(seen[-1])) is not None and up not in seen:
        seen.append(up)
    return seen


def assert_bounded(importer: dict[str, str], *, discover: bool = False) -> None:
    loaded = set(importer)
    never_loaded = (*NEVER, *NEVER_BY_DISCOVER) if discover else NEVER
    never = sorted(m for m in loaded if any(m == n or m.startswith(f"{n}.") for n in never_loaded))
    assert never == [], {m: chain(importer, m) for m in never}
    for module, through in (ONLY_THROUGH_BY_DISCOVER if discover else ONLY_THROUGH).items():
        if module in loaded:
            assert through in chain(importer, module), f"{module} loaded by {chain(importer, module)}"


@pytest.fixture(scope="module")
def gpu_node(tmp_path_factory: pytest.TempPathFactory) -> FakeNode:
    return materialize("hgx-h100", tmp_path_factory.mktemp("hgx"))


def test_discover_loads_nothing_it_does_not_use_on_this_machine(tmp_path: Path) -> None:
    code, importer = run_recorded(["discover", "--format", "json", "-o", str(tmp_path / "node.json")])
    assert code in (0, 1) and (tmp_path / "node.json").stat().st_size > 0
    assert_bounded(importer, discover=True)
    assert "pynvml" not in importer or os.path.exists("/dev/nvidiactl")  # no driver here: NVML never imported


def test_discover_loads_nothing_it_does_not_use_with_nvml(gpu_node: FakeNode, tmp_path: Path) -> None:
    code, importer = run_recorded(["discover", "--format", "json", "-o", str(tmp_path / "node.json")],
                                  gpu_node.env())
    assert code == 0
    assert '"gpus": [' in (tmp_path / "node.json").read_text()
    assert "pynvml" in importer  # the test NVML answered through it
    assert_bounded(importer, discover=True)


@pytest.mark.parametrize("argv", [["--help"], ["discover", "--help"], ["topo", "-h"]])
def test_help_asked_alone_loads_neither_argparse_nor_a_command(argv: list[str]) -> None:
    code, importer = run_recorded(argv, {"COLUMNS": "80"})
    assert code == 0
    ours = {m for m in importer if m.split(".")[0] in ("agent", "exporter", "topology", "probes")}
    assert ours == {"agent", "agent.cli", "agent.cli._common", "agent.cli._help"}
    assert "argparse" not in importer
    assert_bounded(importer)


@pytest.mark.parametrize("argv", [["--help"], ["discover", "--help"], ["discover", "--format", "json", "--help"]])
def test_other_help_builds_only_the_command_it_shows(argv: list[str]) -> None:
    _, importer = run_recorded(argv, {"COLUMNS": "100"})  # not the stored width: argparse prints it
    ours = {m for m in importer if m.split(".")[0] in ("agent", "exporter", "topology", "probes")}
    shown = {f"agent.cli.{argv[0]}", "agent.discovery", "agent.discovery.sources",
             "agent.discovery.sources._catalog",  # and the settings' rules, which the flags are read through:
             "exporter", "exporter._core", "exporter._core._settings", "topology", "topology._lazy",
             } if argv[0] != "--help" else set()
    assert ours == {"agent", "agent.cli", "agent.cli._common", "agent.cli._help", *shown}
    assert_bounded(importer)


def test_the_stored_help_is_what_argparse_prints() -> None:
    assert Path(_help.HELP_FILE).read_text(encoding="utf-8") == help_file(), \
        "agent/cli/help.txt is stale: run .venv/bin/python -m tests.stored_help"


@pytest.mark.parametrize("key", stored_keys())
def test_a_command_prints_its_help_alike_either_way(key: str) -> None:
    argv = ["--help"] if key == _help.TOP else [key, "--help"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_")}
    outs = [subprocess.run([sys.executable, "-m", "agent.cli", *argv], capture_output=True, text=True, cwd=REPO,
                           env={**env, "COLUMNS": columns}, check=False) for columns in ("80", "100")]
    assert [o.returncode for o in outs] == [0, 0]
    assert outs[0].stdout == render(key)[0]
    assert outs[1].stdout == render(key, {"COLUMNS": "100"})[0]


def test_stored_help_is_not_printed_where_a_source_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert _help.stored_help(["discover", "--help"]) == render("discover")[0]
    assert _help.stored_help(["discover", "--format", "json", "--help"]) is None
    stale = tmp_path / "help.txt"
    text = Path(_help.HELP_FILE).read_text(encoding="utf-8")
    stale.write_text(text.replace("agent/cli/discover.py=", "agent/cli/discover.py=0"), encoding="utf-8")
    monkeypatch.setattr(_help, "HELP_FILE", str(stale))
    assert _help.stored_help(["discover", "--help"]) is None
    assert _help.stored_help(["--help"]) == render(_help.TOP)[0]
    monkeypatch.setenv("COLUMNS", "81")
    assert _help.stored_help(["--help"]) is None


def _subcommands(parser: object) -> dict[str, object]:
    return dict(parser._subparsers._group_actions[0].choices)  # type: ignore[attr-defined]


def test_each_command_line_builds_the_parser_of_its_command_alone() -> None:
    """The lazily built parser says what the whole tree says: the same top-level help (each command's line
    from its module), and for each command the same help, usage and flags."""
    whole = build_parser()
    assert build_parser("").format_help() == whole.format_help()
    for name, full in _subcommands(whole).items():
        lazy = build_parser(name)
        assert lazy.format_help() == whole.format_help()
        assert _subcommands(lazy)[name].format_help() == full.format_help()  # type: ignore[attr-defined]
