"""What each ResourceSlice device attribute derives from, and whether a snapshot knows all of it. Pure.

  Invariant: an attribute is computed only from facts the snapshot knows. One that derives from other
  devices' facts (an NVLink island's size, the nearest NIC) needs theirs known too; otherwise the device
  keeps the value it has, and with none it is left out, never a guess.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from topology import NODE, Aspect, Snapshot


@dataclass(frozen=True, slots=True)
class Needs:
    """The facts an attribute derives from: aspects of its own device, of every GPU, of every RDMA NIC, and
    of the node. An island's size depends on every GPU's NVLinks, a nearest NIC on every NIC's place."""

    own: tuple[Aspect, ...] = ()
    every_gpu: tuple[Aspect, ...] = ()
    every_nic: tuple[Aspect, ...] = ()
    node: tuple[Aspect, ...] = ()


_A = Aspect
_NIC_CLASS = Needs(own=(_A.PCIE_PATH, _A.NUMA), every_nic=(_A.PCIE_PATH, _A.NUMA), node=(_A.NICS,))
# attribute -> what it derives from. When any of it is unknown the attribute keeps the value the device has
# (none yet: it is left out); a guess never stands in, not even "0 NVLinks".
NEEDS: dict[str, Needs] = {
    "pcieRoot": Needs(own=(_A.PCIE_PATH,)), "pcieSwitch": Needs(own=(_A.PCIE_PATH,)),
    "pcieSwitchesAbove": Needs(own=(_A.PCIE_PATH,)), "numaNode": Needs(own=(_A.NUMA,)),
    "uuid": Needs(own=(_A.IDENTITY,)), "productName": Needs(own=(_A.IDENTITY,)),
    "cudaComputeCapability": Needs(own=(_A.IDENTITY,)), "driverVersion": Needs(node=(_A.VERSIONS,)),
    "nvlinkIsland": Needs(own=(_A.NVLINKS,), every_gpu=(_A.NVLINKS,)),
    "nvlinkIslandSize": Needs(own=(_A.NVLINKS,), every_gpu=(_A.NVLINKS,)),
    "nvlinkCount": Needs(own=(_A.NVLINKS,)), "nvlinkGen": Needs(own=(_A.NVLINKS,)),
    "pcieGen": Needs(own=(_A.PCIE_LINK,)), "pcieWidth": Needs(own=(_A.PCIE_LINK,)),
    "nearestNic": _NIC_CLASS, "nicPath": _NIC_CLASS,
    "gdr": Needs(own=_NIC_CLASS.own, every_nic=_NIC_CLASS.every_nic, node=(_A.NICS, _A.GDR)),
    "degraded": Needs(own=(_A.NVLINKS, _A.PCIE_LINK), every_gpu=(_A.NVLINKS, _A.IDENTITY)),
    "name": Needs(own=(_A.IDENTITY,)), "linkLayer": Needs(own=(_A.PORTS,)), "rateGbps": Needs(own=(_A.PORTS,)),
}


class Known:
    """Whether an attribute of one snapshot's device may be computed now (see ``NEEDS``)."""

    def __init__(self, snap: Snapshot) -> None:
        self._k = snap.knowledge()
        self._gpus = [g.id for g in snap.gpus]
        self._nics = [n.id for n in snap.nics if n.rdma]
        self._every: dict[tuple[str, Aspect], bool] = {}

    def _all(self, kind: str, aspect: Aspect) -> bool:
        key = (kind, aspect)
        if key not in self._every:
            ids = self._gpus if kind == "gpu" else self._nics
            self._every[key] = all(self._k.knows(i, aspect) for i in ids)
        return self._every[key]

    def of(self, device: str) -> Callable[[str], bool]:
        k = self._k

        def knows(attribute: str) -> bool:
            n = NEEDS.get(attribute)
            return n is None or (all(k.knows(device, a) for a in n.own) and all(k.knows(NODE, a) for a in n.node)
                                 and all(self._all("gpu", a) for a in n.every_gpu)
                                 and all(self._all("nic", a) for a in n.every_nic))

        return knows
