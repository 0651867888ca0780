"""NVML that does not answer while NVIDIA GPUs are on the bus is a failure, never "no NVLink".

The normal state of a GPU node at boot: the driver container is still loading, ``nvmlInit`` says
DRIVER_NOT_LOADED (or the library is not there yet) and the GPUs sit on the PCI bus bound to ``nvidia`` or
to nothing. Every NVLink, identity, P2P, fabric and MIG fact of them is unknown until NVML answers. GPUs
handed to virtual machines (``vfio-pci``) or excluded by the driver are not the host's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agent.discovery import discover
from agent.discovery.access import DiscoveryContext, FsRoot
from tests.fakenvml import MACHINES, FakeNode
from tests.fakenvml.fixtures import MakeMachine
from tests.published import more_than_known
from topology import Aspect, LinkKind, PathIndex, Snapshot, SourceStatus, matrix, no_gpu_reason

REPO = Path(__file__).resolve().parents[1]
NVML_ONLY = (Aspect.NVLINKS, Aspect.IDENTITY, Aspect.P2P, Aspect.FABRIC, Aspect.MIG)


def snapshot(node: FakeNode, library: str | None = None) -> Snapshot:
    return discover(DiscoveryContext(root=FsRoot(node.root), nvml_library=library or str(node.nvml_library)))


def init_fails(code: str) -> dict[str, object]:
    return {"inject": [{"call": "nvmlInitWithFlags", "error": code}]}


def gpus_as(profile: str, **attrs: object) -> dict[str, object]:
    """Overrides giving every GPU of ``profile`` these attributes (its ``driver``, say)."""
    doc = yaml.safe_load((MACHINES / f"{profile}.yaml").read_text())
    return {"gpu": {**doc["gpu"], **attrs}}


def assert_nvml_unknown(snap: Snapshot, status: SourceStatus = SourceStatus.FAILED) -> None:
    assert next(o.status for o in snap.sources if o.name == "nvml") is status
    assert not snap.complete
    k = snap.knowledge()
    assert snap.gpus and not any(k.knows(g.id, a) for g in snap.gpus for a in NVML_ONLY)
    assert not [lk for lk in snap.links if lk.kind is LinkKind.NVLINK]
    index = PathIndex(snap)
    cells = {str(index.path(a.id, b.id)) for a in snap.gpus for b in snap.gpus if a.id != b.id}
    assert cells == {"N/A"}  # never NODE or SYS between GPUs that may have 18 NVLinks


@pytest.mark.parametrize("code", ["DRIVER_NOT_LOADED", "LIB_RM_VERSION_MISMATCH", "UNKNOWN", "NO_PERMISSION"])
def test_init_failure_with_gpus_on_the_bus_leaves_nvml_facts_unknown(fake_machine: MakeMachine, code: str) -> None:
    clean = snapshot(fake_machine("hgx-h100"))
    faulty = snapshot(fake_machine("hgx-h100", init_fails(code)))
    assert_nvml_unknown(faulty)
    assert code in next(o.detail for o in faulty.sources if o.name == "nvml")
    assert more_than_known(clean, faulty) == []  # no label says interconnect=pcie, no slice nvlinkCount=0
    assert not any(key.endswith("/interconnect") for key in _labels(faulty))


def _labels(snap: Snapshot) -> dict[str, str]:
    from tests.published import labels

    return labels(snap)


def test_missing_library_with_gpus_on_the_bus_is_a_failure(fake_machine: MakeMachine, tmp_path: Path) -> None:
    node = fake_machine("dgx-a100")
    assert_nvml_unknown(snapshot(node, str(tmp_path / "libnvidia-ml.so.1")))


def test_gpus_waiting_for_a_driver_are_nvmls(fake_machine: MakeMachine) -> None:
    """Bound to no driver: the driver container has not loaded the module yet."""
    node = fake_machine("a30-4x-nvlink-pairs", {**gpus_as("a30-4x-nvlink-pairs", driver=None), "nvlink": None,
                                                **init_fails("DRIVER_NOT_LOADED")})
    assert_nvml_unknown(snapshot(node))


def test_a_gathered_tree_without_its_nvml_is_not_complete(fake_machine: MakeMachine) -> None:
    node = fake_machine("hgx-h100")
    snap = discover(DiscoveryContext(root=FsRoot(node.root)))  # no NVML library: NVML is not asked
    assert_nvml_unknown(snap, SourceStatus.DISABLED)


def test_gpus_passed_through_to_virtual_machines_are_not_the_hosts(fake_machine: MakeMachine) -> None:
    node = fake_machine("rtx4090-8x", {**gpus_as("rtx4090-8x", driver="vfio-pci"), **init_fails("DRIVER_NOT_LOADED")})
    snap = snapshot(node)
    assert snap.gpus == () and snap.complete
    assert next(o.status for o in snap.sources if o.name == "nvml") is SourceStatus.ABSENT
    assert len([f for f in snap.pci if f.vendor_id == 0x10DE and f.class_code >> 8 == 0x0300]) == 8
    assert sum("vfio-pci" in p.message and not p.unknown for p in snap.problems) == 8
    reason = no_gpu_reason(snap)
    assert reason is not None and "vfio-pci" in reason


def test_passthrough_and_excluded_gpus_beside_the_hosts_own(fake_machine: MakeMachine) -> None:
    doc = {"pci": [{"host_bridge": "0000:00", "numa": 0, "gen": 4, "children": [
        {"gpu": {}}, {"gpu": {"driver": "vfio-pci"}}, {"gpu": {"excluded": True}}, {"gpu": {}}]}]}
    node = fake_machine("rtx5090-2x", doc)
    snap = snapshot(node)
    assert [g.index for g in snap.gpus] == [0, 1] and snap.complete, snap.problems
    assert {p.subject for p in snap.problems if "not a GPU of this host" in p.message} == {
        f.bdf for f in node.machine.of_kind("gpu")} - {g.id for g in snap.gpus}


def test_cli_exit_status_while_the_driver_loads(fake_machine: MakeMachine) -> None:
    node = fake_machine("hgx-h100", init_fails("DRIVER_NOT_LOADED"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_")} | node.env()
    run = subprocess.run([sys.executable, "-m", "agent.cli", "topo"], capture_output=True, text=True, cwd=REPO,
                         env=env, timeout=120, check=False)
    assert run.returncode == 1, run.stderr
    assert "nvml failed" in run.stderr and "nvlinks" in run.stderr
    rows = [line.split("\t") for line in run.stdout.splitlines() if line.startswith("GPU")]
    assert len(rows) == 8 and all(row[1 + j] == "N/A" for i, row in enumerate(rows) for j in range(8) if i != j)
    assert matrix(snapshot(node)) == run.stdout


def test_nvml_answering_after_n_failed_inits_gives_the_whole_machine(fake_machine: MakeMachine) -> None:
    node = fake_machine("hgx-h100", {"inject": [{"call": "nvmlInitWithFlags", "error": "DRIVER_NOT_LOADED",
                                                  "first": 2}]})
    first, second, third = (snapshot(node) for _ in range(3))
    assert not first.complete and not second.complete
    assert third.complete and {str(PathIndex(third).path(third.gpus[0].id, g.id)) for g in third.gpus[1:]} == {"NV18"}
