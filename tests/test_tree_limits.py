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


def _round_trips(snap: t.Snapshot) -> None:
    """What discovery writes, the reader reads: every list within its limit, the document accepted."""
    from agent.discovery.assemble import witnessed

    for name, limit in t.SNAPSHOT_LIMITS.items():
        assert len(getattr(snap, name)) <= limit, name
    witnessed(t.loads(t.dumps(snap)))


@pytest.mark.slow  # 300 GPU functions
def test_more_gpus_on_the_bus_than_a_snapshot_holds_are_left_out_and_said(tmp_path: Path) -> None:
    tree = SysfsTree(tmp_path)
    limit = t.SNAPSHOT_LIMITS["gpus"]
    for i in range(limit + 44):  # 200 GPUs a PCI domain, each behind its root port
        domain, bus = f"{i // 200:04x}", f"{1 + i % 200:02x}"
        tree.pci(f"pci{domain}:00/{domain}:00:00.0/{domain}:{bus}:00.0", vendor="0x10de", device="0x2330",
                 cls="0x030200")
    snap = discover(DiscoveryContext(root=FsRoot(tmp_path), node_name="n1"), ("pci",))
    assert len(snap.gpus) == limit and not snap.complete
    assert any(f"{limit + 44} GPUs, more than the {limit}" in p.message for p in snap.problems)
    _round_trips(snap)


def test_numa_nodes_whose_pairs_make_more_links_than_a_snapshot_holds(tmp_path: Path) -> None:
    tree = SysfsTree(tmp_path)
    n = 257  # 257 * 256 / 2 = 32,896 node pairs, over the 32,768 links a snapshot holds
    for i in range(n):
        tree.node(i, str(i), distance=" ".join("10" if j == i else "20" for j in range(n)))
    snap = discover(DiscoveryContext(root=FsRoot(tmp_path), node_name="n1"), ("numa",))
    assert len(snap.numa_nodes) == n and not snap.complete
    assert any("numa links left out" in p.message for p in snap.problems)
    _round_trips(snap)
