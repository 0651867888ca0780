"""Synthetic snapshots of any size, for benchmarks/limits.py: HGX-like boards of 8 GPUs repeated.

Each board: two NUMA nodes with a host bridge each; under each bridge a root port and a PCIe switch per
pair of GPUs, holding the two GPUs and one RDMA NIC; four NVSwitch chips every GPU of the board reaches
with 4 or 5 NVLinks (one bundled link each). ``nics`` beyond one per GPU pair, ``pci`` and ``links`` beyond what
the boards hold, are added as NICs and as plain functions under the boards' switches, so that each limit
can be reached alone. Every source read ``ok``: the snapshot is one ``--from`` accepts.
"""

from __future__ import annotations

import topology as t

# NVSwitches off the PCI bus: an NVLink domain, whose clique the fabric info gives (else it is unknown)
_FABRIC = t.FabricInfo(state=t.FabricState.COMPLETED, cluster_uuid="big-domain", clique_id=1)
_PCIE = t.PcieLinkState(current_gen=5, current_width=16, max_gen=5, max_width=16)
_BRIDGE = 0x060400
_PCIE_RATE = t.pcie_bytes_per_second(5, 16)  # a link's rate is the physics table's for its state (saved docs say so)


def _f(bdf: str, parent: str, cls: int, numa: int, device: int = 0x1234) -> t.PciFunction:
    return t.PciFunction(id=bdf, parent=parent, vendor_id=0x10DE, device_id=device, class_code=cls,
                         numa_node=numa, link=_PCIE)


def big(gpus: int, *, nics: int = 0, pci: int = 0, links: int = 0) -> t.Snapshot:
    """A snapshot of ``gpus`` GPUs (a multiple of 8), at least ``nics`` NICs, ``pci`` PCI functions and
    ``links`` links (each added function then has its PCIe link; else it has none)."""
    boards = max(1, gpus // 8)
    bridges, functions, numa_nodes, gpu_list, nic_list, switches, edges = [], [], [], [], [], [], []
    switch_parents: list[tuple[str, int, int, int]] = []  # (bus id of a PCIe switch, domain, numa, which)
    for b in range(boards):
        for s in range(2):
            numa = 2 * b + s
            numa_nodes.append(t.NumaNode(id=f"numa{numa}", os_index=numa, cpus=(numa,), memory_bytes=1 << 30))
            domain = numa + 1
            hb = f"pci{domain:04x}:00"
            bridges.append(t.HostBridge(id=hb, domain=domain, bus=0, numa_node=numa))
            port = f"{domain:04x}:00:01.0"
            functions.append(_f(port, hb, _BRIDGE, numa))
            edges.append(t.Link(a=port, b=hb, kind=t.LinkKind.PCIE, pcie=_PCIE, bytes_per_second=_PCIE_RATE))
            for p in range(2):
                up = f"{domain:04x}:{0x10 + 0x10 * p:02x}:00.0"
                functions.append(_f(up, port, _BRIDGE, numa))
                edges.append(t.Link(a=up, b=port, kind=t.LinkKind.PCIE, pcie=_PCIE, bytes_per_second=_PCIE_RATE))
                switch_parents.append((up, domain, numa, p))
                for d in range(3):
                    bdf = f"{domain:04x}:{0x11 + 0x10 * p + d:02x}:00.0"
                    functions.append(_f(bdf, up, 0x030200 if d < 2 else 0x020700, numa))
                    edges.append(t.Link(a=bdf, b=up, kind=t.LinkKind.PCIE, pcie=_PCIE, bytes_per_second=_PCIE_RATE))
                    if d < 2:
                        gpu_list.append(t.Gpu(id=bdf, index=len(gpu_list), name="GPU", numa_node=numa, pcie=_PCIE,
                                              memory_affinity=(numa,), cpu_affinity=(numa,), fabric=_FABRIC))
                    else:
                        nic_list.append(t.Nic(id=bdf, name=f"mlx5_{len(nic_list)}", pci_bus_id=bdf, rdma=True,
                                              numa_node=numa))
        for k in range(4):
            sw = f"nvswitch{4 * b + k}"
            switches.append(t.NvSwitch(id=sw, visible_on_pci=False))
            count = 4 + (k < 2)
            edges += [t.Link(a=g.id, b=sw, kind=t.LinkKind.NVLINK, count=count, nvlink_version=4,
                             bytes_per_second=t.nvlink_bytes_per_second(4, count)) for g in gpu_list[8 * b:8 * b + 8]]
    extra = 0
    while len(nic_list) < nics or len(functions) < pci or len(edges) < links:
        up, domain, numa, which = switch_parents[extra % len(switch_parents)]
        n = extra // len(switch_parents)  # below 16384: 64 buses of 32 devices of 8 functions per switch
        bdf = f"{domain:04x}:{0x80 + 0x40 * which + n // 256:02x}:{(n // 8) % 32:02x}.{n % 8}"
        functions.append(_f(bdf, up, 0x020000, numa))
        if links:
            edges.append(t.Link(a=bdf, b=up, kind=t.LinkKind.PCIE, pcie=_PCIE, bytes_per_second=_PCIE_RATE))
        if len(nic_list) < nics:
            nic_list.append(t.Nic(id=bdf, name=f"mlx5_{len(nic_list)}", pci_bus_id=bdf, rdma=True, numa_node=numa))
        extra += 1
    ids = tuple(n.id for n in numa_nodes)
    dist = t.Matrix(name="numa_distance", kind=t.MatrixKind.FROM_OS, unit="slit", ids=ids,
                    values=tuple(tuple(10.0 if a == c else 20.0 for c in range(len(ids))) for a in range(len(ids))))
    sources = tuple(t.SourceOutcome(name=name, status=t.SourceStatus.OK, duration_seconds=0.001)
                    for name in ("gdr", "infiniband", "net", "numa", "nvml", "pci"))
    return t.Snapshot(node=f"big{gpus}", host_bridges=tuple(bridges), pci=tuple(functions),
                      numa_nodes=tuple(numa_nodes), gpus=tuple(gpu_list), nvswitches=tuple(switches),
                      nics=tuple(nic_list), links=tuple(edges), matrices=(dist,), sources=sources)
