"""``probe``, ``selftest`` and ``serve`` on a tree from elsewhere (a ``--sysfs-root`` other than /, a machine
profile's test NVML) ask one question (``fixture_reason``) and measure nothing: ``probe`` and ``selftest``
refuse with exit 2, ``serve`` serves the tree and runs no probe, and refuses the probe endpoint (exit 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest

from agent.cli import main
from agent.cli._common import fixture_reason
from tests.fakenvml import materialize
from tests.test_serve import REPO, free_port, get, start_serve


@pytest.mark.parametrize("command", ["probe", "selftest"])
def test_probe_and_selftest_refuse_a_fixture_root(command: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    tree = materialize("hgx-h100", tmp_path / "machine").root
    assert main([command, "--sysfs-root", str(tree)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"topolink {command}: refusing to measure: discovery reads a machine from elsewhere: "
                           f"--sysfs-root {tree} is a gathered tree")


def test_this_machine_is_the_live_root_or_its_mounts_and_the_system_nvml(tmp_path: Path) -> None:
    """The DaemonSet's /host (this kernel's sysfs and procfs mounted below a root) and the NVML soname are this
    machine; a tree of plain directories (even one holding a copy of /proc) and a library path are not."""
    here = tmp_path / "host"
    here.mkdir()
    (here / "sys").symlink_to("/sys")
    (here / "proc").symlink_to("/proc")
    assert fixture_reason(Namespace(sysfs_root="/", nvml_library=None)) is None
    assert fixture_reason(Namespace(sysfs_root=str(here), nvml_library="libnvidia-ml.so.1")) is None
    copy = tmp_path / "copy"
    (copy / "sys").mkdir(parents=True)
    (copy / "proc").symlink_to("/proc")
    why = fixture_reason(Namespace(sysfs_root=str(copy), nvml_library=None))
    assert why is not None and f"--sysfs-root {copy} is a gathered tree" in why and "--nvml-library" not in why
    why = fixture_reason(Namespace(sysfs_root="/", nvml_library=str(tmp_path / "libnvidia-ml.so.1")))
    assert why is not None and "is a file, not the system's NVML" in why and "--sysfs-root" not in why


@pytest.mark.slow
def test_serve_on_a_profile_serves_it_and_runs_no_probe(tmp_path: Path) -> None:
    s = start_serve(tmp_path, "--probe-tests", "host_memcpy", "--log-format", "json")  # default: probe at start
    try:
        metrics = s.metrics()
        assert "topolink_gpu_info{" in metrics and 'source="measured"' not in metrics
        events = [json.loads(line) for line in s.log_text().splitlines() if line.startswith("{")]
        (off,) = [e for e in events if e["event"] == "probes off"]
        assert off["reason"].startswith("discovery reads a machine from elsewhere: --sysfs-root ")
        assert "--nvml-library " in off["reason"]
        assert not any(e["event"].startswith("probe pass") for e in events)
        assert get(s.url + "/v1/probe")[0] != 200
    finally:
        assert s.stop() == 0


def test_serve_refuses_the_probe_door_on_a_profile(tmp_path: Path) -> None:
    node = materialize("hgx-h100", tmp_path / "machine")
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_")} | node.env()
    proc = subprocess.run([str(Path(sys.executable).parent / "topolink"), "serve", "--host", "127.0.0.1", "--port",
                           str(free_port()), "--state-dir", str(tmp_path / "state"),
                           "--http-probe-token-file", str(token)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    line = proc.stderr.strip()
    assert line.startswith("topolink serve: --http-probe-token-file: refusing to measure: discovery reads a machine "
                           "from elsewhere: --sysfs-root ")
