"""The `topolink` command as a user runs it: a real process, real arguments, real exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import topology as t

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("cupy", "torch", "fastapi", "uvicorn", "lightkube", "kubernetes", "starlette", "numpy")


def topolink(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_")}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "agent.cli", *args], capture_output=True, text=True,
                          cwd=REPO, env=full_env, timeout=120, check=False)


def modules_loaded_by(*argv: str) -> set[str]:
    code = (
        "import sys, contextlib, io\n"
        "from agent.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        f"        main({list(argv)!r})\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    return set(out.stdout.split())


@pytest.mark.parametrize("argv", [("--help",), ("discover", "--format", "json"), ("discover",), ("topo",),
                                  ("place", "--gpus", "2")])
def test_cli_paths_load_no_heavy_library(argv: tuple[str, ...]) -> None:
    loaded = modules_loaded_by(*argv)
    heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY)
    assert heavy == [], f"`topolink {' '.join(argv)}` imported {heavy}"


def test_help_loads_only_the_command_line() -> None:
    """``topolink --help`` lists the commands without building their parsers: no command module, not the
    model, no source, nor NVML or the metrics library."""
    bare = subprocess.run([sys.executable, "-c", "import sys; print('\\n'.join(sorted(sys.modules)))"],
                          capture_output=True, text=True, cwd=REPO, check=True).stdout.split()
    added = modules_loaded_by("--help") - set(bare)
    ours = {m for m in added if m.split(".")[0] in ("agent", "exporter", "topology", "probes")}
    assert ours <= {"agent", "agent.cli", "agent.cli._common"}
    costly = {"pynvml", "prometheus_client"}
    assert added & costly == set()


def test_version() -> None:
    from importlib import metadata

    out = topolink("--version")
    assert out.returncode == 0
    # agent.__version__, which the installed distribution's metadata took from it at build time
    assert out.stdout == f"topolink {metadata.version('topolink')}\n"


def test_no_command_prints_help_and_usage_code() -> None:
    out = topolink()
    assert out.returncode == 2
    assert "discover" in out.stdout and "topo" in out.stdout


def test_discover_on_this_machine_without_gpu() -> None:
    out = topolink("discover")
    assert out.returncode == 0, out.stderr
    assert "NUMA nodes:" in out.stdout and "PCI:" in out.stdout
    no_gpu = [line for line in out.stdout.splitlines() if line.startswith("No NVIDIA GPU found:")]
    assert len(no_gpu) == 1
    assert "NVML" in no_gpu[0]


def test_discover_json_is_a_snapshot(tmp_path: Path) -> None:
    target = tmp_path / "node.json"
    out = topolink("discover", "--format", "json", "-o", str(target))
    assert out.returncode == 0, out.stderr
    snap = t.loads(target.read_text())
    assert snap.numa_nodes and snap.pci
    assert {o.name for o in snap.sources} >= {"pci", "numa", "nvml"}
    assert json.loads(target.read_text())["schema"] == t.SCHEMA
    again = topolink("topo", "--from", str(target))
    assert again.returncode == 0
    assert again.stdout.startswith("No NVIDIA GPU found:")


def test_discover_dot(tmp_path: Path) -> None:
    out = topolink("discover", "--format", "dot")
    assert out.returncode == 0
    assert out.stdout.startswith("graph ")


def test_disabled_source_is_not_run() -> None:
    out = topolink("discover", "--format", "json", "--no-source.nvml")
    snap = t.loads(out.stdout)
    assert {o.name: o.status for o in snap.sources}["nvml"] is t.SourceStatus.DISABLED
    assert t.node_fact(t.Aspect.NVLINKS) in snap.unknown  # turned off: NVLinks were not looked at
    assert out.returncode == 1 and "nvml disabled" in out.stderr


def test_bad_inputs_give_clear_errors(tmp_path: Path) -> None:
    missing = topolink("topo", "--from", str(tmp_path / "nope.json"))
    assert missing.returncode == 3 and "nope.json" in missing.stderr
    garbage = tmp_path / "garbage.json"
    garbage.write_text('{"schema": "something/else"}')
    bad = topolink("topo", "--from", str(garbage))
    assert bad.returncode == 3 and "topolink.topology/v1" in bad.stderr
    root = topolink("discover", "--sysfs-root", str(tmp_path / "absent"))
    assert root.returncode == 3 and "not a directory" in root.stderr
    usage = topolink("discover", "--format", "yaml")
    assert usage.returncode == 2


def test_probe_results_render_as_a_bandwidth_matrix(tmp_path: Path) -> None:
    report = tmp_path / "probe.json"
    out = topolink("probe", "--backend", "cpu", "--tests", "host_memcpy", "--format", "json", "-o", str(report))
    assert out.returncode == 0, out.stderr
    topo = topolink("topo", "--from", str(report), "--bandwidth")
    assert topo.returncode == 0, topo.stderr
    assert "host_memcpy" in topo.stdout and "NUMA0" in topo.stdout
    measured = t.from_dict(json.loads(report.read_text())["snapshot"]).measurements
    assert measured and all(m.source is t.Source.MEASURED and m.stats is not None for m in measured)
