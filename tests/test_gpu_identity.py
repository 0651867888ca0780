"""A GPU's identity never comes from its position in a list.

A GPU lost at any call keeps its row and its NVML index, marked lost; the others keep theirs. NVML's index,
minor and UUID must agree with the driver's /proc list and be unique, or they are unknown. Labels and
ResourceSlice devices (``gpu-<minor>``) never carry one GPU's facts under another's name.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from agent.discovery import discover
from agent.discovery.access import DiscoveryContext, FsRoot
from agent.discovery.assemble import merge_nvml
from agent.discovery.sources.nvml import NvmlFacts, NvmlGpuFacts
from tests.fakenvml import FakeNode
from tests.fakenvml.fixtures import MakeMachine
from tests.published import devices, more_than_known
from topology import Aspect, Gpu, Snapshot, gpu_labels, ordered_gpus, topo_table

HGX_BUSES = ("0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0", "0000:9a:00.0", "0000:ab:00.0",
             "0000:ba:00.0", "0000:db:00.0")


def snapshot(node: FakeNode) -> Snapshot:
    return discover(DiscoveryContext(root=FsRoot(node.root), nvml_library=str(node.nvml_library)))


def rows(snap: Snapshot) -> dict[str, str]:
    """topo row name -> the bus id of the GPU in that row."""
    gpus = ordered_gpus(snap)
    return dict(zip(gpu_labels(gpus), (g.id for g in gpus), strict=True))


def lose(*rules: tuple[int, str, int]) -> dict[str, object]:
    return {"inject": [{"lose": gpu, "at": at, "nth": nth} for gpu, at, nth in rules]}


@pytest.mark.parametrize(("gpu", "at", "nth"), [
    (0, "nvmlDeviceGetHandleByIndex_v2", 1), (3, "nvmlDeviceGetHandleByIndex_v2", 1),
    (7, "nvmlDeviceGetHandleByIndex_v2", 1), (2, "nvmlDeviceGetPciInfo_v3", 1), (4, "nvmlDeviceGetMinorNumber", 1),
    (5, "nvmlDeviceGetNvLinkRemotePciInfo_v2", 7), (6, "nvmlDeviceGetTopologyCommonAncestor", 1),
    (1, "nvmlDeviceGetP2PStatus", 9)])
def test_a_lost_gpu_keeps_its_row_and_no_other_moves(fake_machine: MakeMachine, gpu: int, at: str, nth: int) -> None:
    clean = snapshot(fake_machine("hgx-h100"))
    faulty = snapshot(fake_machine("hgx-h100", lose((gpu, at, nth))))
    assert rows(faulty) == rows(clean) == {f"GPU{i}": bus for i, bus in enumerate(HGX_BUSES)}
    lost = [g for g in faulty.gpus if g.lost]
    assert [(g.index, g.id) for g in lost] == [(gpu, HGX_BUSES[gpu])]
    assert not faulty.complete
    k = faulty.knowledge()
    assert not k.knows(HGX_BUSES[gpu], Aspect.ALL)
    assert not any(k.knows(bus, Aspect.P2P) for bus in HGX_BUSES)  # every pair with the lost GPU is unknown
    table = topo_table(faulty)
    lost_row = next(r for r in table.rows if r.label == f"GPU{gpu}")
    assert {c for i, c in enumerate(lost_row.cells) if table.columns[i] != f"GPU{gpu}"} == {"LOST"}
    assert more_than_known(clean, faulty) == []


def test_two_gpus_lost_before_their_bus_ids_leave_the_others_numbered(fake_machine: MakeMachine) -> None:
    clean = snapshot(fake_machine("hgx-h100"))
    faulty = snapshot(fake_machine("hgx-h100", lose((2, "nvmlDeviceGetHandleByIndex_v2", 1),
                                                     (6, "nvmlDeviceGetHandleByIndex_v2", 1))))
    named = rows(faulty)
    assert {k: v for k, v in named.items() if re.fullmatch(r"GPU\d+", k)} == {
        f"GPU{i}": bus for i, bus in enumerate(HGX_BUSES) if i not in (2, 6)}
    assert {k for k in named if not re.fullmatch(r"GPU\d+", k)} == {f"GPU({HGX_BUSES[2]})", f"GPU({HGX_BUSES[6]})"}
    k = faulty.knowledge()
    assert not any(k.knows(HGX_BUSES[i], Aspect.IDENTITY) for i in (2, 6))
    assert more_than_known(clean, faulty) == []


def _rewrite(path: Path, pattern: str, replacement: str) -> None:
    text = path.read_text()
    new = re.sub(pattern, replacement, text)
    assert new != text
    path.write_text(new)


def test_a_minor_the_driver_disputes_is_unknown_and_names_no_device(fake_machine: MakeMachine) -> None:
    clean = snapshot(fake_machine("hgx-h100"))
    node = fake_machine("hgx-h100")
    _rewrite(node.root / "proc/driver/nvidia/gpus" / HGX_BUSES[3] / "information", r"Device Minor: \t 3",
             "Device Minor: \t 4")
    snap = snapshot(node)
    gpu = next(g for g in snap.gpus if g.id == HGX_BUSES[3])
    assert gpu.minor is None and not snap.knowledge().knows(gpu.id, Aspect.IDENTITY)
    assert any("minor" in p.message and p.subject == gpu.id for p in snap.problems)
    assert "gpu-3" not in devices(snap) and "gpu-4" in devices(snap)
    assert more_than_known(clean, snap) == []


def test_a_uuid_the_driver_disputes_is_unknown(fake_machine: MakeMachine) -> None:
    node = fake_machine("hgx-h100")
    _rewrite(node.root / "proc/driver/nvidia/gpus" / HGX_BUSES[1] / "information", r"GPU UUID: \t GPU-\w",
             "GPU UUID: \t GPU-z")
    snap = snapshot(node)
    gpu = next(g for g in snap.gpus if g.id == HGX_BUSES[1])
    assert gpu.uuid is None and not snap.knowledge().knows(gpu.id, Aspect.IDENTITY)


def test_a_minor_two_gpus_claim_names_neither(fake_machine: MakeMachine) -> None:
    clean = snapshot(fake_machine("a30-4x-nvlink-pairs"))
    node = fake_machine("a30-4x-nvlink-pairs")
    _rewrite(node.nvml_profile, r"gpu 2 minor 2", "gpu 2 minor 1")
    _rewrite(node.root / "proc/driver/nvidia/gpus" / node.machine.gpus[2].bdf / "information",
             r"Device Minor: \t 2", "Device Minor: \t 1")
    snap = snapshot(node)
    assert [g.minor for g in ordered_gpus(snap)] == [0, None, None, 3]
    assert set(devices(snap)) == {"gpu-0", "gpu-3"} | {n for n in devices(clean) if n.startswith("nic-")}
    assert more_than_known(clean, snap) == []


def test_one_bus_id_for_two_nvml_gpus_places_neither() -> None:
    bus = "0000:3b:00.0"
    sysfs = Snapshot(node="n", gpus=(Gpu(id=bus),))
    snap = merge_nvml(sysfs, NvmlFacts(gpus=(NvmlGpuFacts(index=0, bus_id=bus, uuid="GPU-a", minor=0),
                                             NvmlGpuFacts(index=1, bus_id=bus, uuid="GPU-b", minor=1))))
    (gpu,) = snap.gpus
    assert gpu.index is None and gpu.uuid is None  # neither NVML GPU's facts land on it
    k = snap.knowledge()
    assert not k.knows(bus, Aspect.IDENTITY) and not k.knows("node", Aspect.GPUS)


def test_rows_are_named_by_nvml_index_or_bus_id_never_by_position() -> None:
    gpus = (Gpu(id="0000:18:00.0"), Gpu(id="0000:2a:00.0"))
    assert gpu_labels(gpus) == ("GPU(0000:18:00.0)", "GPU(0000:2a:00.0)")
    mixed = (Gpu(id="0000:18:00.0", index=1), Gpu(id="0000:2a:00.0"))
    assert gpu_labels(mixed) == ("GPU1", "GPU(0000:2a:00.0)")


def test_a_node_whose_driver_keeps_no_gpu_list_disputes_nothing(fake_machine: MakeMachine) -> None:
    """No /proc/driver/nvidia/gpus (a gathered tree without it, a container's own /proc): a second witness
    that is absent, not one that lists no GPU."""
    clean = snapshot(fake_machine("hgx-h100"))
    node = fake_machine("hgx-h100")
    shutil.rmtree(node.root / "proc/driver/nvidia/gpus")
    snap = snapshot(node)
    assert snap.knowledge().knows("node", Aspect.GPUS)
    assert [g.id for g in ordered_gpus(snap)] == [g.id for g in ordered_gpus(clean)]
    assert not any("driver-gpus" in p.message or p.subject == "nvidia" for p in snap.problems)


def test_a_driver_list_that_names_no_gpu_disputes_nvml(fake_machine: MakeMachine) -> None:
    node = fake_machine("hgx-h100")
    for listed in (node.root / "proc/driver/nvidia/gpus").iterdir():
        shutil.rmtree(listed)
    snap = snapshot(node)
    assert not snap.knowledge().knows("node", Aspect.GPUS)
