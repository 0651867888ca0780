"""Synthetic NVSwitch machines grown from hgx-h100 (``tests.fakenvml.write_scaled``): what the scaling
benchmark discovers, so they must be coherent machines, up to 64 GPUs through the test NVML."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pynvml
import pytest
import yaml

import topology as t
from agent.discovery import discover
from agent.discovery.access import DiscoveryContext, FsRoot, open_nvml
from tests.fakenvml import (
    ENV_CALLS,
    ENV_PROFILE,
    MACHINES,
    ProfileError,
    gpus_named,
    load_machine,
    materialize,
    write_scaled,
)

BASE = MACHINES / "hgx-h100.yaml"


def test_each_board_has_its_own_domain_numa_nodes_and_nics(tmp_path: Path) -> None:
    machine = load_machine(write_scaled(BASE, 16, tmp_path))
    base = load_machine(BASE)
    assert machine.name == "hgx-h100-x16"
    assert len(machine.gpus) == 16 and len(machine.nics) == 16
    assert machine.nvswitches == base.nvswitches  # one fabric: the switches are not repeated
    assert [n.node for n in machine.numa] == [0, 1, 2, 3]
    assert machine.numa[2].cpus == tuple(c + 192 for c in base.numa[0].cpus)
    assert [f.spec["name"] for f in machine.nics] == [f"mlx5_{i}" for i in range(16)]
    assert {g.bdf[:4] for g in machine.gpus} == {"0000", "0001"}
    assert Counter(g.numa for g in machine.gpus if g.bdf.startswith("0001:")) == {2: 4, 3: 4}
    assert [g.bdf[4:] for g in machine.gpus[8:]] == [g.bdf[4:] for g in base.gpus]


def test_a_gpu_count_that_is_not_whole_boards_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="multiple"):
        write_scaled(BASE, 12, tmp_path)


def test_the_written_profile_is_plain_yaml_without_a_reference(tmp_path: Path) -> None:
    doc = yaml.safe_load(write_scaled(BASE, 32, tmp_path).read_text())
    assert "reference" not in doc and len(doc["numa"]) == 8


def test_64_gpus_through_the_test_nvml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    node = materialize(write_scaled(BASE, 64, tmp_path), tmp_path / "node")
    monkeypatch.setenv(ENV_PROFILE, str(node.nvml_profile))
    monkeypatch.setenv(ENV_CALLS, str(node.calls_file))
    port = open_nvml(str(node.nvml_library))
    try:
        assert pynvml.nvmlDeviceGetCount() == 64
        first, last = pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.nvmlDeviceGetHandleByIndex(63)
        assert pynvml.nvmlDeviceGetTopologyCommonAncestor(first, last) == 50  # SYS: other board, other node
        assert pynvml.nvmlDeviceGetP2PStatus(first, last, 2) == 0  # NVLink P2P OK: one fabric
    finally:
        port.close()

    snap = discover(DiscoveryContext(root=FsRoot(node.root), nvml_library=str(node.nvml_library)))
    assert (len(snap.gpus), len(snap.nics), len(snap.numa_nodes)) == (64, 64, 16)
    assert snap.complete, snap.problems
    assert [i.size for i in t.nvlink_islands(snap)] == [64]
    pairs = Counter(tuple(sorted(gpus_named(k))) for k, n in node.calls().items() for _ in range(n)
                    if len(gpus_named(k)) == 2)
    assert len(pairs) == 64 * 63 // 2 and set(pairs.values()) == {6}  # every pair counted: 1 ancestor + 5 caps
