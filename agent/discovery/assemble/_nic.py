"""NICs: one per RDMA device with a PCI function, then one per PCI function carrying plain interfaces."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from topology import Aspect, Nic, NicPort, PciFunction, Problem, facts_of

from ..sources._parse import bdf_key
from ..sources.infiniband import IbDeviceFacts
from ..sources.net import NetIfFacts
from ._witness import witness

_ARP_LINK_LAYER = {1: "Ethernet", 32: "InfiniBand"}


def nics(hcas: Sequence[IbDeviceFacts], interfaces: Sequence[NetIfFacts], funcs: Mapping[str, PciFunction],
         problems: list[Problem]) -> tuple[Nic, ...]:
    out: dict[str, Nic] = {}
    for hca in sorted(hcas, key=lambda h: h.name):
        if hca.pci_bus_id in out:
            problems.append(Problem(source="infiniband", subject=hca.name,
                                    message=f"shares PCI function {hca.pci_bus_id} with {out[hca.pci_bus_id].name}: "
                                            "only the first is listed"))
            continue
        f = _function(funcs, hca.pci_bus_id, hca.name, "infiniband", problems)
        out[hca.pci_bus_id] = Nic(
            id=hca.pci_bus_id,
            name=hca.name,
            pci_bus_id=hca.pci_bus_id,
            rdma=True,
            netdevs=tuple(sorted(hca.netdevs)),
            numa_node=f.numa_node if f else None,
            ports=tuple(NicPort(number=p.number, state=p.state, rate_gbps=p.rate_gbps, link_layer=p.link_layer)
                        for p in hca.ports),
            driver=f.driver if f else None,
        )
    _netdevs_placed(hcas, interfaces, problems)
    # An interface an RDMA device names is that device's, wherever its own link points: where the two witnesses
    # disagree (``nic-function``) the dispute is reported, and no second NIC is made up at the other function.
    named = {name for hca in hcas for name in hca.netdevs}
    by_function: dict[str, list[NetIfFacts]] = {}
    for iface in interfaces:
        if (not iface.virtual and iface.pci_bus_id is not None and iface.pci_bus_id not in out
                and iface.name not in named):
            by_function.setdefault(iface.pci_bus_id, []).append(iface)
    for bdf, ifaces in by_function.items():
        ifaces.sort(key=lambda i: i.name)
        f = _function(funcs, bdf, ifaces[0].name, "net", problems)
        out[bdf] = Nic(
            id=bdf,
            name=ifaces[0].name,
            pci_bus_id=bdf,
            netdevs=tuple(i.name for i in ifaces),
            numa_node=f.numa_node if f else None,
            ports=tuple(_port(n, i) for n, i in enumerate(ifaces, start=1)),
            driver=f.driver if f else None,
        )
    return tuple(out[k] for k in sorted(out, key=bdf_key))


def _netdevs_placed(hcas: Sequence[IbDeviceFacts], interfaces: Sequence[NetIfFacts], problems: list[Problem]
                    ) -> None:
    """An RDMA device's netdev is an interface of its own PCI function (``nic-function``)."""
    where = {i.name: i.pci_bus_id for i in interfaces if not i.virtual and i.pci_bus_id is not None}
    for hca in hcas:
        for name in hca.netdevs:
            other = where.get(name)
            if other is not None and other != hca.pci_bus_id:
                problems.append(witness("nic-function").dispute(
                    (hca.pci_bus_id, other), f"{name} is {hca.name}'s, on {hca.pci_bus_id}", f"{name} is on {other}"))


def _function(funcs: Mapping[str, PciFunction], bdf: str, name: str, source: str,
              problems: list[Problem]) -> PciFunction | None:
    f = funcs.get(bdf)
    if f is None:
        problems.append(Problem(source=source, subject=bdf, message=f"{name} sits on PCI function {bdf}, which the "
                                "PCI source did not list: its PCIe path and NUMA node are unknown",
                                unknown=facts_of(bdf, Aspect.PCIE_PATH, Aspect.NUMA)))
    return f


def _port(number: int, iface: NetIfFacts) -> NicPort:
    return NicPort(
        number=number,
        state=iface.operstate.upper() if iface.operstate else None,
        rate_gbps=iface.speed_mbps / 1000 if iface.speed_mbps else None,
        link_layer=_ARP_LINK_LAYER.get(iface.arp_type) if iface.arp_type is not None else None,
    )
