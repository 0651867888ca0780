"""A GPU of a multi-node NVLink domain without a readable, completed fabric has its NVLink domain unknown:
no ``nvlink-domain`` label (never the node's name as if the node were the domain), exit 1."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.discovery import discover
from agent.discovery.access import DiscoveryContext, FsRoot
from tests.fakenvml import MACHINES, FakeNode
from tests.fakenvml.fixtures import MakeMachine
from tests.published import labels
from topology import Aspect, Snapshot

REPO = Path(__file__).resolve().parents[1]
GB200 = yaml.safe_load((MACHINES / "gb200-tray.yaml").read_text())


def snapshot(node: FakeNode) -> Snapshot:
    return discover(DiscoveryContext(root=FsRoot(node.root), nvml_library=str(node.nvml_library)))


def _gpu(**fabric: Any) -> dict[str, Any]:
    gpu = {k: v for k, v in GB200["gpu"].items() if k != "fabric"}
    return {"gpu": {**gpu, "fabric": fabric} if fabric else gpu}


def _exit(node: FakeNode) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_")} | node.env()
    return subprocess.run([sys.executable, "-m", "agent.cli", "discover", "--format", "json", "-o", os.devnull],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=120, check=False)


@pytest.mark.parametrize("overrides", [
    _gpu(),  # nvmlDeviceGetGpuFabricInfoV NOT_SUPPORTED on every GPU
    _gpu(state="in-progress", cluster_uuid="3f6c2a1e-8d4b-4c2f-9a57-0e1b2c3d4e5f", clique=1),
    _gpu(state="completed", cluster_uuid=None, clique=1),
], ids=["unreadable", "in-progress", "no-cluster-uuid"])
def test_gb200_without_its_fabric_has_no_domain(fake_machine: MakeMachine, overrides: dict[str, Any]) -> None:
    node = fake_machine("gb200-tray", overrides)
    snap = snapshot(node)
    k = snap.knowledge()
    assert snap.gpus and not any(k.knows(g.id, Aspect.FABRIC) for g in snap.gpus)
    assert any(p.message.startswith("a GPU's NVLink domain:") for p in snap.problems)
    assert not any(key.endswith(("/nvlink-domain", "gpu.clique")) for key in labels(snap))
    run = _exit(node)
    assert run.returncode == 1 and "fabric" in run.stderr, run.stderr[-500:]


def test_gb200_with_its_fabric_has_its_clique(fake_machine: MakeMachine) -> None:
    snap = snapshot(fake_machine("gb200-tray"))
    assert snap.complete
    assert labels(snap)["gpu.topology/nvlink-domain"] == "3f6c2a1e-8d4b-4c2f-9a57-0e1b2c3d4e5f.1"


def test_a_gb200_product_without_nvlink_read_still_needs_its_fabric(fake_machine: MakeMachine) -> None:
    snap = snapshot(fake_machine("gb200-tray", {**_gpu(), "nvlink": None}))
    assert not any(snap.knowledge().knows(g.id, Aspect.FABRIC) for g in snap.gpus)


def test_switches_on_the_node_need_no_fabric(fake_machine: MakeMachine) -> None:
    doc = yaml.safe_load((MACHINES / "hgx-h100.yaml").read_text())
    gpu = {k: v for k, v in doc["gpu"].items() if k != "fabric"}
    snap = snapshot(fake_machine("hgx-h100", {"gpu": gpu}))  # NVSwitches on this node's bus, no fabric info
    assert snap.complete and not any(g.fabric for g in snap.gpus)
    assert labels(snap)["gpu.topology/nvlink-domain"] == f"node_{snap.node}"  # its own, never its host name
