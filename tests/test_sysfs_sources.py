"""The sysfs sources and the assembler on small trees laid out as the kernel does (relative symlinks).

Bad input (missing files, garbage, permission errors, numa_node -1, 32-bit PCI domains) must come out as
problems in the snapshot, never as an exception.
"""

from __future__ import annotations

import contextlib
import os
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import topology as t
from agent.discovery import discover
from agent.discovery.access import DiscoveryContext, FsRoot
from agent.discovery.sources import source_table
from agent.discovery.sources._pci_config import acs_request_redirect
from agent.discovery.sources._sysfs import Reader
from tests.sysfs_tree import SysfsTree

SYSFS_SOURCES = ("gdr", "infiniband", "net", "numa", "pci")
GPU = "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0"  # root port, switch up/down, GPU


@pytest.fixture
def tree(tmp_path: Path) -> SysfsTree:
    return SysfsTree(tmp_path)


def snap_of(tree: SysfsTree, *sources: str) -> t.Snapshot:
    return discover(DiscoveryContext(root=FsRoot(tree.base), node_name="n1"), sources or SYSFS_SOURCES)


def problems_of(snap: t.Snapshot, subject: str) -> list[str]:
    return [p.message for p in snap.problems if p.subject == subject]


def read_problems(snap: t.Snapshot) -> list[t.Problem]:
    """Problems of what was read: a source left out of a test is "turned off", which is no finding."""
    off = {o.name for o in snap.sources if o.status is t.SourceStatus.DISABLED}
    return [p for p in snap.problems if p.source not in off]


def two_nodes(tree: SysfsTree) -> None:
    tree.write("sys/devices/system/cpu/online", "0-7")
    tree.node(0, "0-3", distance="10 21")
    tree.node(1, "4-7", distance="21 10")


# ---- PCI -------------------------------------------------------------------------------------------------

def test_pcie_tree_follows_the_sysfs_path_and_finds_a_gpu_without_driver(tree: SysfsTree) -> None:
    two_nodes(tree)
    for hop in ("pci0000:00/0000:00:01.0", "pci0000:00/0000:00:01.0/0000:01:00.0",
                "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0"):
        tree.pci(hop, numa="1", cpus="4-7", driver="pcieport")
    tree.pci(GPU, vendor="0x10de", device="0x2330", cls="0x030200", numa="1", cpus="4-7",
             speed="16.0 GT/s PCIe", width="16", max_speed="32.0 GT/s PCIe", max_width="16")
    snap = snap_of(tree)
    pci = {f.id: f for f in snap.pci}
    assert [pci[b].parent for b in ("0000:00:01.0", "0000:01:00.0", "0000:02:08.0", "0000:03:00.0")] == \
        ["pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:08.0"]
    assert snap.host_bridges == (t.HostBridge(id="pci0000:00", domain=0, bus=0, numa_node=1),)
    (gpu,) = snap.gpus
    assert (gpu.id, gpu.index, gpu.pci_device_id, gpu.numa_node, gpu.cpu_affinity) == \
        ("0000:03:00.0", None, 0x2330, 1, (4, 5, 6, 7))
    assert gpu.pcie == t.PcieLinkState(current_gen=4, current_width=16, max_gen=5, max_width=16)
    assert gpu.pcie.downtrained and pci[gpu.id].driver is None
    assert pci["0000:00:01.0"].driver == "pcieport"
    link = next(x for x in snap.links if x.kind is t.LinkKind.PCIE)
    assert (link.a, link.b, link.bytes_per_second) == ("0000:03:00.0", "0000:02:08.0", 31.5e9)
    assert t.path(snap, gpu.id, gpu.id).kind is t.PathClass.SELF
    assert read_problems(snap) == []


def test_nvswitch_is_found_by_pci(tree: SysfsTree) -> None:
    tree.pci("pci0000:00/0000:00:05.0", vendor="0x10de", device="0x22a3", cls="0x068000")
    snap = snap_of(tree, "pci")
    assert snap.nvswitches == (t.NvSwitch(id="0000:00:05.0", pci_device_id=0x22A3),)
    assert snap.gpus == ()


def test_numa_node_minus_one_is_no_node_never_inferred_from_local_cpus(tree: SysfsTree) -> None:
    """One rule, as nvidia-smi: the kernel's -1 means no NUMA node (N/A affinity, SYS across roots)."""
    two_nodes(tree)
    tree.pci("pci0000:00/0000:00:02.0", cls="0x020000", numa="-1", cpus="4-7")
    tree.pci("pci0000:00/0000:00:03.0", cls="0x020000", numa="-1", cpus="0-7")
    tree.pci("pci0000:00/0000:00:04.0", cls="0x020000", numa="-1", cpus=None)
    tree.pci("pci0000:00/0000:00:05.0", cls="0x020000", numa="0", cpus="0-7")
    numa = {f.id: f.numa_node for f in snap_of(tree).pci}
    assert numa == {"0000:00:02.0": None, "0000:00:03.0": None, "0000:00:04.0": None, "0000:00:05.0": 0}


def test_numa_node_that_is_not_on_the_machine_is_a_problem(tree: SysfsTree) -> None:
    two_nodes(tree)
    tree.pci("pci0000:00/0000:00:02.0", numa="5", cpus="0-3")
    snap = snap_of(tree)
    assert snap.pci[0].numa_node is None  # unknown, and said so: never placed by its local CPUs
    assert problems_of(snap, "0000:00:02.0") == ["numa_node 5 is not a NUMA node of this machine"]
    assert not snap.knowledge().knows("0000:00:02.0", t.Aspect.NUMA) and not snap.complete


def test_garbage_values_are_problems_on_the_device(tree: SysfsTree) -> None:
    two_nodes(tree)
    tree.pci("pci0000:00/0000:00:02.0", cls="zzz", numa="x", cpus=None, speed="fast", width="-4")
    tree.write("sys/devices/pci0000:00/0000:00:02.0/local_cpus", "not-a-mask")
    tree.pci("pci0000:00/0000:00:03.0", cls="0x020000")
    snap = snap_of(tree)
    bad = next(f for f in snap.pci if f.id == "0000:00:02.0")
    assert (bad.class_code, bad.numa_node, bad.local_cpus, bad.link) == (0, None, None, None)
    assert sorted(problems_of(snap, "0000:00:02.0")) == [
        "class: cannot parse 'zzz'", "current_link_speed: cannot parse 'fast'",
        "current_link_width: cannot parse '-4'", "local_cpus: cannot parse 'not-a-mask'",
        "numa_node: cannot parse 'x'"]
    assert problems_of(snap, "0000:00:03.0") == []


def test_missing_required_attributes_are_problems_optional_ones_are_none(tree: SysfsTree) -> None:
    tree.pci("pci0000:00/0000:00:02.0", vendor=None, numa=None, cpus=None, speed="Unknown", width="0")
    (f,) = snap_of(tree, "pci").pci
    assert (f.vendor_id, f.numa_node, f.local_cpus) == (0, None, None)
    assert f.link is None  # width 0 is the kernel's "link down or unknown"
    assert problems_of(snap_of(tree, "pci"), f.id) == ["vendor: missing"]


def test_32_bit_pci_domains(tree: SysfsTree) -> None:
    tree.pci("pci10000:00/10000:00:04.0", cls="0x010000")
    tree.pci("pciffff:00/ffff:00:00.0")
    tree.pci("pci0000:00/0000:00:00.0")
    snap = snap_of(tree, "pci")
    assert [f.id for f in snap.pci] == ["0000:00:00.0", "ffff:00:00.0", "10000:00:04.0"]
    assert [h.id for h in snap.host_bridges] == ["pci0000:00", "pciffff:00", "pci10000:00"]
    assert snap.host_bridges[-1].domain == 0x10000
    assert snap.pci[-1].parent == "pci10000:00"
    assert read_problems(snap) == []


def test_vmd_domain_hangs_below_its_controller(tree: SysfsTree) -> None:
    tree.pci("pci0000:00/0000:00:0e.0", cls="0x010400")
    tree.pci("pci0000:00/0000:00:0e.0/pci10000:00/10000:00:02.0")
    tree.pci("pci0000:00/0000:00:0e.0/pci10000:00/10000:00:02.0/10000:01:00.0", cls="0x010802")
    parents = {f.id: f.parent for f in snap_of(tree, "pci").pci}
    assert parents == {"0000:00:0e.0": "pci0000:00", "10000:00:02.0": "0000:00:0e.0",
                       "10000:01:00.0": "10000:00:02.0"}


def test_function_on_the_path_but_not_in_the_bus_list_is_read_from_its_path(tree: SysfsTree) -> None:
    tree.pci("pci0000:5d/0000:5d:02.0")
    tree.pci("pci0000:5d/0000:5d:02.0/0000:5e:00.0", listed=False, device="0x37c0")
    tree.pci("pci0000:5d/0000:5d:02.0/0000:5e:00.0/0000:5f:00.0", cls="0x020000")
    pci = {f.id: f for f in snap_of(tree, "pci").pci}
    assert pci["0000:5f:00.0"].parent == "0000:5e:00.0"
    assert (pci["0000:5e:00.0"].parent, pci["0000:5e:00.0"].device_id) == ("0000:5d:02.0", 0x37C0)


def test_bus_list_entries_that_are_not_links_or_not_addresses_are_problems(tree: SysfsTree) -> None:
    tree.write("sys/bus/pci/devices/0004:05:00.0/class", "0x030000")
    tree.write("sys/bus/pci/devices/garbage/class", "0x030000")
    snap = snap_of(tree, "pci")
    (f,) = snap.pci
    # its root complex is not known: no host bridge is made up for it, and its path is unknown
    assert (f.id, f.parent, [h.id for h in snap.host_bridges]) == ("0004:05:00.0", "pci0004:05", [])
    assert any("not linked into /sys/devices" in m for m in problems_of(snap, "0004:05:00.0"))
    assert not snap.knowledge().knows("0004:05:00.0", t.Aspect.PCIE_PATH)
    assert problems_of(snap, "garbage") == ["/sys/bus/pci/devices/garbage: not a PCI address"]


def extended_config(*caps: tuple[int, int]) -> bytes:
    """4 KiB of config space with extended capabilities (id, control word) chained from 0x100."""
    config = bytearray(4096)
    for i, (cap_id, control) in enumerate(caps):
        offset, following = 0x100 + 0x40 * i, (0x100 + 0x40 * (i + 1) if i + 1 < len(caps) else 0)
        struct.pack_into("<IHH", config, offset, cap_id | 1 << 16 | following << 20, 0x5F, control)
    return bytes(config)


def test_acs_request_redirect_is_read_from_extended_config_space(tree: SysfsTree) -> None:
    aer, acs = 0x0001, 0x000D
    tree.pci("pci0000:00/0000:00:01.0", config=extended_config((aer, 0), (acs, 0x1D)))
    tree.pci("pci0000:00/0000:00:02.0", config=extended_config((aer, 0), (acs, 0x01)))
    tree.pci("pci0000:00/0000:00:03.0", config=extended_config((aer, 0)))
    tree.pci("pci0000:00/0000:00:04.0", config=bytes(64))  # what a non-root reader gets
    acs_on = {f.id: f.acs_enabled for f in snap_of(tree, "pci").pci}
    assert acs_on == {"0000:00:01.0": True, "0000:00:02.0": False, "0000:00:03.0": False, "0000:00:04.0": None}


def test_acs_capability_walk_stops_on_a_loop() -> None:
    config = bytearray(4096)
    struct.pack_into("<I", config, 0x100, 0x0001 | 0x100 << 20)  # next points at itself
    assert acs_request_redirect(bytes(config)) is False


@contextlib.contextmanager
def unprivileged() -> Iterator[None]:
    """Run the block as an ordinary user: root reads files whatever their mode."""
    if os.geteuid() != 0:
        yield
        return
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)


def test_permission_errors_are_problems_or_a_failed_source_never_an_exception() -> None:
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:  # readable by the unprivileged user
        os.chmod(tmp, 0o755)
        tree = SysfsTree(Path(tmp))
        two_nodes(tree)
        tree.pci("pci0000:00/0000:00:01.0")
        tree.hca("mlx5_0", "pci0000:00/0000:00:01.0")
        (tree.base / "sys/devices/pci0000:00/0000:00:01.0/numa_node").chmod(0)
        (tree.base / "sys/devices/system/node/node1/distance").chmod(0)
        (tree.base / "sys/class/infiniband").chmod(0)
        with unprivileged():
            snap = snap_of(tree)
    status = {o.name: o.status for o in snap.sources}
    assert status["infiniband"] is t.SourceStatus.FAILED and not snap.complete
    assert status["pci"] is status["numa"] is t.SourceStatus.PARTIAL  # read, but not every attribute
    assert problems_of(snap, "0000:00:01.0") == ["numa_node: Permission denied"]
    assert "distance: Permission denied" in problems_of(snap, "numa1")
    assert snap.matrix("numa_distance") is None


@pytest.mark.parametrize("directory", ["x", "file", "none", "loop"])
@pytest.mark.parametrize("mode", [0o755, 0o444, 0o111, 0o000])
def test_a_reader_listing_first_or_at_the_first_absent_attribute_answers_the_same(directory: str, mode: int) -> None:
    names = ("vendor", "absent", "dangling", "empty", "blank", "vendor", "sub/vendor", "config")
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:  # readable by the unprivileged user
        os.chmod(tmp, 0o755)
        base = Path(tmp, "sys/devices")
        (base / "x/sub").mkdir(parents=True)
        for d in (base / "x", base / "x/sub"):
            (d / "vendor").write_text("0x10de\n")
        (base / "x/empty").write_bytes(b"")
        (base / "x/blank").write_text("\n")
        (base / "x/dangling").symlink_to("gone")
        (base / "x/driver").symlink_to("../../bus/pci/drivers/nvidia")
        (base / "file").write_text("0\n")
        (base / "loop").symlink_to("loop")
        (base / "x").chmod(mode)
        answers = []
        with unprivileged():
            for list_first in (False, True):
                r = Reader(FsRoot(Path(tmp)), "pci", "f", f"/sys/devices/{directory}", list_first=list_first)
                values: list[object] = [r.text(n, (t.Aspect.IDENTITY,)) for n in names]
                try:
                    values.append(r.read_bytes("vendor", 2))
                except OSError as exc:
                    values.append(exc.errno)
                values.append(r.link_name("driver"))
                answers.append((values, [p.message for p in r.problems]))
        (base / "x").chmod(0o755)
    assert answers[0] == answers[1]


def test_an_unreadable_attribute_is_a_problem(tree: SysfsTree) -> None:
    tree.pci("pci0000:00/0000:00:01.0", cls="0x020000", numa=None)
    (tree.base / "sys/devices/pci0000:00/0000:00:01.0/numa_node").mkdir()  # read() fails: EISDIR
    snap = snap_of(tree, "pci")
    assert problems_of(snap, "0000:00:01.0") == ["numa_node: not a regular file (directory)"]
    assert not snap.knowledge().knows("0000:00:01.0", t.Aspect.NUMA)


# ---- NUMA ------------------------------------------------------------------------------------------------

def test_numa_nodes_memory_and_distances_in_numeric_node_order(tree: SysfsTree) -> None:
    tree.write("sys/devices/system/cpu/online", "0-11")
    tree.node(0, "0-3", mem_kb=1000, distance="10 20 30")
    tree.node(1, "4-7", mem_kb=2000, distance="20 10 30")
    tree.node(10, "8-11", mem_kb=3000, distance="30 30 10")
    snap = snap_of(tree, "numa")
    assert [(n.id, n.cpus, n.memory_bytes) for n in snap.numa_nodes] == [
        ("numa0", (0, 1, 2, 3), 1_024_000), ("numa1", (4, 5, 6, 7), 2_048_000), ("numa10", (8, 9, 10, 11), 3_072_000)]
    matrix = snap.matrix("numa_distance")
    assert matrix is not None and matrix.unit == "slit"
    assert matrix.ids == ("numa0", "numa1", "numa10")
    assert (matrix.get("numa1", "numa10"), matrix.get("numa10", "numa0")) == (30.0, 30.0)
    assert sorted((x.a, x.b, x.numa_distance) for x in snap.links) == [
        ("numa0", "numa1", 20), ("numa0", "numa10", 30), ("numa1", "numa10", 30)]


def test_offline_cpus_are_left_out_of_nodes(tree: SysfsTree) -> None:
    tree.write("sys/devices/system/cpu/online", "0-3,6-7")
    tree.node(0, "0-7")
    assert snap_of(tree, "numa").numa_nodes[0].cpus == (0, 1, 2, 3, 6, 7)


def test_without_node_directories_numa_is_failed_not_one_made_up_node(tree: SysfsTree) -> None:
    """Every Linux kernel has /sys/devices/system/node, one-node machines too: its absence is a failure."""
    tree.write("sys/devices/system/cpu/online", "0-3")
    tree.write("proc/meminfo", "MemTotal:       4096 kB\nMemFree: 1 kB")
    snap = snap_of(tree, "numa")
    assert {o.name: o.status for o in snap.sources}["numa"] is t.SourceStatus.FAILED
    assert snap.numa_nodes == () and not snap.complete
    assert t.node_fact(t.Aspect.NUMA) in snap.unknown
    (tree.base / "sys/devices/system/node").mkdir(parents=True)
    assert {o.name: o.status for o in snap_of(tree, "numa").sources}["numa"] is t.SourceStatus.FAILED


def test_distance_rows_that_do_not_form_a_matrix_are_a_problem(tree: SysfsTree) -> None:
    tree.node(0, "0-1", distance="10 20")
    tree.node(1, "2-3", distance="20")
    snap = snap_of(tree, "numa")
    assert snap.matrix("numa_distance") is None
    assert problems_of(snap, "numa_distance") == ["distance rows do not form a 2x2 matrix"]


def test_gpu_memory_node_named_by_the_nvidia_driver(tree: SysfsTree) -> None:
    tree.node(0, "0-3", distance="10 80")
    tree.node(2, "", distance="80 10")
    tree.pci("pci0000:00/0000:00:00.0/0000:01:00.0", vendor="0x10de", cls="0x030200", numa="0")
    tree.write("proc/driver/nvidia/gpus/0000:01:00.0/numa_status", "Node:      2\nStatus:    online")
    snap = snap_of(tree, "numa", "pci")
    assert [(n.os_index, n.gpu_memory) for n in snap.numa_nodes] == [(0, False), (2, True)]
    assert [(g.id, g.numa_node, g.gpu_numa_id) for g in snap.gpus] == [("0000:01:00.0", 0, 2)]


# ---- RDMA and network ------------------------------------------------------------------------------------

def test_hca_and_interfaces_become_nics_on_their_pci_functions(tree: SysfsTree) -> None:
    two_nodes(tree)
    hca, eth = "pci0000:00/0000:00:01.0/0000:01:00.0", "pci0000:80/0000:80:02.0"
    tree.pci("pci0000:00/0000:00:01.0", numa="0")
    tree.pci(hca, vendor="0x15b3", cls="0x020700", numa="0", driver="mlx5_core")
    tree.pci(eth, cls="0x020000", numa="-1", cpus="4-7", driver="ixgbe")
    tree.hca("mlx5_0", hca, ports={"1": ("4: ACTIVE", "400 Gb/sec (4X NDR)", "InfiniBand"),
                                   "2": ("1: DOWN", "10 Gb/sec (4X SDR)", "Ethernet")})
    tree.netdev("ibp1s0", hca)
    tree.netdev("eno1", eth, speed="-1")
    tree.netdev("lo")
    tree.netdev("rxe_bridge")
    tree.link("sys/class/infiniband/rxe0", "sys/devices/virtual/net/rxe_bridge")  # soft RoCE: no PCI function
    snap = snap_of(tree)
    by_name = {n.name: n for n in snap.nics}
    assert sorted(by_name) == ["eno1", "mlx5_0"]
    ib = by_name["mlx5_0"]
    assert (ib.id, ib.rdma, ib.netdevs, ib.numa_node, ib.driver) == ("0000:01:00.0", True, ("ibp1s0",), 0, "mlx5_core")
    assert ib.ports == (t.NicPort(number=1, state="ACTIVE", rate_gbps=400.0, link_layer="InfiniBand"),
                        t.NicPort(number=2, state="DOWN", rate_gbps=10.0, link_layer="Ethernet"))
    eno = by_name["eno1"]
    assert (eno.id, eno.rdma, eno.numa_node) == ("0000:80:02.0", False, None)  # the kernel said -1
    assert eno.ports == (t.NicPort(number=1, state="UP", rate_gbps=None, link_layer="Ethernet"),)
    assert {x.a for x in snap.links if x.kind is t.LinkKind.PCIE} == {"0000:01:00.0", "0000:80:02.0"}
    assert read_problems(snap) == []


def test_bad_port_values_are_problems(tree: SysfsTree) -> None:
    tree.pci("pci0000:00/0000:00:01.0", cls="0x020700")
    tree.hca("mlx5_0", "pci0000:00/0000:00:01.0", ports={"1": ("ACTIVE", "fast", "InfiniBand")})
    snap = snap_of(tree, "pci", "infiniband")
    assert snap.nics[0].ports == (t.NicPort(number=1, link_layer="InfiniBand"),)
    assert sorted(problems_of(snap, "mlx5_0")) == ["ports/1/rate: cannot parse 'fast'",
                                                  "ports/1/state: cannot parse 'ACTIVE'"]


def test_speed_of_a_link_that_is_down_is_unknown_not_a_problem(tree: SysfsTree) -> None:
    tree.pci("pci0000:00/0000:00:03.0", cls="0x020000")
    tree.netdev("eth0", "pci0000:00/0000:00:03.0", operstate="down")
    speed = tree.base / "sys/devices/pci0000:00/0000:00:03.0/net/eth0/speed"
    speed.unlink()
    speed.mkdir()  # reading it fails, as the kernel's EINVAL does for a link that is down
    snap = snap_of(tree, "pci", "net")
    assert snap.nics[0].ports == (t.NicPort(number=1, state="DOWN", link_layer="Ethernet"),)
    assert read_problems(snap) == []


# ---- GPUDirect RDMA --------------------------------------------------------------------------------------

@pytest.mark.parametrize(("modules", "version", "release", "expected"), [
    (("nvidia", "nvidia_peermem"), "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06", "6.8.0-45",
     t.GdrFacts(peermem_loaded=True, memory_peers=("nv_mem",), dmabuf_supported=True)),
    (("nvidia",), "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05", "6.8.0",
     t.GdrFacts(peermem_loaded=False, memory_peers=("nv_mem",), dmabuf_supported=False)),
    (("nvidia",), "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06", "5.4.0-150",
     t.GdrFacts(peermem_loaded=False, memory_peers=("nv_mem",), dmabuf_supported=False)),
    (("ib_core",), None, "6.8.0", t.GdrFacts(peermem_loaded=False, memory_peers=("nv_mem",), dmabuf_supported=False)),
    ((), None, None, t.GdrFacts(memory_peers=("nv_mem",))),
])
def test_gdr_facts(tree: SysfsTree, modules: tuple[str, ...], version: str | None, release: str | None,
                   expected: t.GdrFacts) -> None:
    for m in modules:
        tree.write(f"sys/module/{m}/refcnt", "0")
    if version:
        tree.write("proc/driver/nvidia/version", version)
    if release:
        tree.write("proc/sys/kernel/osrelease", release)
    tree.write("sys/kernel/mm/memory_peers/nv_mem/version", "1.0")
    assert snap_of(tree, "gdr").gdr == expected


# ---- the whole pass --------------------------------------------------------------------------------------

def test_sources_register_on_import_with_defaults() -> None:
    table = source_table()
    assert set(SYSFS_SOURCES) <= set(table)
    assert all(table[n].enabled_by_default for n in SYSFS_SOURCES)


def test_absent_subsystems_are_absent_not_failed(tree: SysfsTree) -> None:
    tree.write("sys/devices/system/cpu/online", "0-1")
    tree.node(0, "0-1")
    snap = snap_of(tree, *SYSFS_SOURCES, "nvml")  # NVML: off for a fixture without its own library
    status = {o.name: o.status for o in snap.sources}
    assert status == {"gdr": t.SourceStatus.OK, "infiniband": t.SourceStatus.ABSENT, "net": t.SourceStatus.ABSENT,
                      "numa": t.SourceStatus.OK, "nvml": t.SourceStatus.ABSENT, "pci": t.SourceStatus.ABSENT}
    assert snap.complete


def test_an_empty_root_gives_a_snapshot_with_problems(tree: SysfsTree) -> None:
    snap = snap_of(tree)
    assert {o.name: o.status for o in snap.sources}["numa"] is t.SourceStatus.FAILED
    assert snap.numa_nodes == () and snap.pci == ()
    assert [p.subject for p in read_problems(snap)] == ["numa"]


def test_snapshot_round_trips_through_json(tree: SysfsTree) -> None:
    two_nodes(tree)
    tree.pci(GPU.rsplit("/", 3)[0])
    tree.pci("pci0000:00/0000:00:01.0/0000:01:00.0", vendor="0x10de", cls="0x030000", speed="8.0 GT/s PCIe",
             width="16")
    snap = snap_of(tree)
    assert t.loads(t.dumps(snap)) == snap


def test_node_name(tree: SysfsTree) -> None:
    assert discover(DiscoveryContext(root=FsRoot(tree.base)), ["gdr"]).node == "unknown"
    tree.write("proc/sys/kernel/hostname", "gpu-node-7")
    assert discover(DiscoveryContext(root=FsRoot(tree.base)), ["gdr"]).node == "gpu-node-7"
    assert discover(DiscoveryContext(root=FsRoot(tree.base), node_name="x"), ["gdr"]).node == "x"


def test_an_unknown_source_name_is_a_usage_error(tree: SysfsTree) -> None:
    with pytest.raises(ValueError, match="unknown source"):
        snap_of(tree, "pci", "nope")


@pytest.mark.parametrize(("speed", "width", "said"), [
    ("24.0 GT/s PCIe", "16", "current_link_speed 24 GT/s: unknown generation"),
    ("256.0 GT/s PCIe", "16", "current_link_speed 256 GT/s: unknown generation"),
    ("16.0 GT/s PCIe", "3", "x3 is no PCIe link width"),
    ("16.0 GT/s PCIe", "5", "x5 is no PCIe link width"),
])
def test_a_pcie_reading_no_generation_or_width_has_is_a_problem_never_a_null(tree: SysfsTree, speed: str, width: str,
                                                                             said: str) -> None:
    gpu = tree.pci("pci0000:00/0000:00:01.0/0000:01:00.0", vendor="0x10de", cls="0x030200", speed=speed,
                   width=width, max_speed="32.0 GT/s PCIe", max_width="16")
    snap = snap_of(tree, "pci")
    assert any(said in p for p in problems_of(snap, gpu)), problems_of(snap, gpu)
    assert not snap.knowledge().knows(gpu, t.Aspect.PCIE_LINK) and not snap.complete
    t.loads(t.dumps(snap))  # what discovery writes, the reader reads
