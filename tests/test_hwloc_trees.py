"""Discovery agrees with hwloc: on real machines' gathered sysfs trees and on this machine.

Every ``.test`` file in hwloc's Linux test data names a gathered tree and hwloc's expected output for it;
the expected files are parsed (tests/hwloc_expected.py), no number is copied by hand. On this machine
``lstopo`` from the Debian ``hwloc`` package is run and its XML compared the same way.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

import topology as t
from agent.discovery import discover
from agent.discovery.access import DiscoveryContext, FsRoot
from tests.hwloc_expected import Expected, Spec, load, read_test
from tests.reference_data import DISPUTED, HWLOC_LINUX
from topology import replace

TESTS = sorted(HWLOC_LINUX.glob("*.test"))

# Environment settings of .test files and what they change in hwloc's output. A setting not listed here
# fails the test: its effect must be understood before the comparison can be trusted.
KEEP_GPU_NUMA = "HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES"  # without it hwloc hides GPU memory NUMA nodes
FORCED_LOCALITY = "HWLOC_PCI_LOCALITY"  # replaces the kernel's PCI locality: hwloc shows the setting
KNOWN_ENV = (KEEP_GPU_NUMA, FORCED_LOCALITY)


def always_kept(class_id: int) -> bool:
    """PCI classes hwloc's default filter keeps (display, network, storage, processors, fibre channel,
    InfiniBand, accelerators); others (bridges, USB, host bridge functions) it may leave out."""
    return class_id >> 8 in (0x01, 0x02, 0x03, 0x0B, 0x12) or class_id in (0x0C04, 0x0C06)


def invalid_bridges(root: Path, snap: t.Snapshot) -> set[str]:
    """Bridges hwloc drops because their secondary/subordinate bus numbers in config space cannot be right
    (00 behind bus 00, as on a disabled root port). Discovery keeps them: the function is there."""
    out = set()
    for f in snap.pci:
        config = (root / "sys/bus/pci/devices" / f.id / "config").read_bytes() if f.is_bridge else b""
        if len(config) > 0x1A:
            bus, secondary, subordinate = int(f.id.split(":")[1], 16), config[0x19], config[0x1A]
            if secondary <= bus or subordinate <= bus or secondary > subordinate:
                out.add(f.id)
    return out


@dataclass
class Case:
    spec: Spec
    root: Path
    expected: Expected
    snap: t.Snapshot

    def env_set(self, name: str) -> bool:
        return any(f"{name}=" in e for e in self.spec.env)

    def our_nodes(self) -> dict[int, t.NumaNode]:
        hide_gpu = not self.env_set(KEEP_GPU_NUMA)
        return {n.os_index: n for n in self.snap.numa_nodes if not (hide_gpu and n.gpu_memory)}


def test_reference_trees_are_there() -> None:
    assert TESTS, f"no hwloc .test files in {HWLOC_LINUX}"


@pytest.fixture(scope="module", params=TESTS, ids=lambda p: p.stem)
def case(request: pytest.FixtureRequest, hwloc_tree: Callable[[str], Path]) -> Case:
    spec = read_test(request.param)
    unknown = [e for e in spec.env if not e.startswith(("export", *KNOWN_ENV))]
    assert not unknown, f"{spec.name}: environment settings of unknown effect on hwloc: {unknown}"
    root = hwloc_tree(spec.source)
    snap = discover(DiscoveryContext(root=FsRoot(root), node_name=spec.name))
    return Case(spec, root, load(HWLOC_LINUX / spec.target), snap)


def test_every_source_read_the_tree(case: Case) -> None:
    """Failed only where a cross-check disputes what the source read (tests/test_crosschecks.py)."""
    disputed = DISPUTED.get(case.spec.source.removesuffix(".tar.bz2"))
    assert [o.name for o in case.snap.sources if o.status is t.SourceStatus.FAILED and o.name != disputed] == []


def test_numa_nodes(case: Case) -> None:
    assert set(case.our_nodes()) == set(case.expected.numa)


def test_numa_node_cpus(case: Case) -> None:
    ours = case.our_nodes()
    assert set().union(*(n.cpus for n in ours.values())) == case.expected.pus
    for idx, node in ours.items():
        if node.cpus:  # hwloc gives a CPU-less node the CPUs of where it attaches it: that is locality
            assert set(node.cpus) == case.expected.numa[idx].cpus, f"numa{idx}"


def test_numa_node_memory(case: Case) -> None:
    for idx, node in case.our_nodes().items():
        exp = case.expected.numa[idx]
        assert node.memory_bytes is not None
        if exp.memory_exact:
            assert node.memory_bytes == exp.memory_bytes, f"numa{idx}"
        else:  # lstopo -v prints whole units (46GiB): ours rounds to the same number of that unit
            unit = next(u for u in (1 << 40, 1 << 30, 1 << 20, 1 << 10) if exp.memory_bytes % u == 0)
            assert round(node.memory_bytes / unit) * unit == exp.memory_bytes, f"numa{idx}"


def test_gpu_memory_nodes(case: Case) -> None:
    gpus = {g.id: g for g in case.snap.gpus}
    ours = case.our_nodes()
    for idx, exp in case.expected.numa.items():
        assert ours[idx].gpu_memory is (exp.gpu_bus_id is not None), f"numa{idx}"
        if exp.gpu_bus_id is not None:
            assert gpus[exp.gpu_bus_id].gpu_numa_id == idx


def test_numa_distances(case: Case) -> None:
    matrix = case.snap.matrix("numa_distance")
    if case.expected.latency is None:  # hwloc prints no matrix for a single node
        assert len(case.our_nodes()) == 1
        return
    assert matrix is not None
    assert matrix.kind == t.MatrixKind.FROM_OS | t.MatrixKind.LATENCY
    ours = {(a, b): matrix.get(t.numa_id(a), t.numa_id(b)) for a in case.our_nodes() for b in case.our_nodes()}
    assert ours == case.expected.latency


def test_pci_functions(case: Case) -> None:
    """Every function hwloc shows is found with its ids and class. With --whole-io the sets are equal;
    hwloc's default output leaves minor classes out, so then only the classes it always keeps must match."""
    ours = {f.id: f for f in case.snap.pci}
    for bdf, exp in case.expected.pci.items():
        f = ours[bdf]
        assert (f.vendor_id, f.device_id, f.class_code >> 8) == (exp.vendor_id, exp.device_id, exp.class_id), bdf
    if "--whole-io" in case.spec.options:
        assert set(ours) - invalid_bridges(case.root, case.snap) == set(case.expected.pci)
    else:
        assert {b for b, f in ours.items() if always_kept(f.class_code >> 8)} <= set(case.expected.pci)


def test_pci_tree(case: Case) -> None:
    """Each function's parent is hwloc's: the nearest upstream function hwloc shows, or its host bridge."""
    ours = {f.id: f for f in case.snap.pci}
    bridges = {h.id for h in case.snap.host_bridges}
    for bdf, exp in case.expected.pci.items():
        parent = ours[bdf].parent
        while parent in ours and parent not in case.expected.pci:  # left out by hwloc, or not in its copy
            parent = ours[parent].parent
        assert parent == exp.parent, bdf
        # a copy that does not link the function into /sys/devices does not say its root: unknown, not made up
        assert parent in bridges or parent in ours or not case.snap.knowledge().knows(bdf, t.Aspect.PCIE_PATH)


def test_pci_numa_locality(case: Case) -> None:
    """A function's NUMA node is the kernel's ``numa_node`` (-1: none; never inferred from local CPUs, as
    nvidia-smi does not). Where it names a node, hwloc attached the function near that node's CPUs.
    (hwloc's own placement of a -1 function by its local CPUs is a view topolink does not take.)"""
    ours = {f.id: f for f in case.snap.pci}
    cpu_nodes = {n.os_index: set(n.cpus) for n in case.snap.numa_nodes if n.cpus}
    for bdf in case.expected.pci:
        attr = case.root.joinpath("sys/bus/pci/devices", bdf, "numa_node")
        raw = attr.read_text().strip() if attr.exists() else "-1"
        assert ours[bdf].numa_node == (None if raw == "-1" else int(raw)), bdf
    if case.env_set(FORCED_LOCALITY):
        return  # hwloc's output shows the forced setting, not sysfs
    for bdf, exp in case.expected.pci.items():
        got = ours[bdf].numa_node
        if got is not None:
            near = {i for i, cpus in cpu_nodes.items() if cpus & exp.locality}
            assert got in near, bdf


def test_pci_link_rates(case: Case) -> None:
    """Where both read a link, the theoretical rate per direction is hwloc's (printed to 0.01 GB/s)."""
    for f in case.snap.pci:
        exp = case.expected.pci.get(f.id)
        if exp is None or exp.link_gbytes is None or f.link is None:
            continue
        rate = t.pcie_bytes_per_second(f.link.current_gen, f.link.current_width)
        assert rate is not None, f.id
        assert rate / 1e9 == pytest.approx(exp.link_gbytes, rel=0.01), f.id


def test_nics(case: Case) -> None:
    """hwloc's network and RDMA OS devices sit on the PCI functions our NICs name."""
    nics = {n.pci_bus_id: n for n in case.snap.nics}
    for bdf, exp in case.expected.pci.items():
        if not (exp.netdevs or exp.rdma):
            continue
        nic = nics[bdf]
        assert exp.netdevs <= set(nic.netdevs), bdf
        assert nic.rdma is bool(exp.rdma), bdf
        if exp.rdma:
            assert {nic.name} == exp.rdma, bdf


def test_discovery_is_deterministic(case: Case) -> None:
    again = discover(DiscoveryContext(root=FsRoot(case.root), node_name=case.spec.name))

    def timeless(s: t.Snapshot) -> t.Snapshot:
        return replace(s, taken_at=None, sources=tuple(replace(o, duration_seconds=0.0) for o in s.sources))

    assert t.dumps(timeless(again)) == t.dumps(timeless(case.snap))


def test_this_machine_agrees_with_lstopo(tmp_path: Path) -> None:
    """NUMA nodes, their CPUs and every PCI function, against ``lstopo --of xml`` run here."""
    exe = shutil.which("lstopo-no-graphics") or shutil.which("lstopo")
    if exe is None:
        message = "lstopo not found: install the Debian package hwloc (apt-get install hwloc)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(f"LIVE COMPARISON NOT RUN: {message}")
    # --whole-system: ignore cgroup limits, as discovery does; --whole-io: every PCI function.
    out = subprocess.run([exe, "--of", "xml", "--whole-system", "--whole-io", "-"], capture_output=True,
                         text=True, check=True, timeout=120)
    (tmp_path / "lstopo.xml").write_text(out.stdout)
    expected = load(tmp_path / "lstopo.xml")
    snap = discover(DiscoveryContext(), ["numa", "pci"])
    nodes = {n.os_index: n for n in snap.numa_nodes if not n.gpu_memory}  # hwloc hides GPU memory nodes
    assert set(nodes) == set(expected.numa)
    for idx, node in nodes.items():
        if node.cpus:
            assert set(node.cpus) == expected.numa[idx].cpus, f"numa{idx}"
    ours = {f.id: f for f in snap.pci}
    assert set(ours) - invalid_bridges(Path("/"), snap) == set(expected.pci)
    for bdf, exp in expected.pci.items():
        assert (ours[bdf].vendor_id, ours[bdf].device_id) == (exp.vendor_id, exp.device_id), bdf


def test_the_snapshot_of_each_tree_reads_back(case: Case) -> None:
    """What discovery writes from a real tree is a snapshot ``--from`` accepts: every id it names is its own."""
    assert t.loads(t.dumps(case.snap)) == case.snap
