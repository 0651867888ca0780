"""Contradictions between two readings are problems that leave the disputed fact unknown, never a side
picked silently; and none of the checks fires on the real machines' trees or the machine profiles."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.discovery import discover
from agent.discovery.access import DiscoveryContext, FsRoot
from agent.discovery.assemble import CHECK_OF, CHECKS, WITNESSES, Stage, cross_check, witness_markdown
from tests.docs_support import marked
from tests.fakenvml import MACHINES, FakeNode
from tests.fakenvml.fixtures import MakeMachine
from tests.fuzz.oracle import diff
from tests.published import labels, more_than_known
from tests.reference_data import DISPUTED, hwloc_tarballs
from topology import NODE, Aspect, PathIndex, Snapshot, SourceStatus

PROFILES = sorted(p.stem for p in MACHINES.glob("*.yaml"))


def snapshot(node: FakeNode) -> Snapshot:
    return discover(DiscoveryContext(root=FsRoot(node.root), nvml_library=str(node.nvml_library)))


def raised(snap: Snapshot) -> list[str]:
    """What the witness table's rows say of ``snap``: its cross-checks run again, and the problems the rows
    checked elsewhere (assembly, the NVML merge, the sources) left in it."""
    elsewhere = [p for p in snap.problems for w in WITNESSES
                 if w.stage != Stage.CROSS_CHECK and p.source == w.source and p.message.startswith(w.fact + ":")]
    return [f"{p.source} {p.subject}: {p.message}" for p in [*(p for c in CHECKS for p in c(snap)), *elsewhere]]


@pytest.mark.parametrize("profile", PROFILES)
def test_no_check_fires_on_a_machine_profile(fake_machine: MakeMachine, profile: str) -> None:
    snap = snapshot(fake_machine(profile))
    assert raised(snap) == [] and snap.complete


@pytest.mark.parametrize("tarball", hwloc_tarballs(), ids=lambda p: p.name.removesuffix(".tar.bz2"))
def test_checks_on_real_machines_trees(hwloc_tree: Callable[[str], Path], tarball: Path) -> None:
    name = tarball.name.removesuffix(".tar.bz2")
    snap = discover(DiscoveryContext(root=FsRoot(hwloc_tree(tarball.name)), node_name=name))
    found = raised(snap)
    if name in DISPUTED:
        assert [f.split(" ")[0] for f in found] == [DISPUTED[name]], found
    else:
        assert found == [], found


def _edit(path: Path, pattern: str, replacement: str) -> None:
    text = path.read_text()
    new = re.sub(pattern, replacement, text, count=1)
    assert new != text, (path, pattern)
    path.write_text(new)


def _hgx(node: FakeNode) -> Path:
    return node.root / "sys"


def _pci(node: FakeNode, bdf: str) -> Path:
    return node.root / "sys/bus/pci/devices" / bdf


CASES: dict[str, tuple[Callable[[FakeNode], None], str, tuple[tuple[str, Aspect], ...]]] = {
    "a cpu in two numa nodes": (
        lambda n: _edit(_hgx(n) / "devices/system/node/node1/cpulist", r"^48", "47-48"), "numa",
        ((NODE, Aspect.NUMA),)),
    "a numa node 11 from itself": (
        lambda n: _edit(_hgx(n) / "devices/system/node/node0/distance", r"^10 ", "11 "), "numa",
        ((NODE, Aspect.NUMA),)),
    "a gpu in another node than its root complex": (
        lambda n: _edit(_pci(n, "0000:18:00.0") / "numa_node", r"0", "1"), "pci",
        (("0000:18:00.0", Aspect.NUMA),)),
    "a nic in another node than its root complex": (
        lambda n: _edit(_pci(n, "0000:9b:00.0") / "numa_node", r"1", "0"), "pci",
        (("0000:9b:00.0", Aspect.NUMA),)),
    "a link wider than its maximum": (
        lambda n: _edit(_pci(n, "0000:2a:00.0") / "current_link_width", r"16", "32"), "pci",
        (("0000:2a:00.0", Aspect.PCIE_LINK),)),
    "nvml's ancestor against the tree": (
        lambda n: _edit(n.nvml_profile, r"pair 0 1 ancestor \d+", "pair 0 1 ancestor 10"), "nvml",
        (("0000:18:00.0", Aspect.PCIE_PATH), ("0000:2a:00.0", Aspect.PCIE_PATH))),
    "mellanox bound to mlx5_core without /sys/class/infiniband": (
        lambda n: shutil.rmtree(_hgx(n) / "class/infiniband"), "infiniband", ((NODE, Aspect.NICS),)),
    "an infiniband hca with no rdma device": (
        lambda n: (_hgx(n) / "class/infiniband/mlx5_3").unlink(), "infiniband", ((NODE, Aspect.NICS),)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_contradiction_is_a_problem_and_its_fact_unknown(fake_machine: MakeMachine, case: str) -> None:
    edit, source, facts = CASES[case]
    clean = snapshot(fake_machine("hgx-h100"))
    node = fake_machine("hgx-h100")
    edit(node)
    snap = snapshot(node)
    k = snap.knowledge()
    assert any(p.source == source and p.unknown for p in snap.problems if p not in clean.problems), snap.problems
    assert not any(k.knows(subject, aspect) for subject, aspect in facts)
    assert not snap.complete
    assert diff(clean, snap) == []  # whatever changed is marked unknown
    assert more_than_known(clean, snap) == []  # and nothing derived from it is published


def test_rdma_unknown_is_not_rdma_no(fake_machine: MakeMachine) -> None:
    node = fake_machine("hgx-h100")
    shutil.rmtree(node.root / "sys/class/infiniband")
    snap = snapshot(node)
    assert next(o.status for o in snap.sources if o.name == "infiniband") is SourceStatus.FAILED
    assert not any(key.endswith(("/rdma-nics", "/gdr", "/gpu-nic-path")) for key in labels(snap))


def test_a_gpu_numa_contradiction_makes_its_cells_unknown(fake_machine: MakeMachine) -> None:
    node = fake_machine("hgx-h100")
    CASES["a gpu in another node than its root complex"][0](node)
    snap = cross_check(snapshot(node))
    index = PathIndex(snap)
    across = [g.id for g in snap.gpus if g.id != "0000:18:00.0" and index.numa_of(g.id) == 1]
    assert {str(index.pcie_class("0000:18:00.0", other)) for other in across} == {"N/A"}


def test_the_documented_witness_table_is_generated_from_the_code() -> None:
    _, section = marked("witness-table")
    assert section == witness_markdown()
    assert all(f"| `{w.key}` |" in section for w in WITNESSES)


def test_every_cross_check_row_has_its_check_and_every_check_its_row() -> None:
    rows = [w.key for w in WITNESSES if w.stage == Stage.CROSS_CHECK]
    assert sorted(rows) == sorted(CHECK_OF) and tuple(CHECK_OF[k] for k in rows) == CHECKS
    assert len({w.key for w in WITNESSES}) == len(WITNESSES)
