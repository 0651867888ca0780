"""What the command line loads to start: each run builds its own command's parser alone, and ``discover``
loads none of the heavy modules it has no use for (whoever would import them).

Not timed (benchmarks/startup.py times it): these hold the imports that the start-up budget rests on.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.cli import _COMMANDS, build_parser
from tests.fakenvml import FakeNode, materialize

REPO = Path(__file__).resolve().parents[1]

# Never loaded by ``discover``, whichever module would import them: the other subpackages' dependencies and ours
# (Kubernetes, HTTP, the probes, the page, metrics), and the standard modules of a server (HTTP, asyncio,
# logging) that discovery has no use for. Writing a snapshot has no use for the checks run where one is read.
NEVER = (
    "cupy", "torch", "numpy", "starlette", "uvicorn", "fastapi", "httpx", "lightkube", "kubernetes",
    "prometheus_client", "yaml", "msgpack",
    "agent.serve", "probes", "exporter.kube", "exporter._http", "exporter._core._http_flags",
    "exporter._core._http_limits", "exporter._metrics", "exporter._webpage", "exporter._placement",
    "urllib", "http", "email", "asyncio", "logging", "socket", "ssl",
    "topology.codec._validate", "topology.codec._coherence",
)

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


def assert_bounded(importer: dict[str, str]) -> None:
    never = sorted(m for m in importer if any(m == n or m.startswith(f"{n}.") for n in NEVER))
    assert never == [], {m: chain(importer, m) for m in never}


@pytest.fixture(scope="module")
def gpu_node(tmp_path_factory: pytest.TempPathFactory) -> FakeNode:
    return materialize("hgx-h100", tmp_path_factory.mktemp("hgx"))


def test_discover_loads_nothing_it_does_not_use_on_this_machine(tmp_path: Path) -> None:
    code, importer = run_recorded(["discover", "--format", "json", "-o", str(tmp_path / "node.json")])
    assert code in (0, 1) and (tmp_path / "node.json").stat().st_size > 0
    assert_bounded(importer)
    assert "pynvml" not in importer or os.path.exists("/dev/nvidiactl")  # no driver here: NVML never imported


def test_discover_loads_nothing_it_does_not_use_with_nvml(gpu_node: FakeNode, tmp_path: Path) -> None:
    code, importer = run_recorded(["discover", "--format", "json", "-o", str(tmp_path / "node.json")],
                                  gpu_node.env())
    assert code == 0
    assert '"gpus": [' in (tmp_path / "node.json").read_text()
    assert "pynvml" in importer  # the test NVML answered through it
    assert_bounded(importer)


@pytest.mark.parametrize("argv", [["--help"], ["discover", "--help"], ["discover", "--format", "json", "--help"],
                                  ["topo", "-h"]])
def test_help_builds_only_the_command_it_shows(argv: list[str]) -> None:
    code, importer = run_recorded(argv)
    assert code == 0
    ours = {m for m in importer if m.split(".")[0] in ("agent", "exporter", "topology", "probes")}
    shown = {f"agent.cli.{argv[0]}", "agent.discovery", "agent.discovery.sources",
             "agent.discovery.sources._catalog",  # and the settings' rules, which the flags are read through:
             "exporter", "exporter._core", "exporter._core._rule", "topology", "topology._lazy",
             } if argv[0] != "--help" else set()
    assert ours == {"agent", "agent.cli", "agent.cli._common", *shown}
    assert_bounded(importer)


def _help_of(parser: argparse.ArgumentParser, argv: list[str]) -> str:
    """What ``parser`` prints for ``argv`` (a command line asking for help)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        parser.parse_args(argv)
    return out.getvalue()


def test_each_command_line_builds_the_parser_of_its_command_alone() -> None:
    """The lazily built parser says what the whole tree says: the same top-level help (each command's line
    from its module), and for each command the same help, usage and flags."""
    whole = build_parser()
    assert build_parser("").format_help() == whole.format_help()
    for name, _, _ in _COMMANDS:
        lazy = build_parser(name)
        assert lazy.format_help() == whole.format_help()
        assert _help_of(lazy, [name, "--help"]) == _help_of(whole, [name, "--help"])



def _written(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[str, str, str]:
    """What ``parser`` writes for ``argv``: standard output, standard error, and how it ended (the exit status,
    the error a refused value raises, or the command parsed)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            ended = str(parser.parse_args(argv).command)
        except SystemExit as exc:
            ended = f"exit {exc.code}"
        except argparse.ArgumentError as exc:
            ended = f"refused: {exc}"
    return out.getvalue(), err.getvalue(), ended


@pytest.mark.parametrize("extra", [["--help"], ["--bogus"], ["stray"], ["--format"], ["--format", "bogus"],
                                   ["--sysfs-root"], ["--source.pci=x"], []])
def test_a_command_line_starting_with_its_command_lists_no_other(extra: list[str]) -> None:
    """``main`` builds a command line that starts with a command's name without the other commands (the top level
    never writes its list there): whatever it parses, asks or refuses, it writes what the whole parser writes."""
    whole = build_parser()
    for name, _, _ in _COMMANDS:
        alone = build_parser(name, listed=False)
        assert _written(alone, [name, *extra]) == _written(whole, [name, *extra])
        other = next(n for n, module, _ in _COMMANDS if module != dict((c, m) for c, m, _ in _COMMANDS)[name])
        assert "invalid choice" in _written(alone, [other])[2]  # not there at all


def test_help_is_written_at_the_terminals_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """Parsers are built at a set width (nothing argparse formats while building depends on one) and written with
    argparse's own formatter: help, usage and errors at the terminal's width, as argparse writes them."""
    widths = {}
    for columns in (50, 200):
        monkeypatch.setenv("COLUMNS", str(columns))
        parser = build_parser("discover")
        assert parser.formatter_class is argparse.HelpFormatter
        for argv in (["--help"], ["discover", "--help"]):  # the top level's, and the command's
            text = _help_of(parser, argv)
            widths[columns, argv[0]] = max(len(line) for line in text.splitlines() if "[" not in line)  # not usage
    assert widths[50, "--help"] <= 48 < widths[200, "--help"]
    assert widths[50, "discover"] <= 48 < widths[200, "discover"]


# What a command may load to start, counted (benchmarks/startup.py times it): modules imported beyond the
# interpreter's own start, those of topolink's packages, the classes those define, and their dataclasses (each
# one costs a millisecond or more to create, twice that without a docstring: dataclass() writes one with
# inspect.signature). A budget is where the command stands; a change that loads more must say why here.
# discover -o: +2 modules and +1 class for the truth rules (access._record: every read recorded, its Reads;
# assemble._crosscheck_numa: one PCI function's NUMA node against its CPUs, for every device kind); the facts
# table they are documented by loads on first use, never in a pass.
# discover -o, issue 52: 51 -> 22 dataclasses (the sources' facts, the NVML records, the witnesses, the physics
# rows and path classes are NamedTuples: nothing of a dataclass was used; the model's stay dataclasses, its API),
# 102 -> 96 modules (-o makes its new file with os.open O_EXCL, not tempfile and the random module under it).
# Every command, issue 52: the commands --help lists but does not run get a parser without -h (nothing built for
# a flag never parsed). argparse's help formatter imports shutil (zlib, bz2, lzma below it) for the terminal's
# width, about 3 ms: paid, as a second way to find the width would be a copy of the standard library's.
# discover -o, issue 52: 22 -> 0 dataclasses, 115 -> 99 modules (counted before this script imports dataclasses
# and json itself, which hid them until now): the model's records and the two of discovery are plain slotted
# classes (topology.Record), so neither dataclass() nor the dataclasses module (inspect, ast, dis, tokenize, copy
# below it) is paid; +2 of ours (topology.model._record, and _devices split from _entities). 99 -> 96:
# per_snapshot's lock (threading) and weakref load on its first use, which discover never makes.
# discover -o, issue 52 item 1 (s57): 96 -> 83 modules, 76 -> 67 of ours, 107 -> 102 classes. typing is off the path
# (the sources' facts, NVML's raw records, the witness and physics rows are topology.Record classes, not
# NamedTuples, about 0.5 ms each with typing below them; names for annotations only under TYPE_CHECKING = False);
# shutil (zlib, bz2, lzma) loads only where help, usage or an error is written (build_parser builds with a set
# width, +2 classes for every command: agent.cli's _FixedWidth and _Building); NVML's walk and merge
# (sources._nvml_read/_pairs/_walk, assemble._nvml/_nvml_links/_counts/_identity) load where a driver answers,
# and the fabric's paths where NVML's matrices are checked.
# discover -o, issue 52 item 1 (s58): 83 -> 76 modules, 67 -> 65 of ours, 102 -> 89 classes; discover --help 15 -> 7
# classes. json is off the path (the indented writer writes plain ASCII strings itself; json loads for a string
# that needs escaping); NVML's port (access._nvml_port, _nvml_platform) loads once a library does (open_nvml in
# access._nvml_open); the flags' text rule and env_value are exporter._core._rule, without the settings' other
# kinds; no_gpu_reason is render._no_gpu, not the summary's module; the GPU cross-checks (assemble._crosscheck_gpu)
# load where the snapshot has a GPU. No pattern is compiled by our modules on the
# path (sysfs and id checks are str methods: tests/test_sysfs_text.py).
# discover -o, issue 52 item 1 (s58, second cut): 76 -> 75 modules, 65 -> 64 of ours, 89 -> 83 classes. The physics
# check is one function of assemble._crosscheck (_crosscheck_physics merged in; opening NVML stays apart from its
# errors, access._nvml_open, as the port imports the errors and open_nvml the port: one module would be a cycle);
# the six kinds of failure only a call on an initialised NVML meets (access._nvml_kinds) load with the port, where
# a library is there.
# 75 -> 74 modules, 64 -> 63 of ours, 83 -> 79 classes: NVML's facts (sources._nvml_facts, four records) load where
# the NVML source read something.
_COUNT = """
import sys
before = set(sys.modules)
from agent.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
loaded = sorted(set(sys.modules) - before)  # before this script imports dataclasses and json for itself
import dataclasses, json
ours = [n for n in sys.modules if n.split(".")[0] in ("agent", "topology", "exporter", "probes")]
classes = [v for n in ours for v in vars(sys.modules[n]).values() if isinstance(v, type) and v.__module__ == n]
records = [c for c in classes if dataclasses.is_dataclass(c)]
print(json.dumps({"modules": loaded, "ours": len(ours), "classes": len(classes), "dataclasses": len(records),
                  "undocumented": [c.__qualname__ for c in records if "__doc__" not in c.__dict__
                                   or (c.__doc__ or "").startswith(c.__name__ + "(")]}), file=sys.__stderr__)
"""


@pytest.mark.parametrize(("argv", "budget"), [  # (modules, topolink's modules, their classes, their dataclasses)
    (["--help"], (16, 3, 4, 0)),
    (["discover", "--help"], (25, 12, 7, 0)),
    (["discover", "--format", "json", "-o", "{tmp}/node.json"], (74, 63, 79, 0)),
])
def test_start_up_budget_in_modules_and_classes(argv: list[str], budget: tuple[int, int, int, int],
                                                 tmp_path: Path) -> None:
    modules, ours, classes, records = budget
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_")}
    out = subprocess.run([sys.executable, "-c", _COUNT, *(a.format(tmp=tmp_path) for a in argv)],
                         capture_output=True, text=True, cwd=REPO, env=env, timeout=120, check=False)
    found = json.loads(out.stderr.strip().splitlines()[-1])
    assert len(found["modules"]) <= modules, found["modules"]
    assert found["ours"] <= ours and found["classes"] <= classes and found["dataclasses"] <= records, found
    assert found["undocumented"] == []
    assert not {"dataclasses", "inspect", "threading", "weakref", "typing"} & set(found["modules"])
    if "-o" in argv:  # nothing is shown: the terminal's width is never asked for; no string here needs json's escapes
        assert not {"shutil", "zlib", "bz2", "lzma", "json"} & set(found["modules"]), found["modules"]
