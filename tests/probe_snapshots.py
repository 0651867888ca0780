"""Small snapshots for the probe tests: a two-socket, four-GPU box with NVLink pairs and one RDMA NIC,
and this machine's own host (its NUMA node 0 with the CPUs this process may use)."""

from __future__ import annotations

import os

import topology as t

G0, G1, G2, G3 = "0000:05:00.0", "0000:06:00.0", "0000:85:00.0", "0000:86:00.0"
NIC = "0000:07:00.0"
GiB = 1 << 30
# Every discovery source read its subsystem: a snapshot no source read is never complete.
READ = tuple(t.SourceOutcome(name=n, status=t.SourceStatus.OK, duration_seconds=0.0)
             for n in ("gdr", "infiniband", "net", "numa", "nvml", "pci"))


def _f(bdf: str, parent: str, *, bridge: bool = False, numa: int = 0, vendor: int = 0x10DE) -> t.PciFunction:
    return t.PciFunction(id=bdf, parent=parent, vendor_id=vendor, device_id=1,
                         class_code=0x060400 if bridge else 0x030200, numa_node=numa)


def four_gpu_box(*, gdr: t.GdrFacts | None = None) -> t.Snapshot:
    """GPU0-GPU1 and GPU2-GPU3 joined by 4 NVLink4 links each (one island per socket); PCIe Gen4 x16;
    mlx5_0 under the switch of GPU0 (PIX); 80 GiB per GPU, except GPU3 with 16 GiB."""
    pci = (
        _f("0000:00:01.0", "pci0000:00", bridge=True, vendor=0x10B5),
        _f("0000:01:00.0", "0000:00:01.0", bridge=True, vendor=0x10B5),
        _f("0000:02:00.0", "0000:01:00.0", bridge=True, vendor=0x10B5),
        _f("0000:02:01.0", "0000:01:00.0", bridge=True, vendor=0x10B5),
        _f("0000:02:02.0", "0000:01:00.0", bridge=True, vendor=0x10B5),
        _f(G0, "0000:02:00.0"),
        _f(G1, "0000:02:01.0"),
        _f(NIC, "0000:02:02.0", vendor=0x15B3),
        _f("0000:80:01.0", "pci0000:80", bridge=True, numa=1, vendor=0x10B5),
        _f(G2, "0000:80:01.0", numa=1),
        _f(G3, "0000:80:01.0", numa=1),
    )
    gen4 = t.PcieLinkState(current_gen=4, current_width=16, max_gen=4, max_width=16)
    gpus = tuple(t.Gpu(id=g, index=i, numa_node=0 if i < 2 else 1, memory_affinity=(0 if i < 2 else 1,), pcie=gen4,
                       memory_bytes=16 * GiB if g == G3 else 80 * GiB)
                 for i, g in enumerate((G0, G1, G2, G3)))
    links = (t.Link(a=G0, b=G1, kind=t.LinkKind.NVLINK, count=4, nvlink_version=4, bytes_per_second=100e9),
             t.Link(a=G2, b=G3, kind=t.LinkKind.NVLINK, count=4, nvlink_version=4, bytes_per_second=100e9))
    numa = (t.NumaNode(id="numa0", os_index=0, cpus=(0, 1, 2, 3)),
            t.NumaNode(id="numa1", os_index=1, cpus=(4, 5, 6, 7)))
    nics = (t.Nic(id=NIC, name="mlx5_0", pci_bus_id=NIC, rdma=True, numa_node=0,
                  ports=(t.NicPort(number=1, state="ACTIVE", rate_gbps=200.0, link_layer="InfiniBand"),)),)
    roots = (t.HostBridge(id="pci0000:00", domain=0, bus=0, numa_node=0),
             t.HostBridge(id="pci0000:80", domain=0, bus=0x80, numa_node=1))
    return t.Snapshot(node="box", pci=pci, gpus=gpus, links=links, numa_nodes=numa, nics=nics, host_bridges=roots,
                      gdr=gdr or t.GdrFacts(peermem_loaded=True, dmabuf_supported=True), sources=READ)


def this_host() -> t.Snapshot:
    """NUMA node 0 of this machine with the CPUs this process may run on: enough for the cpu backend."""
    cpus = tuple(sorted(os.sched_getaffinity(0)))
    return t.Snapshot(node="here", numa_nodes=(t.NumaNode(id="numa0", os_index=0, cpus=cpus),), sources=READ)
