"""Each machine profile's test NVML agrees with its real ``nvidia-smi topo -m`` output (tests/data/topo).

What ``topolink topo`` prints for each profile is checked in test_golden_topo.py; here, what NVML itself
answers about the same machine.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from agent.discovery import discover
from agent.discovery.access import DiscoveryContext, FsRoot
from tests import topo_reference
from tests.fakenvml import MACHINES, FakeNode
from tests.fakenvml.fixtures import MakeMachine
from tests.reference_data import NVLINK
from topology import LinkKind, Snapshot

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


def _nvlink_output(name: str) -> dict[int, list[str]]:
    """``nvidia-smi nvlink -s`` or ``-R``: GPU index -> the text after ``Link N:`` of each listed link."""
    links: dict[int, list[str]] = {}
    index = -1
    for line in (NVLINK / name).read_text().splitlines():
        if m := re.match(r"GPU (\d+): ", line):
            index = int(m[1])
            links[index] = []
        elif m := re.match(r"\s+Link \d+: (.+)", line):
            links[index].append(m[1])
    return links


def test_a6000_pairs_have_the_links_nvidia_smi_nvlink_lists(fake_machine: MakeMachine) -> None:
    """Every GPU of the real node that ``nvlink -s`` lists has 4 links at NVLink 3's 14.062 GB/s."""
    real = _nvlink_output("rtx-a6000-8x-nvlink-s-unige.txt")
    snap = _discovered(fake_machine("a6000-8x-nvlink-pairs"))
    by_index = {g.index: g.id for g in snap.gpus}
    assert set(real) == set(by_index)
    for index, links in real.items():
        assert links == ["14.062 GB/s"] * 4
        ours = [lk for lk in snap.links if lk.kind is LinkKind.NVLINK and by_index[index] in (lk.a, lk.b)]
        assert sum(lk.count for lk in ours) == len(links), index
        assert {lk.nvlink_version for lk in ours} == {3}


def test_h100_gpu0_reaches_the_nvswitches_nvidia_smi_nvlink_names(fake_machine: MakeMachine) -> None:
    """GPU0 of the real HGX H100 (``nvlink -R``): 18 links spread over 4 NVSwitches at 05..08:00.0."""
    real = _nvlink_output("h100-nvlink-R-nccl-1182.txt")
    switches = Counter(re.sub(r"Remote Device [0-9A-F]{4}([0-9A-F:.]+): Link \d+", r"\1", r).lower() for r in real[0])
    snap = _discovered(fake_machine("hgx-h100"))
    gid = next(g.id for g in snap.gpus if g.index == 0)
    ours = Counter({(lk.b if lk.a == gid else lk.a): lk.count for lk in snap.links
                    if lk.kind is LinkKind.NVLINK and gid in (lk.a, lk.b)})
    assert sorted(ours.values()) == sorted(switches.values()) and sum(ours.values()) == 18
    assert set(ours) == set(switches)
