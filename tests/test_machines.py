"""Each machine profile's test NVML agrees with its real ``nvidia-smi topo -m`` output (shared/reference/topo).

What ``topolink topo`` prints for each profile is checked in test_golden_topo.py; here, what NVML itself
answers about the same machine.
"""

from __future__ import annotations

import pytest

from agent._context import DiscoveryContext
from agent._fsroot import FsRoot
from agent.discover import discover
from tests import topo_reference
from tests.fakenvml import MACHINES, FakeNode
from tests.fakenvml.fixtures import MakeMachine
from topology import Snapshot

PROFILES = sorted(p.stem for p in MACHINES.glob("*.yaml"))
_LEVEL_NAME = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}

def _discovered(node: FakeNode) -> Snapshot:
    return discover(DiscoveryContext(root=FsRoot(node.root), nvml_library=str(node.nvml_library)))


def _ids(snap: Snapshot, ref: topo_reference.TopoReference) -> dict[str, str]:
    """Reference device name -> snapshot entity id (GPUk by NVML index; NICs by legend, else by name order)."""
    gpus = {f"GPU{g.index}": g.id for g in snap.gpus if g.index is not None}
    nics = {n.name: n.id for n in snap.nics}
    ordered = sorted(nics)
    out = {}
    for device in ref.devices:
        if device in gpus:
            out[device] = gpus[device]
        elif device in ref.nic_legend:
            out[device] = nics[ref.nic_legend[device]]
        else:
            out[device] = nics[ordered[ref.nics.index(device)]]
    return out


@pytest.mark.parametrize("profile", PROFILES)
def test_the_test_nvml_answers_the_reference_pcie_levels(fake_machine: MakeMachine, profile: str) -> None:
    """NVML's common ancestor (as the fake computes it from the profile's tree) is the reference's class
    wherever the reference shows the PCIe class of a GPU pair (no NVLink between them)."""
    node = fake_machine(profile)
    ref = topo_reference.load(node.machine.raw["reference"])
    snap = _discovered(node)
    levels = snap.matrix("nvml_common_ancestor")
    assert levels is not None
    ids = _ids(snap, ref)
    for a in ref.gpus:
        for b in ref.gpus:
            cell = ref.cell(a, b)
            if a != b and not cell.startswith("NV"):
                assert _LEVEL_NAME[int(levels.get(ids[a], ids[b]) or 0)] == cell, (a, b)
