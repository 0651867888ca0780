"""What the cost model and the placement search return: frozen records that turn into JSON-ready dicts
(``to_dict``), so a command, an HTTP endpoint and a page can print the same thing.

Every estimate's ``source`` is ``estimate``; each of its inputs says where its own number comes from:
``measured`` or ``simulated`` (a measurement in the snapshot), ``theoretical`` (a line rate times the named
efficiency of its kind), ``estimate`` (a stated default, such as the SMP link's rate) or ``unknown``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from ..model._provenance import ESTIMATE


class Collective(enum.StrEnum):
    """nccl-tests' names (``all_reduce_perf``, ``all_gather_perf``, ``reduce_scatter_perf``, ``alltoall_perf``)."""

    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_TO_ALL = "alltoall"


class Algorithm(enum.StrEnum):
    RING = "ring"  # a ring over the group, in the order given in ``gpus``
    NVLS = "nvls"  # NVLink SHARP: the NVSwitches reduce and multicast
    DIRECT = "direct"  # every GPU sends to every other at once (all-to-all)


def bus_factor(collective: Collective, n: int) -> float:
    """nccl-tests' bus bandwidth over algorithm bandwidth: 2(n-1)/n for all-reduce, (n-1)/n otherwise."""
    if n < 2:
        return 0.0
    return 2 * (n - 1) / n if collective is Collective.ALL_REDUCE else (n - 1) / n


@dataclass(frozen=True, slots=True, kw_only=True)
class Bottleneck:
    """The physical link that limits the estimate, in the direction the traffic crosses it."""

    link: str  # link id, ``<kind>:<a>--<b>``
    kind: str  # nvlink, pcie, numa (the SMP interconnect between sockets)
    a: str
    b: str
    towards: str  # the end the limiting traffic flows to (a or b)
    capacity_bytes_per_second: float | None  # per direction, as the model uses it
    flows: float  # transfers crossing it this way at once (shares of striped NVLink traffic add up)
    source: str  # of the capacity (or of the measured pair rate that binds)

    def to_dict(self) -> dict[str, Any]:
        return {"link": self.link, "kind": self.kind, "a": self.a, "b": self.b, "towards": self.towards,
                "capacity_bytes_per_second": self.capacity_bytes_per_second, "flows": round(self.flows, 6),
                "source": self.source}


@dataclass(frozen=True, slots=True, kw_only=True)
class EstimateInput:
    what: str  # link (a capacity), pair (a measured GPU-to-GPU rate), latency (one step), nvls
    subject: str  # a link id with its direction (``... a->b``), or ``x->y`` for a GPU pair
    value: float | None
    unit: str  # bytes_per_second, seconds
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"what": self.what, "subject": self.subject, "value": self.value, "unit": self.unit,
                "source": self.source}


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveEstimate:
    collective: Collective
    algorithm: Algorithm
    gpus: tuple[str, ...]  # the group; for a ring, in ring order
    size_bytes: int  # nccl-tests' size: the buffer each rank reduces (all-reduce), gathers in total, ...
    seconds: float | None  # None when a link on the way has no known rate
    algbw_bytes_per_second: float | None
    busbw_bytes_per_second: float | None
    latency_seconds: float  # the latency term inside ``seconds``
    bottleneck: Bottleneck | None
    inputs: tuple[EstimateInput, ...] = ()
    order_exact: bool = True  # the ring order was proven best (False: best found within the search budget)
    unknown: tuple[str, ...] = ()  # facts the estimate could not use (unknown NVLinks, PCIe paths, rates)
    model: tuple[tuple[str, float], ...] = ()  # the named efficiencies and defaults the model applies
    source: str = ESTIMATE

    def sources(self) -> dict[str, tuple[str, ...]]:
        """Input subjects by source: which numbers were measured, which theoretical, which defaults."""
        out: dict[str, list[str]] = {}
        for i in self.inputs:
            out.setdefault(i.source, []).append(f"{i.what} {i.subject}")
        return {k: tuple(v) for k, v in sorted(out.items())}

    def to_dict(self) -> dict[str, Any]:
        return {"collective": self.collective.value, "algorithm": self.algorithm.value, "gpus": list(self.gpus),
                "size_bytes": self.size_bytes, "seconds": self.seconds,
                "algbw_bytes_per_second": self.algbw_bytes_per_second,
                "busbw_bytes_per_second": self.busbw_bytes_per_second, "latency_seconds": self.latency_seconds,
                "bottleneck": self.bottleneck.to_dict() if self.bottleneck else None,
                "sources": {k: list(v) for k, v in self.sources().items()},
                "inputs": [i.to_dict() for i in self.inputs], "order_exact": self.order_exact,
                "unknown": list(self.unknown), "model": dict(self.model), "source": self.source}


@dataclass(frozen=True, slots=True, kw_only=True)
class LeftOut:
    gpu: str
    index: int | None
    reason: str  # excluded, lost, mig, busy
    detail: str = ""  # why, where the reason has more to say (busy: "2 compute processes running")

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "index": self.index, "reason": self.reason, "detail": self.detail}


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupChoice:
    rank: int  # 1 is the best
    gpus: tuple[str, ...]  # in NVML index order
    indices: tuple[int | None, ...]
    estimate: CollectiveEstimate
    links_used: int  # directed physical links the group's traffic crosses (fewer is better among equals)

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "gpus": list(self.gpus), "indices": list(self.indices),
                "links_used": self.links_used, "estimate": self.estimate.to_dict()}


@dataclass(frozen=True, slots=True, kw_only=True)
class Placement:
    """The K best groups of N GPUs on one node, best first; equal estimates are ordered by fewer sockets, then
    fewer host bridges spanned, then fewer links used, then GPU index."""

    node: str
    gpus: int  # N
    size_bytes: int
    collective: Collective
    groups: tuple[GroupChoice, ...]
    available: tuple[str, ...]  # the GPUs the search chose from
    left_out: tuple[LeftOut, ...]
    evaluated: int  # groups whose estimate was computed
    exhaustive: bool  # every group of N among the available GPUs was evaluated
    optimal: bool  # the first group is proven best (exhaustive, or it meets a bound no group can beat)
    note: str = ""
    source: str = ESTIMATE

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "gpus": self.gpus, "size_bytes": self.size_bytes,
                "collective": self.collective.value, "groups": [g.to_dict() for g in self.groups],
                "available": list(self.available), "left_out": [x.to_dict() for x in self.left_out],
                "evaluated": self.evaluated, "exhaustive": self.exhaustive, "optimal": self.optimal,
                "note": self.note, "source": self.source}
