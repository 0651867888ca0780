"""``fleet_report``: a fleet's nodes grouped by NVLink domain and GPU product, each class's medians and its
outliers, and where a group of N GPUs fits best.

Input is one :class:`NodeSummary` per node, as a cluster's node labels and ResourceSlices give it: GPU
product, GPU count, NVLink domain (the fabric clique, ``<clusterUuid>.<cliqueId>``; GB200 NVL72: the 18
trays of a rack share one), the all-reduce bus bandwidth of the node's best group of 2, 4, 8 GPUs, and
the theoretical rates of its NVLinks (per GPU) and RDMA NICs (together).

A node is an outlier of its class when a bus bandwidth is under :data:`OUTLIER_RATIO` of its peers'
median (the class without the node). A group of N GPUs fits:
- ``node``: inside one node with at least N GPUs, at that node's bus bandwidth for N (or for the nearest
  larger group size it reports);
- ``nvlink-domain``: across nodes of one NVLink domain, at the slower of the nodes' own figure and the
  GPUs' NVLink rate (theoretical, times the NVLink efficiency): traffic between trays stays on NVLink;
- ``network``: across nodes of one class joined only by their NICs, at the slower of the nodes' own figure
  and the NICs' line rate (theoretical): a ring's hop between nodes crosses the NICs once each way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..fabric._links import LINK_EFFICIENCY
from ..model._entities import LinkKind
from ..model._provenance import ESTIMATE

OUTLIER_RATIO = 0.8


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeSummary:
    node: str
    product: str
    gpus: int
    clique: str | None = None  # NVLink domain beyond the node; None: the node is its own
    busbw: tuple[tuple[int, float], ...] = ()  # (group size, best group's all-reduce bus bandwidth, bytes/s)
    busbw_source: str = ESTIMATE  # where the bus bandwidths come from: estimate, measured
    nvlink_bytes_per_second: float | None = None  # per GPU, theoretical line rate
    nic_bytes_per_second: float | None = None  # the node's RDMA NICs together, theoretical line rate

    def busbw_for(self, n: int) -> float | None:
        """The bus bandwidth for a group of ``n``: its own figure, else the nearest larger size's."""
        nearest = min(((s, v) for s, v in self.busbw if s >= n), default=None)
        return nearest[1] if nearest else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Outlier:
    node: str
    size: int
    busbw_bytes_per_second: float
    peer_median_bytes_per_second: float

    @property
    def ratio(self) -> float:
        return self.busbw_bytes_per_second / self.peer_median_bytes_per_second

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "size": self.size, "busbw_bytes_per_second": self.busbw_bytes_per_second,
                "peer_median_bytes_per_second": self.peer_median_bytes_per_second, "ratio": round(self.ratio, 4)}


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetClass:
    domain: str | None
    product: str
    nodes: int
    gpus: int
    medians: tuple[tuple[int, float], ...]  # (group size, median bus bandwidth over the class's nodes)
    outliers: tuple[Outlier, ...]  # lowest ratio first
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"domain": self.domain, "product": self.product, "nodes": self.nodes, "gpus": self.gpus,
                "medians": {str(s): v for s, v in self.medians}, "outliers": [o.to_dict() for o in self.outliers],
                "source": self.source}


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupFit:
    kind: str  # node, nvlink-domain, network
    where: str  # the node, the NVLink domain, or the product class
    nodes: tuple[str, ...]
    busbw_bytes_per_second: float | None
    limit: str  # what sets it: the node's own figure, NVLink, the NICs
    source: str  # estimate (a node's figure), theoretical (NVLink or NIC line rate)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "where": self.where, "nodes": list(self.nodes),
                "busbw_bytes_per_second": self.busbw_bytes_per_second, "limit": self.limit, "source": self.source}


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetReport:
    classes: tuple[FleetClass, ...]
    gpus: int | None  # the N the fits are for
    fits: tuple[GroupFit, ...]  # best first

    def to_dict(self) -> dict[str, Any]:
        return {"classes": [c.to_dict() for c in self.classes], "gpus": self.gpus,
                "fits": [f.to_dict() for f in self.fits]}


def _median(values: list[float]) -> float:
    m = len(values)
    return values[m // 2] if m % 2 else (values[m // 2 - 1] + values[m // 2]) / 2


def _median_without(ordered: list[float], p: int) -> float:
    """The median of sorted ``ordered`` with the element at position ``p`` taken out (len >= 2)."""
    m = len(ordered) - 1

    def at(i: int) -> float:
        return ordered[i + 1] if i >= p else ordered[i]

    return at(m // 2) if m % 2 else (at(m // 2 - 1) + at(m // 2)) / 2


def _classify(members: list[NodeSummary], domain: str | None, product: str) -> FleetClass:
    by_size: dict[int, list[tuple[float, str]]] = {}
    for node in members:
        for s, v in node.busbw:
            by_size.setdefault(s, []).append((v, node.node))
    medians, outliers = [], []
    for size in sorted(by_size):
        rows = sorted(by_size[size])
        values = [v for v, _ in rows]
        medians.append((size, _median(values)))
        if len(rows) < 2:
            continue
        for p, (value, name) in enumerate(rows):
            peers = _median_without(values, p)
            if value >= OUTLIER_RATIO * peers:
                break  # sorted: every later node is at least this high, and its peers' median no higher
            outliers.append(Outlier(node=name, size=size, busbw_bytes_per_second=value,
                                    peer_median_bytes_per_second=peers))
    sources = {node.busbw_source for node in members}
    return FleetClass(domain=domain, product=product, nodes=len(members), gpus=sum(n.gpus for n in members),
                      medians=tuple(medians), outliers=tuple(sorted(outliers, key=lambda o: (o.ratio, o.node))),
                      source=sources.pop() if len(sources) == 1 else "mixed")


def _fits(groups: dict[tuple[str | None, str], list[NodeSummary]], n: int) -> list[GroupFit]:
    fits: list[GroupFit] = []
    by_product: dict[str, list[NodeSummary]] = {}
    for (domain, product), members in groups.items():
        by_product.setdefault(product, []).extend(members)
        single = [(bw, m.node) for m in members if m.gpus >= n and (bw := m.busbw_for(n)) is not None]
        if single:
            bw, node = min(single, key=lambda x: (-x[0], x[1]))
            fits.append(GroupFit(kind="node", where=node, nodes=(node,), busbw_bytes_per_second=bw,
                                 limit="the node's best group", source=_source(members)))
        if domain is not None:
            fits += _spread(members, n, kind="nvlink-domain", where=domain)
    for product, members in by_product.items():
        if max(m.gpus for m in members) < n:
            fits += _spread(members, n, kind="network", where=product)
    return sorted(fits, key=lambda f: (-(f.busbw_bytes_per_second or 0.0), f.kind, f.where))


def _source(members: list[NodeSummary]) -> str:
    sources = {m.busbw_source for m in members}
    return sources.pop() if len(sources) == 1 else "mixed"


def _spread(members: list[NodeSummary], n: int, *, kind: str, where: str) -> list[GroupFit]:
    """The fewest nodes (most GPUs first, then fastest) that hold ``n`` GPUs together, joined by NVLink
    (kind ``nvlink-domain``) or by their NICs (``network``)."""
    ranked = sorted(members, key=lambda m: (-m.gpus, -(m.busbw_for(min(n, m.gpus)) or 0.0), m.node))
    chosen, total = [], 0
    for m in ranked:
        if total >= n:
            break
        chosen.append(m)
        total += m.gpus
    if total < n or len(chosen) < 2:
        return []
    own = [m.busbw_for(min(m.gpus, n)) for m in chosen]
    between = [m.nvlink_bytes_per_second * LINK_EFFICIENCY[LinkKind.NVLINK] if kind == "nvlink-domain"
               and m.nvlink_bytes_per_second else m.nic_bytes_per_second if kind == "network" else None
               for m in chosen]
    if None in own or None in between:
        return [GroupFit(kind=kind, where=where, nodes=tuple(m.node for m in chosen), busbw_bytes_per_second=None,
                         limit="unknown: a node gives no figure", source="unknown")]
    slow_own = min(v for v in own if v is not None)
    slow_between = min(v for v in between if v is not None)
    link = "NVLink between nodes" if kind == "nvlink-domain" else "the NICs between nodes"
    bw, limit, source = ((slow_between, link, "theoretical") if slow_between < slow_own
                         else (slow_own, "the nodes' best groups", _source(chosen)))
    return [GroupFit(kind=kind, where=where, nodes=tuple(m.node for m in chosen), busbw_bytes_per_second=bw,
                     limit=limit, source=source)]


def fleet_report(nodes: list[NodeSummary] | tuple[NodeSummary, ...], gpus: int | None = None) -> FleetReport:
    """Classes by (NVLink domain, GPU product), largest first, with medians and outliers; with ``gpus``, where
    a group of that many fits best, best first."""
    groups: dict[tuple[str | None, str], list[NodeSummary]] = {}
    for node in nodes:
        groups.setdefault((node.clique, node.product), []).append(node)
    classes = sorted((_classify(members, domain, product) for (domain, product), members in groups.items()),
                     key=lambda c: (-c.nodes, c.product, c.domain or ""))
    fits = _fits(groups, gpus) if gpus is not None and gpus > 0 else []
    return FleetReport(classes=tuple(classes), gpus=gpus, fits=tuple(fits))
