"""The NVML source and its merge into the sysfs snapshot, on machine profiles through the test NVML."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import pytest
import yaml

import topology as t
from agent.discovery import discover
from agent.discovery.access import DiscoveryContext, FsRoot
from agent.discovery.assemble._nvml import merge_nvml
from agent.discovery.sources import SubsystemAbsent
from agent.discovery.sources.nvml import REMOTE_SWITCH, NvmlFacts, read_nvml
from tests.fakenvml import MACHINES, FakeNode, gpus_named
from tests.fakenvml.fixtures import MakeMachine
from topology import Aspect, FabricState, LinkKind, PathIndex, Snapshot, SourceStatus

SYS_FUNCS = ("nvmlInitWithFlags", "nvmlSystemGetDriverVersion", "nvmlSystemGetNVMLVersion",
             "nvmlSystemGetCudaDriverVersion", "nvmlDeviceGetCount_v2")


def ctx(node: FakeNode, library: str | None = None) -> DiscoveryContext:
    return DiscoveryContext(root=FsRoot(node.root), nvml_library=library or str(node.nvml_library))


def facts(node: FakeNode) -> NvmlFacts:
    return read_nvml(ctx(node))


def snapshot(node: FakeNode, sources: Iterable[str] | None = None) -> Snapshot:
    return discover(ctx(node), sources)


def nv(snap: Snapshot, a: int, b: int) -> str:
    ids = {g.index: g.id for g in snap.gpus}
    return str(PathIndex(snap).path(ids[a], ids[b]))


def nvml_problems(snap: Snapshot) -> list[str]:
    return [f"{p.subject}: {p.message}" for p in snap.problems if p.source == "nvml"]


def test_facts_of_an_hgx_h100(fake_machine: MakeMachine) -> None:
    f = facts(fake_machine("hgx-h100"))
    assert (f.driver_version, f.nvml_version, f.cuda_driver_version) == ("570.124.06", "12.570.124.06", "12.8")
    assert [g.bus_id for g in f.gpus] == ["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
                                          "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"]
    g = f.gpus[5]
    assert (g.name, g.memory_bytes, g.minor, g.pci_device_id) == ("NVIDIA H100 80GB HBM3", 81559 * 2**20, 5, 0x2330)
    assert (g.compute_capability, g.architecture, g.mig_enabled, g.gpu_numa_id) == ((9, 0), "hopper", False, None)
    assert g.memory_affinity == (1,) and g.cpu_affinity == tuple([*range(48, 96), *range(144, 192)])
    assert g.pcie is not None and (g.pcie.current_gen, g.pcie.max_width) == (5, 16)
    assert g.fabric is not None and g.fabric.state is FabricState.COMPLETED
    assert (g.fabric.cluster_uuid, g.fabric.clique) == (None, None)  # all-zero UUID: NVLink, but no clique
    assert (g.nvlink_count, g.nvswitch_link_count, len(g.links)) == (18, 18, 18)
    assert {(link.active, link.version, link.remote_type) for link in g.links} == {(True, 6, REMOTE_SWITCH)}
    assert Counter(link.remote_bus_id for link in g.links) == {"0000:05:00.0": 4, "0000:06:00.0": 5,
                                                               "0000:07:00.0": 5, "0000:08:00.0": 4}
    assert len(f.pairs) == 28
    pair = next(p for p in f.pairs if (p.a, p.b) == (0, 4))
    assert (pair.common_ancestor, pair.p2p) == (50, ((0, 0), (1, 0), (2, 0), (3, 0), (4, 0)))
    assert f.problems == ()


def test_merge_gives_nv18_through_four_visible_nvswitches(fake_machine: MakeMachine) -> None:
    snap = snapshot(fake_machine("hgx-h100"))
    assert [g.index for g in snap.gpus] == list(range(8))
    assert [(s.id, s.visible_on_pci) for s in snap.nvswitches] == [(f"0000:0{i}:00.0", True) for i in (5, 6, 7, 8)]
    nvlinks = [link for link in snap.links if link.kind is LinkKind.NVLINK]
    assert len(nvlinks) == 32
    per_gpu: Counter[str] = Counter()
    for link in nvlinks:
        per_gpu[link.b] += link.count
        assert link.nvlink_version == 4
        assert link.bytes_per_second == 25e9 * link.count
    assert set(per_gpu.values()) == {18}
    assert {nv(snap, a, b) for a in range(8) for b in range(8) if a != b} == {"NV18"}
    assert dict(snap.versions) == {"cuda_driver": "12.8", "nvidia_driver": "570.124.06", "nvml": "12.570.124.06"}
    ancestor = snap.matrix("nvml_common_ancestor")
    assert ancestor is not None and ancestor.get("0000:18:00.0", "0000:2a:00.0") == 40.0
    assert ancestor.get("0000:18:00.0", "0000:18:00.0") == -1.0
    assert snap.problems == ()


def test_sentinel_switches_become_one_synthetic_nvswitch_on_gb200(fake_machine: MakeMachine) -> None:
    snap = snapshot(fake_machine("gb200-tray"))
    assert [(s.id, s.visible_on_pci) for s in snap.nvswitches] == [("nvswitch0", False)]
    nvlinks = [link for link in snap.links if link.kind is LinkKind.NVLINK]
    assert {(link.a, link.count, link.nvlink_version, link.bytes_per_second) for link in nvlinks} == \
        {(g.id, 18, 5, 900e9) for g in snap.gpus}
    assert {nv(snap, a, b) for a in range(4) for b in range(4) if a != b} == {"NV18"}
    assert [g.gpu_numa_id for g in snap.gpus] == [2, 10, 18, 26]
    assert {g.fabric.clique for g in snap.gpus if g.fabric} == {"3f6c2a1e-8d4b-4c2f-9a57-0e1b2c3d4e5f.1"}
    assert snap.problems == ()


def test_field_147_counts_the_links_behind_the_sentinel(fake_machine: MakeMachine) -> None:
    doc = yaml.safe_load((MACHINES / "gb200-tray.yaml").read_text())
    snap = snapshot(fake_machine("gb200-tray", {"nvlink": {**doc["nvlink"], "down": {1: [17]}}}))
    assert (nv(snap, 0, 1), nv(snap, 0, 2), nv(snap, 1, 3)) == ("NV17", "NV18", "NV17")


def test_direct_links_are_counted_once_per_pair(fake_machine: MakeMachine) -> None:
    snap = snapshot(fake_machine("dgx1-v100"))
    nvlinks = [link for link in snap.links if link.kind is LinkKind.NVLINK]
    assert len(nvlinks) == 16 and not snap.nvswitches
    assert (nv(snap, 0, 3), nv(snap, 0, 1), nv(snap, 0, 5), nv(snap, 6, 7)) == ("NV2", "NV1", "SYS", "NV2")
    assert {link.bytes_per_second for link in nvlinks} == {25e9, 50e9}


def test_a_link_down_lowers_nv_for_that_gpu_only(fake_machine: MakeMachine) -> None:
    doc = yaml.safe_load((MACHINES / "hgx-h100.yaml").read_text())
    snap = snapshot(fake_machine("hgx-h100", {"nvlink": {**doc["nvlink"], "down": {2: [0, 9]}}}))
    assert (nv(snap, 2, 5), nv(snap, 0, 5)) == ("NV16", "NV18")


def test_mig_instances_under_their_gpu(fake_machine: MakeMachine) -> None:
    doc = yaml.safe_load((MACHINES / "a30-4x-nvlink-pairs.yaml").read_text())
    doc["pci"][1]["children"][0]["gpu"] = {"mig": {"enabled": True, "max": 4, "instances": [
        {"gi": 1, "ci": 0, "profile": "2g.12gb", "memory_mib": 11968},
        {"gi": 5, "ci": 0, "profile": "1g.6gb", "memory_mib": 5952}]}}
    snap = snapshot(fake_machine("a30-4x-nvlink-pairs", {"pci": doc["pci"]}))
    gpu1 = snap.gpus[1]
    assert gpu1.mig_enabled is True
    assert [(m.gpu_instance_id, m.compute_instance_id, m.profile, m.memory_bytes) for m in gpu1.mig_instances] == \
        [(1, 0, "2g.12gb", 11968 * 2**20), (5, 0, "1g.6gb", 5952 * 2**20)]
    assert [g.mig_enabled for g in snap.gpus] == [False, True, False, False]


def test_fabric_falls_back_to_the_v2_struct_on_an_older_driver(fake_machine: MakeMachine) -> None:
    node = fake_machine("gb200-tray", {"gpu": {**yaml.safe_load((MACHINES / "gb200-tray.yaml").read_text())["gpu"],
                                               "fabric": {"state": "in-progress", "clique": 0,
                                                          "max_struct_version": 2}}})
    f = facts(node)
    assert {g.fabric.state for g in f.gpus if g.fabric} == {FabricState.IN_PROGRESS}
    assert all(g.fabric is not None and g.fabric.clique is None for g in f.gpus)
    calls = node.calls()
    assert calls["nvmlDeviceGetGpuFabricInfoV(0,3)"] == calls["nvmlDeviceGetGpuFabricInfoV(0,2)"] == 1
    assert f.problems == ()


def test_geforce_p2p_status_in_the_merged_matrices(fake_machine: MakeMachine) -> None:
    snap = snapshot(fake_machine("rtx5090-2x"))
    read = snap.matrix("nvml_p2p_read")
    assert read is not None and read.values == ((-1.0, 2.0), (2.0, -1.0))  # GPU_NOT_SUPPORTED (GNS)
    assert not [link for link in snap.links if link.kind is LinkKind.NVLINK]
    assert snap.problems == ()


def _nvlink(profile: str, **changes: object) -> dict[str, object]:
    return {"nvlink": {**yaml.safe_load((MACHINES / f"{profile}.yaml").read_text())["nvlink"], **changes}}


def test_remote_of_unknown_type_is_classed_by_its_pci_function(fake_machine: MakeMachine) -> None:
    snap = snapshot(fake_machine("hgx-h100", _nvlink("hgx-h100", remote_type="unknown")))
    assert {nv(snap, a, b) for a in range(8) for b in range(8) if a != b} == {"NV18"}
    assert len(snap.nvswitches) == 4 and snap.problems == ()


def test_remote_neither_gpu_nor_switch_is_a_problem(fake_machine: MakeMachine) -> None:
    snap = snapshot(fake_machine("hgx-h100", _nvlink("hgx-h100", remote_type="ibmnpu")))
    assert not [link for link in snap.links if link.kind is LinkKind.NVLINK]
    assert sum("neither a GPU nor an NVSwitch" in p for p in nvml_problems(snap)) == 8 * 18


def test_unknown_nvlink_version_is_a_problem_and_no_rate(fake_machine: MakeMachine) -> None:
    snap = snapshot(fake_machine("a6000-8x-nvlink-pairs", _nvlink("a6000-8x-nvlink-pairs", version_enum=99)))
    nvlinks = [link for link in snap.links if link.kind is LinkKind.NVLINK]
    assert [(link.count, link.nvlink_version, link.bytes_per_second) for link in nvlinks] == [(4, None, None)] * 4
    assert sum("unknown NVLink version" in p for p in nvml_problems(snap)) == 4


def test_ends_that_disagree_on_a_bond_are_a_problem(fake_machine: MakeMachine) -> None:
    snap = snapshot(fake_machine("dgx1-v100", _nvlink("dgx1-v100", down={0: [2]})))  # GPU0's link 2 goes to GPU3
    assert nv(snap, 0, 3) == "N/A"  # which end is right is not known: no guess
    assert [p for p in nvml_problems(snap) if "read at one end" in p] == [
        "0000:1a:00.0,0000:3e:00.0: NVLinks between two GPUs: the count read at one end says 1 (0000:1a:00.0), "
        "the count read at the other says 2 (0000:3e:00.0): nvlinks unknown"]
    knows = snap.knowledge()
    assert not knows.knows("0000:1a:00.0", t.Aspect.NVLINKS) and not knows.knows("0000:3e:00.0", t.Aspect.NVLINKS)
    assert nv(snap, 1, 2) == "NV2" and not snap.complete


@pytest.mark.parametrize(("fabric", "problem"), [({"state": 9}, "unknown fabric state 9"),
                                                 ({"state": "completed", "status": 999}, "probe status")])
def test_odd_fabric_answers_are_problems(fake_machine: MakeMachine, fabric: dict[str, object], problem: str) -> None:
    doc = yaml.safe_load((MACHINES / "gb200-tray.yaml").read_text())
    snap = snapshot(fake_machine("gb200-tray", {"gpu": {**doc["gpu"], "fabric": fabric}}))
    assert sum(problem in p for p in nvml_problems(snap)) == 4


def test_link_and_mig_call_failures_are_problems(fake_machine: MakeMachine) -> None:
    doc = yaml.safe_load((MACHINES / "a30-4x-nvlink-pairs.yaml").read_text())
    doc["pci"][0]["children"][0]["gpu"] = {"mig": {"enabled": True, "max": 4, "instances": [
        {"gi": 1, "ci": 0, "profile": "4g.24gb", "memory_mib": 23936}]}}
    snap = snapshot(fake_machine("a30-4x-nvlink-pairs", {"pci": doc["pci"], "inject": [
        {"call": "nvmlDeviceGetNvLinkState", "gpu": 1, "link": 2, "error": "NOT_SUPPORTED"},
        {"call": "nvmlDeviceGetNvLinkState", "gpu": 1, "link": 3, "error": "UNKNOWN"},
        {"call": "nvmlDeviceGetMigDeviceHandleByIndex", "gpu": 0, "error": "NO_PERMISSION"}]}))
    problems = nvml_problems(snap)
    assert "0000:32:00.0: nvmlDeviceGetNvLinkState: NVML_ERROR_NOT_SUPPORTED (link 2)" in problems
    assert "0000:32:00.0: nvmlDeviceGetNvLinkState: NVML_ERROR_UNKNOWN (link 3)" in problems
    assert sum("nvmlDeviceGetMigDeviceHandleByIndex" in p for p in problems) == 4  # one per slot
    assert nv(snap, 0, 1) == "N/A"  # GPU1's links 2 and 3 are unknown: NV4 would be a guess
    assert not snap.knowledge().knows("0000:32:00.0", t.Aspect.NVLINKS)
    assert snap.gpus[0].mig_enabled is True and snap.gpus[0].mig_instances == ()


@pytest.mark.parametrize("error", ["NOT_SUPPORTED", "NO_PERMISSION", "UNKNOWN"])
def test_a_failed_call_is_a_problem_and_the_rest_is_read(fake_machine: MakeMachine, error: str) -> None:
    snap = snapshot(fake_machine("hgx-h100", {"inject": [
        {"call": "nvmlDeviceGetUUID", "gpu": 1, "error": error},
        {"call": "nvmlDeviceGetP2PStatus", "gpu": 6, "error": error},
        {"call": "nvmlDeviceGetNvLinkVersion", "gpu": 7, "link": 4, "error": error}]}))
    problems = nvml_problems(snap)
    assert f"0000:2a:00.0: nvmlDeviceGetUUID: NVML_ERROR_{error}" in problems
    assert sum("nvmlDeviceGetP2PStatus" in p for p in problems) == 7 * 5
    assert f"0000:db:00.0: nvmlDeviceGetNvLinkVersion: NVML_ERROR_{error}" in problems
    assert snap.gpus[1].uuid is None and snap.gpus[1].name == "NVIDIA H100 80GB HBM3"
    assert {nv(snap, a, b) for a in range(7) for b in range(7) if a != b} == {"NV18"}
    assert {nv(snap, 7, b) for b in range(7)} == {"N/A"}  # GPU7's link 4 version: its NVLinks are unknown
    knows = snap.knowledge()
    assert not knows.knows("0000:2a:00.0", t.Aspect.IDENTITY) and knows.knows("0000:2a:00.0", t.Aspect.NVLINKS)
    assert not knows.knows(snap.gpus[6].id, t.Aspect.P2P) and not snap.complete
    assert not any(g.lost for g in snap.gpus)


def test_not_supported_where_the_hardware_lacks_the_feature_is_no_problem(fake_machine: MakeMachine) -> None:
    snap = snapshot(fake_machine("rtx4090-8x"))  # no NVLink, MIG, fabric or GPU NUMA id on GeForce/x86
    assert snap.problems == ()
    assert [(g.mig_enabled, g.fabric, g.gpu_numa_id) for g in snap.gpus] == [(None, None, None)] * 8


def _calls_after_loss(calls: dict[str, int], gpu: int, at: str, nth: int) -> list[str]:
    """Calls naming ``gpu`` made after the ``nth`` call of ``at`` that made it fall off the bus."""
    naming = [k for k in calls if gpu in gpus_named(k)]
    losing = [k for k in naming if k.startswith(at + "(")][nth - 1]
    return naming[naming.index(losing) + 1:]


@pytest.mark.parametrize(("at", "nth"), [("nvmlDeviceGetHandleByIndex_v2", 1), ("nvmlDeviceGetName", 1),
                                         ("nvmlDeviceGetNvLinkState", 5)])
def test_gpu_lost_mid_discovery_gives_a_consistent_snapshot(fake_machine: MakeMachine, at: str, nth: int) -> None:
    node = fake_machine("hgx-h100", {"inject": [{"lose": 3, "at": at, "nth": nth}]})
    snap = snapshot(node)
    gpu3 = next(g for g in snap.gpus if g.id == "0000:5d:00.0")
    lost_problems = [p for p in nvml_problems(snap) if "GPU_IS_LOST" in p]
    assert len(lost_problems) == 1
    nvlinks = [link for link in snap.links if link.kind is LinkKind.NVLINK]
    assert all(gpu3.id not in (link.a, link.b) for link in nvlinks)  # a lost GPU carries nothing
    others = [g.index for g in snap.gpus if g.index is not None and g.index != 3]
    assert {nv(snap, a, b) for a in others for b in others if a != b} == {"NV18"}
    calls = node.calls()
    assert max(calls.values()) == 1
    assert _calls_after_loss(calls, 3, at, nth) == []  # nothing more was asked of it
    assert gpu3.lost and gpu3.index == 3  # it keeps its row and its number; no other GPU takes either
    assert lost_problems[0].startswith("0000:5d:00.0: ")
    if at == "nvmlDeviceGetHandleByIndex_v2":  # no bus id from NVML: the driver's list says which GPU it is
        assert any("the only GPU of the driver's list that no other NVML GPU names" in p for p in nvml_problems(snap))
    else:
        assert gpu3.uuid is not None  # what was read before stays


def test_gpu_lost_during_pair_calls_is_found_by_one_probe_each(fake_machine: MakeMachine) -> None:
    node = fake_machine("hgx-h100", {"inject": [{"lose": 5, "at": "nvmlDeviceGetP2PStatus", "nth": 3}]})
    snap = snapshot(node)
    assert [g.index for g in snap.gpus if g.lost] == [5]
    calls = node.calls()
    assert max(calls.values()) == 1
    assert [k for k in calls if k.startswith("nvmlDeviceGetIndex")] == \
        ["nvmlDeviceGetIndex(0)", "nvmlDeviceGetIndex(5)"]  # the pair (0, 5) said GPU_IS_LOST: which one?
    assert _calls_after_loss(calls, 5, "nvmlDeviceGetP2PStatus", 3) == ["nvmlDeviceGetIndex(5)"]
    assert any(p.startswith("0000:ab:00.0: nvmlDeviceGetIndex: NVML_ERROR_GPU_IS_LOST") for p in nvml_problems(snap))


def test_missing_library_with_gpus_on_the_bus_is_a_failure(fake_machine: MakeMachine, tmp_path: Path) -> None:
    """No library while the nvidia driver's GPUs are on the bus: the driver is not up, not "no NVLink"."""
    node = fake_machine("hgx-h100")
    snap = discover(ctx(node, str(tmp_path / "libnvidia-ml.so.1")))
    outcome = next(o for o in snap.sources if o.name == "nvml")
    assert outcome.status is SourceStatus.FAILED and "libnvidia-ml.so.1" in outcome.detail
    assert [g.index for g in snap.gpus] == [None] * 8  # found by PCI alone
    assert [s.id for s in snap.nvswitches] == [f"0000:0{i}:00.0" for i in (5, 6, 7, 8)]
    assert not snap.complete
    k = snap.knowledge()
    assert not any(k.knows(g.id, a) for g in snap.gpus for a in (Aspect.NVLINKS, Aspect.IDENTITY, Aspect.P2P))


def test_no_driver_loaded_is_absent(fake_machine: MakeMachine) -> None:
    node = fake_machine("hgx-h100", {"inject": [{"call": "nvmlInitWithFlags", "error": "DRIVER_NOT_LOADED"}]})
    with pytest.raises(SubsystemAbsent, match="DRIVER_NOT_LOADED"):
        facts(node)


def test_init_failure_is_one_clear_problem_and_sysfs_only(fake_machine: MakeMachine) -> None:
    node = fake_machine("dgx-a100", {"inject": [{"call": "nvmlInitWithFlags", "error": "LIB_RM_VERSION_MISMATCH"}]})
    snap = snapshot(node)
    assert nvml_problems(snap) == [
        "nvml: NVML did not initialise: nvmlInitWithFlags: NVML_ERROR_LIB_RM_VERSION_MISMATCH",
        "nvml: NVML not read (failed): identity, NVLinks, P2P, fabric and MIG of the GPUs found on the PCI bus "
        "are unknown"]
    assert not snap.complete
    assert len(snap.gpus) == 8 and {g.index for g in snap.gpus} == {None}


def test_fixture_root_without_its_own_library_keeps_nvml_off(fake_machine: MakeMachine) -> None:
    node = fake_machine("rtx5090-2x")
    with pytest.raises(SubsystemAbsent, match="sysfs root"):
        read_nvml(DiscoveryContext(root=FsRoot(node.root)))


def test_nvml_alone_places_gpus_by_bus_id(fake_machine: MakeMachine) -> None:
    snap = snapshot(fake_machine("dgx-a100"), ["nvml"])
    assert [g.id for g in snap.gpus] == ["0000:07:00.0", "0000:0f:00.0", "0000:47:00.0", "0000:4e:00.0",
                                         "0000:87:00.0", "0000:90:00.0", "0000:b7:00.0", "0000:bd:00.0"]
    assert [(s.id, s.visible_on_pci) for s in snap.nvswitches][:1] == [("0000:c4:00.0", False)]
    assert PathIndex(snap).nvlinks(snap.gpus[0].id, snap.gpus[7].id) == 12


@pytest.mark.parametrize(("profile", "counts"), [("a6000-8x-nvlink-pairs", [4, 4, 4, 4]),
                                               ("gb200-tray", [18, 18, 18, 18]), ("hgx-h100", [4, 5, 5, 4] * 8)])
def test_merge_is_pure_and_idempotent(fake_machine: MakeMachine, profile: str, counts: list[int]) -> None:
    node = fake_machine(profile)
    f = facts(node)
    sysfs_only = discover(ctx(node), ["pci", "numa", "infiniband", "net"])
    once = merge_nvml(sysfs_only, f)
    assert merge_nvml(once, f) == once
    assert sysfs_only.gpus[0].index is None  # the input is untouched
    nvlinks = sorted((link for link in once.links if link.kind is LinkKind.NVLINK), key=lambda k: (k.b, k.a))
    assert [link.count for link in nvlinks] == counts


def _expected_calls(node: FakeNode, max_links: int) -> int:
    """System calls + per GPU (21 without NVLink, or 19 + a state call per link + 3 per active link + the
    INVALID_ARGUMENT call) + 6 per unordered pair: O(G^2 + G x L)."""
    machine = node.machine
    links = int(machine.nvml["nvlink"].get("links", 0)) if machine.nvml["nvlink"] else 0
    plan_active = [line for line in node.nvml_profile.read_text().splitlines()
                   if line.startswith("gpu ") and " link " in line and line.split()[4] == "1"]
    g = len(machine.gpus)
    per_gpu_walk = (links + (1 if links < max_links else 0)) if links else 1
    return len(SYS_FUNCS) + g * (19 + per_gpu_walk) + 3 * len(plan_active) + 6 * g * (g - 1) // 2


@pytest.mark.parametrize("profile", ["hgx-h100", "dgx-a100", "gb200-tray", "dgx1-v100", "rtx4090-8x", "gh200"])
def test_calls_are_o_g2_plus_gl_and_none_repeated(fake_machine: MakeMachine, profile: str) -> None:
    import pynvml

    node = fake_machine(profile)
    f = facts(node)
    calls = node.calls()
    assert max(calls.values()) == 1, [k for k, v in calls.items() if v > 1]
    assert f.calls == sum(calls.values()) - calls["nvmlShutdown"]
    assert f.calls == _expected_calls(node, pynvml.NVML_NVLINK_MAX_LINKS)


def test_every_profile_discovers_without_problems(fake_machine: MakeMachine) -> None:
    for profile in sorted(p.stem for p in MACHINES.glob("*.yaml")):
        snap = snapshot(fake_machine(profile))
        assert snap.problems == (), profile
        assert all(g.index is not None and g.uuid for g in snap.gpus), profile



def test_cluster_uuid_text_is_rfc_4122_as_the_uuid_module_writes_it() -> None:
    import os
    import uuid

    from agent.discovery.sources._nvml_read import _uuid_text

    for raw in (bytes(16), bytes(range(16)), b"\xff" * 16, *(os.urandom(16) for _ in range(200))):
        assert _uuid_text(raw) == str(uuid.UUID(bytes=raw))


_SYSTEM_LOOKUP = """
import sys
from agent.discovery.access import NvmlLibraryNotFound, open_nvml
from agent.discovery.access._nvml_open import _default_library_loadable
found = _default_library_loadable()
print(found, "pynvml" in sys.modules)
try:
    port = open_nvml(None)
except NvmlLibraryNotFound as exc:
    print("not found", exc.code)
else:
    print("devices", port.device_count())
"""


@pytest.mark.parametrize("on_path", [True, False])
def test_the_system_library_is_looked_up_as_pynvml_would(fake_machine: MakeMachine, on_path: bool) -> None:
    """No library named: NVML is ``libnvidia-ml.so.1`` wherever the dynamic linker finds it (here the test
    NVML, by LD_LIBRARY_PATH) and the look-up itself does not import pynvml; where the linker finds none,
    pynvml is not even imported and the error is the one its nvmlInit raises (NVML_ERROR_LIBRARY_NOT_FOUND)."""
    import os
    import subprocess
    import sys

    node = fake_machine("hgx-h100")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_") and k != "LD_LIBRARY_PATH"}
    env.update({k: v for k, v in node.env().items() if k != "TOPOLINK_NVML_LIBRARY"})
    if on_path:
        env["LD_LIBRARY_PATH"] = str(node.nvml_library.parent)
    out = subprocess.run([sys.executable, "-c", _SYSTEM_LOOKUP], capture_output=True, text=True, env=env,
                         cwd=Path(__file__).resolve().parents[1], timeout=120, check=True).stdout.splitlines()
    if on_path:
        assert out == ["True False", "devices 8"]
    elif os.path.exists("/dev/nvidiactl"):
        pytest.skip("this machine has an NVIDIA driver: its own NVML would answer")
    else:
        assert out == ["False False", "not found 12"]


_LIBRARIES_IN_TURN = """
import sys
from agent.discovery.access import NvmlError, open_nvml
for label, library in zip(sys.argv[1::2], sys.argv[2::2]):
    try:
        print(label, open_nvml(library).device_count())
    except NvmlError as exc:
        print(label, exc.code, exc)
"""


@pytest.mark.parametrize("first", ["test NVML", "other"])
def test_a_process_has_one_nvml_library_and_sets_no_pynvml_internals(fake_machine: MakeMachine, first: str) -> None:
    """The library named is loaded by its path and nvidia-ml-py's own ``dlopen`` of ``libnvidia-ml.so.1`` gets it
    from the dynamic linker (its SONAME): nothing of pynvml is set. So a library under another SONAME (here libc)
    is refused with the reason, not handed to pynvml (whose nvmlInit would then fail on a missing function, 13),
    and once a process has its NVML, another library is refused and the first goes on answering."""
    import ctypes.util
    import os
    import subprocess
    import sys

    node = fake_machine("hgx-h100")
    libc = ctypes.util.find_library("c")
    assert libc is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_")}
    env.update({k: v for k, v in node.env().items() if k != "TOPOLINK_NVML_LIBRARY"})
    turns = {"test NVML": str(node.nvml_library), "other": libc}
    order = [first, *(t for t in turns if t != first), first]
    out = subprocess.run([sys.executable, "-c", _LIBRARIES_IN_TURN, *(x for t in order for x in (t, turns[t]))],
                         capture_output=True, text=True, env=env, cwd=Path(__file__).resolve().parents[1],
                         timeout=120, check=True).stdout.splitlines()
    if first == "other":  # 12: NVML_ERROR_LIBRARY_NOT_FOUND
        assert out[0].startswith("other 12 ") and "its SONAME is not libnvidia-ml.so.1" in out[0]
        assert out[1] == "test NVML 8"  # libc never became this process's NVML: the test NVML does
        assert out[2].startswith("other 12 ") and f"this process's NVML is {node.nvml_library} already" in out[2]
    else:
        assert out[0] == "test NVML 8" and out[2] == "test NVML 8"
        assert out[1].startswith("other 12 ") and f"this process's NVML is {node.nvml_library} already" in out[1]


@pytest.mark.parametrize(("profile", "enum", "why"), [
    ("a6000-8x-nvlink-pairs", 8, "NVLink 6 (nvmlNvlinkVersion_t [8]): unknown generation"),  # no rate in the table
    ("a6000-8x-nvlink-pairs", 7, "NVLink 5, and a GPU of the A6000 family has NVLink 3"),
    ("hgx-h100", 4, "NVLink 3, and a GPU of the H100 family has NVLink 4"),
])
def test_an_nvlink_generation_the_physics_table_refuses_is_a_problem(fake_machine: MakeMachine, profile: str,
                                                                      enum: int, why: str) -> None:
    snap = snapshot(fake_machine(profile, _nvlink(profile, version_enum=enum)))
    assert any(why in p for p in nvml_problems(snap)), nvml_problems(snap)
    k = snap.knowledge()
    assert not snap.complete and not any(k.knows(g.id, t.Aspect.NVLINKS) for g in snap.gpus)
    t.from_dict(t.to_dict(snap))  # what discovery writes, the reader reads


def test_the_source_and_its_facts_name_nvml_alike() -> None:
    """``sources.nvml`` names its source without loading its facts' module (a start-up cost): the two agree."""
    from agent.discovery.sources import _nvml_facts, nvml

    assert nvml.SOURCE == _nvml_facts.SOURCE == "nvml"
    assert nvml.NvmlFacts is _nvml_facts.NvmlFacts  # the names it re-exports load on first use
