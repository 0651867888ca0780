"""A machine holding more than a snapshot may (``topology.SNAPSHOT_LIMITS``) is not read past the limit:
the source that lists it fails with a problem naming the count and the limit, what it covers is unknown,
and the snapshot is incomplete (exit 1), never a command doing work without bound."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import topology as t
from agent.discovery import discover
from agent.discovery.access import DiscoveryContext, FsRoot
from tests.sysfs_tree import SysfsTree

REPO = Path(__file__).resolve().parents[1]


def _entries(directory: Path, names: list[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / name).mkdir()  # listed before any is read: their content does not matter


def _failed(snap: t.Snapshot, source: str, limit: int) -> None:
    status = {o.name: o.status for o in snap.sources}
    assert status[source] is t.SourceStatus.FAILED and not snap.complete
    (problem,) = [p for p in snap.problems if p.source == source]
    assert f"{limit + 1}, more than the {limit} topolink reads" in problem.message
    assert problem.unknown


@pytest.mark.slow  # tens of thousands of directories
def test_more_pci_functions_than_the_limit_fail_the_pci_source(tmp_path: Path) -> None:
    limit = t.SNAPSHOT_LIMITS["pci"]
    tree = SysfsTree(tmp_path)
    tree.pci("pci0000:00/0000:00:01.0")
    _entries(tmp_path / "sys/bus/pci/devices", [f"0001:{i >> 8:02x}:{i >> 3 & 0x1f:02x}.{i & 7}" for i in range(limit)])
    snap = discover(DiscoveryContext(root=FsRoot(tmp_path), node_name="n1"), ("pci",))
    _failed(snap, "pci", limit)


def test_more_rdma_devices_than_the_nic_limit_fail_the_infiniband_source(tmp_path: Path) -> None:
    limit = t.SNAPSHOT_LIMITS["nics"]
    _entries(tmp_path / "sys/class/infiniband", [f"mlx5_{i}" for i in range(limit + 1)])
    snap = discover(DiscoveryContext(root=FsRoot(tmp_path), node_name="n1"), ("infiniband",))
    _failed(snap, "infiniband", limit)


@pytest.mark.slow
def test_discover_on_such_a_tree_says_so_and_exits_1(tmp_path: Path) -> None:
    limit = t.SNAPSHOT_LIMITS["nics"]
    _entries(tmp_path / "sys/class/infiniband", [f"mlx5_{i}" for i in range(limit + 1)])
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_")}
    run = subprocess.run([sys.executable, "-m", "agent.cli", "discover", "--sysfs-root", str(tmp_path),
                          "--format", "dot"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
                         check=False)
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr and "infiniband failed" in run.stderr
