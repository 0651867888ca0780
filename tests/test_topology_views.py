"""Path classes, the topo -m table, islands, NIC affinity, GPUDirect RDMA readiness and DOT on small graphs."""

from __future__ import annotations

import pytest

import topology as t
from topology import replace

NV = 0x10DE


def _f(bdf: str, parent: str, *, bridge: bool = False, numa: int | None = None, acs: bool | None = None,
       vendor: int = 0x10B5) -> t.PciFunction:
    return t.PciFunction(id=bdf, parent=parent, vendor_id=vendor, device_id=1,
                         class_code=0x060400 if bridge else 0x030200, numa_node=numa, acs_enabled=acs)


def two_socket_box() -> t.Snapshot:
    """Socket 0: root pci0000:00 with a two-level switch tree (GPU0, GPU1 share a switch; NIC0 beside them
    under the top switch), and a second root port with GPU2. Socket 1: root pci0000:80 with GPU3."""
    pci = (
        _f("0000:00:01.0", "pci0000:00", bridge=True, numa=0),   # root port
        _f("0000:01:00.0", "0000:00:01.0", bridge=True, numa=0),  # top switch upstream
        _f("0000:02:00.0", "0000:01:00.0", bridge=True, numa=0),  # downstream
        _f("0000:02:01.0", "0000:01:00.0", bridge=True, numa=0, acs=True),  # downstream
        _f("0000:03:00.0", "0000:02:00.0", bridge=True, numa=0),  # second switch upstream
        _f("0000:04:00.0", "0000:03:00.0", bridge=True, numa=0),
        _f("0000:04:01.0", "0000:03:00.0", bridge=True, numa=0),
        _f("0000:05:00.0", "0000:04:00.0", numa=0, vendor=NV),    # GPU0
        _f("0000:06:00.0", "0000:04:01.0", numa=0, vendor=NV),    # GPU1
        _f("0000:07:00.0", "0000:02:01.0", numa=0, vendor=0x15B3),  # NIC0 port 0
        _f("0000:07:00.1", "0000:02:01.0", numa=0, vendor=0x15B3),  # NIC1 port 1
        _f("0000:00:02.0", "pci0000:00", bridge=True, numa=0),   # second root port
        _f("0000:08:00.0", "0000:00:02.0", numa=0, vendor=NV),    # GPU2
        _f("0000:80:01.0", "pci0000:80", bridge=True, numa=1),
        _f("0000:81:00.0", "0000:80:01.0", numa=1, vendor=NV),    # GPU3
        _f("0000:40:01.0", "pci0000:40", bridge=True, numa=0),   # another root complex, socket 0
        _f("0000:41:00.0", "0000:40:01.0", numa=0, vendor=0x15B3),  # NIC2
    )
    gpus = tuple(t.Gpu(id=b, index=i, numa_node=n, cpu_affinity=tuple(range(4 * n, 4 * n + 4)))
                 for i, (b, n) in enumerate([("0000:05:00.0", 0), ("0000:06:00.0", 0), ("0000:08:00.0", 0),
                                             ("0000:81:00.0", 1)]))
    nics = (t.Nic(id="0000:07:00.0", name="mlx5_0", pci_bus_id="0000:07:00.0", rdma=True, numa_node=0),
            t.Nic(id="0000:07:00.1", name="mlx5_1", pci_bus_id="0000:07:00.1", rdma=True, numa_node=0),
            t.Nic(id="0000:41:00.0", name="mlx5_10", pci_bus_id="0000:41:00.0", rdma=True, numa_node=0),
            t.Nic(id="net:eth0", name="eth0"))
    roots = (t.HostBridge(id="pci0000:00", domain=0, bus=0, numa_node=0),
             t.HostBridge(id="pci0000:40", domain=0, bus=0x40, numa_node=0),
             t.HostBridge(id="pci0000:80", domain=0, bus=0x80, numa_node=1))
    return t.Snapshot(node="box", pci=pci, gpus=gpus, nics=nics, host_bridges=roots,
                      gdr=t.GdrFacts(peermem_loaded=True))


G0, G1, G2, G3 = "0000:05:00.0", "0000:06:00.0", "0000:08:00.0", "0000:81:00.0"
N0, N1, N2 = "0000:07:00.0", "0000:07:00.1", "0000:41:00.0"


@pytest.mark.parametrize("a, b, expected", [
    (G0, G0, "X"),
    (G0, G1, "PIX"),   # one switch, three bridge functions walked
    (G0, N0, "PXB"),   # second-level switch plus the top switch
    (N0, N1, "PIX"),   # two functions of one card below one downstream port
    (G0, G2, "PHB"),   # two root ports of one host bridge
    (G0, N2, "NODE"),  # two host bridges in socket 0
    (G0, G3, "SYS"),   # across sockets
    (G3, N2, "SYS"),
])
def test_pcie_classes(a: str, b: str, expected: str) -> None:
    snap = two_socket_box()
    assert str(t.path(snap, a, b)) == expected
    assert str(t.path(snap, b, a)) == expected


def test_nvlink_direct_bonds_and_switches() -> None:
    snap = two_socket_box()
    direct = replace(snap, links=(
        t.Link(a=G0, b=G3, kind=t.LinkKind.NVLINK, count=2, nvlink_version=2, bytes_per_second=50e9),
        t.Link(a=G3, b=G0, kind=t.LinkKind.NVLINK, count=1, nvlink_version=2, bytes_per_second=25e9),
    ))
    info = t.path(direct, G0, G3)
    assert str(info) == "NV3" and info.pcie is t.PathClass.SYS
    assert str(t.path(direct, G0, N2)) == "NODE"  # NVLink only ever between GPUs

    sw = "nvswitch"
    fabric = replace(snap, nvswitches=(t.NvSwitch(id=sw, visible_on_pci=False),), links=tuple(
        t.Link(a=g, b=sw, kind=t.LinkKind.NVLINK, count=18, nvlink_version=4, bytes_per_second=450e9)
        for g in (G0, G1, G2)))
    assert str(t.path(fabric, G0, G2)) == "NV18"
    assert str(t.path(fabric, G0, G3)) == "SYS"  # GPU3 has no switch links


def test_matrix_layout_matches_nvidia_smi() -> None:
    text = t.matrix(two_socket_box())
    lines = text.splitlines()
    assert lines[0] == "\t" + "\t".join(
        ["GPU0", "GPU1", "GPU2", "GPU3", "NIC0", "NIC1", "NIC2", "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"])
    assert lines[1] == "GPU0\t X \tPIX\tPHB\tSYS\tPXB\tPXB\tNODE\t0-3\t0\t\tN/A"
    assert lines[4] == "GPU3\tSYS\tSYS\tSYS\t X \tSYS\tSYS\tSYS\t4-7\t1\t\tN/A"
    assert lines[5] == "NIC0\tPXB\tPXB\tPHB\tSYS\t X \tPIX\tNODE"
    assert t.LEGEND in text
    assert "NIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n  NIC2: mlx5_10\n" in text
    assert "eth0" not in text  # topo -m lists RDMA devices only


def test_empty_node_has_no_matrix() -> None:
    assert t.matrix(t.Snapshot(node="n")) == ""


def test_islands() -> None:
    snap = two_socket_box()
    pairs = replace(snap, links=(
        t.Link(a=G0, b=G1, kind=t.LinkKind.NVLINK, count=4, nvlink_version=3, bytes_per_second=100e9),
        t.Link(a=G1, b=G2, kind=t.LinkKind.NVLINK, count=2, nvlink_version=3, bytes_per_second=50e9),
    ))
    islands = t.nvlink_islands(pairs)
    assert [i.gpus for i in islands] == [(G0, G1, G2), (G3,)]
    assert islands[0].min_pair_bytes_per_second == 50e9
    assert islands[1].min_pair_bytes_per_second is None
    lost = replace(pairs, gpus=tuple(replace(g, lost=g.id == G1) for g in pairs.gpus))
    assert [i.size for i in t.nvlink_islands(lost)] == [1, 1, 1]


def test_nearest_nics_and_numa_affinity() -> None:
    snap = two_socket_box()
    assert t.nearest_nics(snap, G0) == (N0, N1)
    assert t.nearest_nics(snap, G3) == (N0, N1, N2)  # all SYS: a tie
    assert t.numa_affinity(snap, G3) == 1


def test_gdr_readiness_states_every_reason() -> None:
    snap = two_socket_box()
    near = t.gdr_readiness(snap, G0, N0)
    assert near.path is t.PathClass.PXB
    assert near.verdict is t.GdrVerdict.DEGRADED  # ACS on 0000:02:01.0, between them
    assert any("ACS" in r and "0000:02:01.0" in r for r in near.reasons)
    no_acs = replace(snap, pci=tuple(replace(f, acs_enabled=False) for f in snap.pci))
    assert t.gdr_readiness(no_acs, G0, N0).verdict is t.GdrVerdict.READY
    far = t.gdr_readiness(no_acs, G3, N0)
    assert far.verdict is t.GdrVerdict.DEGRADED and any("SYS" in r for r in far.reasons)
    no_peer = replace(no_acs, gdr=t.GdrFacts(peermem_loaded=False, dmabuf_supported=False))
    assert t.gdr_readiness(no_peer, G0, N0).verdict is t.GdrVerdict.NOT_READY
    unknown = replace(no_acs, gdr=t.GdrFacts())
    assert t.gdr_readiness(unknown, G0, N0).verdict is t.GdrVerdict.UNKNOWN
    assert t.gdr_readiness(no_acs, G0, "net:eth0").verdict is t.GdrVerdict.NOT_READY


def test_dot_is_a_graph_of_the_devices() -> None:
    snap = replace(two_socket_box(), links=(
        t.Link(a=G0, b=G1, kind=t.LinkKind.NVLINK, count=4, nvlink_version=3, bytes_per_second=100e9),))
    dot = t.to_dot(snap)
    assert dot.startswith('graph "box" {') and dot.rstrip().endswith("}")
    assert '"GPU0\\n0000:05:00.0"' in dot and "mlx5_0" in dot
    assert 'label="NV4 100 GB/s"' in dot
    assert dot.count("{") == dot.count("}")


def test_all_reduce_estimate_uses_the_slowest_edge_and_says_where_it_came_from() -> None:
    gen4 = t.PcieLinkState(current_gen=4, current_width=16, max_gen=4, max_width=16)
    base = two_socket_box()
    snap = replace(
        base,
        gpus=tuple(replace(g, pcie=gen4) for g in base.gpus),
        links=(t.Link(a=G0, b=G1, kind=t.LinkKind.NVLINK, count=4, nvlink_version=3, bytes_per_second=100e9),),
    )
    pair = t.all_reduce_estimate(snap, [G0, G1], 1_000_000_000)
    assert pair.source is t.Source.THEORETICAL and pair.bytes_per_second == 100e9
    assert pair.seconds == pytest.approx(2 * 1 / 2 * 1e9 / 100e9)
    ring = t.all_reduce_estimate(snap, [G0, G1, G2], 3_000_000_000)
    assert ring.bytes_per_second == pytest.approx(31.5e9)  # G1-G2 and G2-G0 are PCIe Gen4 x16
    assert ring.bottleneck == (G1, G2)
    assert ring.seconds == pytest.approx(2 * 2 / 3 * 3e9 / 31.5e9)
    timed = t.with_measurements(snap, [t.Measurement(
        test="device_to_device_memcpy_write_ce", subjects=(G1, G2), direction="a->b", value=20e9,
        unit="bytes_per_second", source=t.Source.MEASURED, method="ce-write")])
    measured = t.all_reduce_estimate(timed, [G0, G1, G2], 3_000_000_000)
    assert measured.source is t.Source.MEASURED and measured.bytes_per_second == 20e9
    unknown = t.all_reduce_estimate(base, [G0, G2], 1)
    assert unknown.seconds is None and unknown.bottleneck == (G0, G2)
    assert t.all_reduce_estimate(base, [G0], 1).seconds == 0.0
