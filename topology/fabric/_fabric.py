"""The physical links between GPUs and the route each GPU-to-GPU transfer takes over them.

A transfer from GPU x to GPU y goes over NVLink when they share any (direct links, or NVSwitches both
reach: striped over all of them in proportion to their rates, as the hardware spreads it), else over
PCIe: up x's chain of bridges to the lowest common bridge, or to the host bridge, across the socket's
interconnect or the SMP link between sockets, and down y's chain. Only real links count: a GPU's own
link, a switch's uplink (upstream port to the port above), the SMP link between two sockets. A PCIe
switch's internal fabric, a root complex and an NVSwitch are taken as non-blocking.

Every link has a capacity per direction: the theoretical rate times the named efficiency of its kind
(:data:`LINK_EFFICIENCY`), or, for the SMP link, :data:`SMP_BYTES_PER_SECOND` (a stated default), raised
where a measured transfer proves that more got through. A socket is the set of CPU NUMA nodes closer than
SLIT distance 20 (ACPI's default for a remote node; dies of one package report 11-12).
"""

from __future__ import annotations

from collections import defaultdict

from ..model._device_order import ordered_gpus
from ..model._entities import Gpu, LinkKind, Snapshot
from ..model._facts import Aspect
from ..model._provenance import ESTIMATE, Source
from ._links import (
    HOP_LATENCY_SECONDS,
    LINK_EFFICIENCY,
    SMP_BYTES_PER_SECOND,
    UNKNOWN,
    Path,
    PhysLink,
    Route,
    measured_latencies,
    measured_rates,
    pcie_rate,
    ports_above,
    sockets_of,
    striped,
)
from ._rates import nvlink_bytes_per_second


class Fabric:
    """The links of one snapshot and the routes between its GPUs, built once; routes are cached."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.gpus: dict[str, Gpu] = {g.id: g for g in ordered_gpus(snap)}
        self.order = {gid: i for i, gid in enumerate(self.gpus)}
        self.links: list[PhysLink] = []
        self.capacity: list[float | None] = []  # per directed key, raised by measurements
        self._index: dict[str, int] = {}
        knowledge = snap.knowledge()
        self.nvlinks_unknown = frozenset(g for g in self.gpus if not knowledge.knows(g, Aspect.NVLINKS))
        self.pcie_unknown = frozenset(g for g in self.gpus if not knowledge.knows(g, Aspect.PCIE_PATH))
        self._pci = {f.id: f for f in snap.pci}
        self._sockets = sockets_of(snap)
        self.root: dict[str, str | None] = {}
        self.socket: dict[str, int | None] = {}
        self._up: dict[str, Path] = {}  # a GPU's physical PCIe links, from its own up to the root port's
        self._build_pcie()
        self._nv_direct: dict[frozenset[str], list[int]] = defaultdict(list)
        self._nv_switch: dict[str, dict[str, int]] = defaultdict(dict)
        self.nvls_capable: set[str] = set()  # every NVLink to an NVSwitch is NVLink 4 or later
        self._build_nvlink()
        self._routes: dict[tuple[str, str], Route] = {}
        self._bounds: dict[str, float | None] = {}
        self._solo: dict[tuple[str, str], float] = {}
        self.raised: dict[int, str] = {}  # directed key -> source of the measurement that raised it
        self._measured = measured_rates(snap)
        self._latency = measured_latencies(snap)
        self._raise_by_measurements()

    # -- building ----------------------------------------------------------------------------------

    def _add(self, link: PhysLink) -> int:
        if link.id in self._index:
            return self._index[link.id]
        self._index[link.id] = len(self.links)
        self.links.append(link)
        self.capacity += [link.capacity, link.capacity]
        return len(self.links) - 1

    def _build_pcie(self) -> None:
        roots = {h.id: h.numa_node for h in self.snap.host_bridges}
        for gid, g in self.gpus.items():
            ups, root = ports_above(self._pci, roots, gid)
            self.socket[gid] = self._socket_of(g, roots.get(root) if root else None)
            if gid in self.pcie_unknown or root is None:
                self.root[gid], self._up[gid] = None, ()
                continue
            # ups[0] is the port above the GPU, ups[-1] the root port (depth 0). An edge child -> parent is a
            # physical link when the parent faces downstream (the root port, a switch's downstream port: even
            # depth); above an upstream port is the inside of a switch.
            path: list[tuple[int, int]] = []
            child, state = gid, g.pcie or self._pci[gid].link
            for k, port in enumerate(ups):
                if (len(ups) - 1 - k) % 2 == 0:
                    rate = pcie_rate(state, self._pci[port].link)
                    path.append((self._add(PhysLink(
                        a=child, b=port, kind=LinkKind.PCIE, theoretical=rate,
                        capacity=None if rate is None else rate * LINK_EFFICIENCY[LinkKind.PCIE],
                        source=Source.THEORETICAL.value if rate else UNKNOWN)), 0))
                child, state = port, self._pci[port].link
            self.root[gid], self._up[gid] = root, tuple(path)

    def _socket_of(self, g: Gpu, host_bridge_numa: int | None) -> int | None:
        fn = self._pci.get(g.id)
        candidates = [g.numa_node, fn.numa_node if fn else None, host_bridge_numa]
        if len(g.memory_affinity) == 1:
            candidates.append(g.memory_affinity[0])
        return next((self._sockets[c] for c in candidates if c is not None and c in self._sockets), None)

    def _build_nvlink(self) -> None:
        switches = {s.id for s in self.snap.nvswitches}
        versions: dict[str, list[int]] = {}
        for link in self.snap.links:
            if link.kind is not LinkKind.NVLINK:
                continue
            rate = link.bytes_per_second or nvlink_bytes_per_second(link.nvlink_version, link.count)
            phys = PhysLink(a=link.a, b=link.b, kind=LinkKind.NVLINK, theoretical=rate,
                            capacity=None if rate is None else rate * LINK_EFFICIENCY[LinkKind.NVLINK],
                            source=Source.THEORETICAL.value if rate else UNKNOWN)
            if link.a in self.gpus and link.b in self.gpus:
                self._nv_direct[frozenset((link.a, link.b))].append(self._add(phys))
            elif {link.a, link.b} & self.gpus.keys() and {link.a, link.b} & switches:
                gpu, switch = (link.a, link.b) if link.a in self.gpus else (link.b, link.a)
                self._nv_switch[gpu][switch] = self._add(phys)
                versions.setdefault(gpu, []).append(link.nvlink_version or 0)
        self.nvls_capable = {g for g, vs in versions.items() if min(vs) >= 4}

    def _raise_by_measurements(self) -> None:
        """A measured transfer that got more through a link than the model allows proves the link can."""
        for (x, y), (value, _) in self._measured.items():
            if x in self.gpus and y in self.gpus and x != y:
                for key, share in self.route(x, y).loads:
                    cap = self.capacity[key]
                    if cap is None or value * share > cap:
                        self.capacity[key] = value * share
                        self.raised[key] = self._measured[(x, y)][1]

    # -- queries -----------------------------------------------------------------------------------

    def pcie_links(self, x: str) -> Path:
        """``x``'s physical PCIe links upwards: its own, then each switch uplink, (link index, 0)."""
        return self._up.get(x, ())

    def switch_links(self, x: str) -> dict[str, int]:
        """NVSwitch id -> the link index of ``x``'s NVLinks to it."""
        return self._nv_switch.get(x, {})

    def source_of(self, key: int) -> str:
        return self.raised.get(key) or self.links[key // 2].source

    def solo(self, x: str, y: str) -> float:
        """The rate of a transfer from x to y alone on the fabric; 0 when nothing on its way has a rate."""
        rate = self._solo.get((x, y))
        if rate is None:
            r = self.route(x, y)
            rates = [c / f for k, f in r.loads if f > 0 and (c := self.capacity[k]) is not None]
            if r.measured is not None:
                rates.append(r.measured)
            rate = self._solo[(x, y)] = min(rates) if rates else 0.0
        return rate

    def nvlinked(self, x: str, y: str) -> bool:
        if frozenset((x, y)) in self._nv_direct:
            return True
        sx, sy = self._nv_switch.get(x), self._nv_switch.get(y)
        return bool(sx and sy and sx.keys() & sy.keys())

    def latency(self, x: str, y: str) -> tuple[float, str]:
        key = frozenset((x, y))
        found = self._latency.get(key)
        if found is None:
            medium = LinkKind.NVLINK if self.nvlinked(x, y) else LinkKind.PCIE
            found = self._latency[key] = (HOP_LATENCY_SECONDS[medium], ESTIMATE)
        return found

    def route(self, x: str, y: str) -> Route:
        route = self._routes.get((x, y))
        if route is None:
            route = self._routes[(x, y)] = self._route(x, y)
        return route

    def _route(self, x: str, y: str) -> Route:
        measured = self._measured.get((x, y)) or self._measured.get((y, x))
        lat, lat_source = self.latency(x, y)
        paths: list[tuple[Path, float | None]] = []
        for i in self._nv_direct.get(frozenset((x, y)), ()):
            paths.append((((i, 0 if self.links[i].a == x else 1),), self.links[i].capacity))
        sx, sy = self._nv_switch.get(x, {}), self._nv_switch.get(y, {})
        for s in sorted(sx.keys() & sy.keys()):
            up, down = sx[s], sy[s]
            cu, cd = self.links[up].capacity, self.links[down].capacity
            paths.append((((up, 0 if self.links[up].a == x else 1), (down, 0 if self.links[down].a == s else 1)),
                          min(cu, cd) if cu is not None and cd is not None else None))
        if paths:
            medium, loads = LinkKind.NVLINK, striped(paths)
        else:
            medium, loads = LinkKind.PCIE, tuple((2 * i + d, 1.0) for i, d in self._pcie_path(x, y))
        return Route(medium=medium, loads=loads, measured=measured[0] if measured else None,
                     measured_source=measured[1] if measured else None, latency=lat, latency_source=lat_source)

    def _pcie_path(self, x: str, y: str) -> list[tuple[int, int]]:
        up = list(self._up.get(x, ()))
        down = [(i, 1) for i, _ in self._up.get(y, ())]
        if self.root.get(x) is not None and self.root.get(x) == self.root.get(y):
            while up and down and up[-1][0] == down[-1][0]:  # above the lowest common bridge: not climbed
                up.pop()
                down.pop()
            return up + down[::-1]
        sa, sb = self.socket.get(x), self.socket.get(y)
        if sa is None or sb is None or sa != sb:
            up.append(self._smp(sa, sb, x, y))
        return up + down[::-1]

    def _smp(self, sa: int | None, sb: int | None, x: str, y: str) -> tuple[int, int]:
        na = f"numa{sa}" if sa is not None else f"numa?{x}"  # a GPU in no known NUMA node: its own end
        nb = f"numa{sb}" if sb is not None else f"numa?{y}"
        lo, hi = sorted((na, nb))
        stated = self._numa_rate(lo, hi)
        source = Source.THEORETICAL.value if stated else (UNKNOWN if sa is None or sb is None else ESTIMATE)
        i = self._add(PhysLink(a=lo, b=hi, kind=LinkKind.NUMA, theoretical=stated,
                               capacity=stated or SMP_BYTES_PER_SECOND, source=source))
        return i, 0 if lo == na else 1

    def _numa_rate(self, lo: str, hi: str) -> float | None:
        """The stated rate of the NUMA link between two nodes: the links are read once, not per route."""
        rates: dict[tuple[str, str], float] | None = getattr(self, "_numa_rates", None)
        if rates is None:
            rates = {}
            for lk in self.snap.links:
                if lk.kind is LinkKind.NUMA and lk.bytes_per_second:
                    rates.setdefault((min(lk.a, lk.b), max(lk.a, lk.b)), lk.bytes_per_second)
            self._numa_rates = rates
        return rates.get((lo, hi))

    def smp_link(self, sa: int, sb: int) -> int:
        """The link index of the SMP interconnect between two sockets (their lowest NUMA nodes)."""
        return self._smp(sa, sb, "", "")[0]

    def first_link_bound(self, x: str) -> float | None:
        """The most any transfer out of or into ``x`` can get: its NVLinks together, or its PCIe link;
        None when that is not known (its NVLinks are unknown, or no link has a rate)."""
        if x not in self._bounds:
            self._bounds[x] = self._first_link_bound(x)
        return self._bounds[x]

    def _first_link_bound(self, x: str) -> float | None:
        if x in self.nvlinks_unknown:
            return None
        nv = [i for i in self._nv_switch.get(x, {}).values()]
        nv += [i for pair, ids in self._nv_direct.items() if x in pair for i in ids]
        pcie = self._up.get(x, ())[:1]
        sides = []
        for out in (True, False):
            rates = [self.capacity[2 * i + (0 if (self.links[i].a == x) == out else 1)] for i in nv]
            nv_sum = sum(r for r in rates if r is not None) if nv and None not in rates else None
            pc = self.capacity[2 * pcie[0][0] + (0 if out else 1)] if pcie else None
            known = [r for r in (nv_sum, pc) if r]
            if not known:
                return None
            sides.append(max(known))
        return min(sides)
