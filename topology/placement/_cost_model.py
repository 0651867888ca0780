"""``collective_estimate``: the time of a collective over a GPU group, from the measured graph where it has
numbers and theoretical rates elsewhere, with the physical link that limits it and the source of every input.

- all-reduce, all-gather, reduce-scatter: the best ring (``_ring``). A ring moves ``f x size`` over every
  hop, ``f`` = 2(n-1)/n for all-reduce and (n-1)/n for the other two, in 2(n-1) or n-1 steps. nccl-tests'
  ``size`` is the buffer each rank reduces (all-reduce), or the whole gathered or scattered buffer.
- all-reduce also with NVLink SHARP (NVLS) where every GPU of the group reaches the same NVSwitches over
  NVLink 4 or later (Hopper's third-generation NVSwitch reduces in the switch): each GPU sends its buffer
  up once and receives the result once, at :data:`NVLS_EFFICIENCY` of its NVSwitch links' line rate, in
  two switch steps. The faster of ring and NVLS is the estimate, as NCCL picks its algorithm by speed.
- all-to-all: every GPU sends ``size / n`` to every other at once, in one step.

Bus bandwidth is nccl-tests': algbw (``size / seconds``) x 2(n-1)/n for all-reduce, x (n-1)/n otherwise.
A tree is not modelled: NCCL's trees pay off between nodes; within a node it runs large all-reduces as a
ring or with NVLS.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..fabric._fabric import Fabric
from ..fabric._links import HOP_LATENCY_SECONDS, LINK_EFFICIENCY, SMP_BYTES_PER_SECOND, UNKNOWN
from ..model._entities import LinkKind, Snapshot
from ..model._provenance import ESTIMATE
from ._cost_types import Algorithm, Bottleneck, Collective, CollectiveEstimate, EstimateInput, bus_factor
from ._ring import RING_BUDGET, Timing, best_ring, ring_hops, traffic_time

# NVLS moves each GPU's buffer once each way; what it achieves of the NVSwitch links' line rate is fitted
# to the published all-reduce bus bandwidths in tests/data/published (8x H100 480 GB/s -> 0.61, 8x B200
# 830 GB/s -> 0.53, GB200 NVL72 835-847 GB/s over 72 GPUs -> 0.47): 0.53 puts all three within 15%.
NVLS_EFFICIENCY = 0.53


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    algorithm: Algorithm
    order: tuple[str, ...]
    seconds: float  # inf when unknown
    links_used: int  # directed physical links the traffic crosses
    exact: bool
    timing: Timing | None = None  # ring and direct
    transfers: tuple[tuple[str, str], ...] = ()


_RING_STEPS = {Collective.ALL_REDUCE: lambda n: 2 * (n - 1), Collective.ALL_GATHER: lambda n: n - 1,
               Collective.REDUCE_SCATTER: lambda n: n - 1}


def model_assumptions() -> dict[str, float]:
    """The named factors and defaults every estimate rests on, for a report to state beside its numbers."""
    return {"nvlink_efficiency": LINK_EFFICIENCY[LinkKind.NVLINK], "pcie_efficiency": LINK_EFFICIENCY[LinkKind.PCIE],
            "nvls_efficiency": NVLS_EFFICIENCY, "smp_default_bytes_per_second": SMP_BYTES_PER_SECOND,
            "nvlink_step_latency_default_seconds": HOP_LATENCY_SECONDS[LinkKind.NVLINK],
            "pcie_step_latency_default_seconds": HOP_LATENCY_SECONDS[LinkKind.PCIE]}


class CostModel:
    """The fabric of one snapshot, built once, for many estimates (a placement search asks thousands)."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.fabric = Fabric(snap)

    def estimate(self, gpus: Sequence[str], size_bytes: int, collective: Collective = Collective.ALL_REDUCE,
                 *, nvls: bool = True, ring_budget: int = RING_BUDGET) -> CollectiveEstimate:
        """``nvls=False`` leaves NVLink SHARP out, as ``NCCL_NVLS_ENABLE=0`` does."""
        plan = self.plan(gpus, size_bytes, collective, nvls=nvls, ring_budget=ring_budget)
        if plan.algorithm is Algorithm.NVLS:
            sharp = self._nvls(plan.order, size_bytes)
            assert sharp is not None
            return sharp
        n = len(plan.order)
        if n < 2:
            return CollectiveEstimate(collective=collective, algorithm=Algorithm.RING, gpus=plan.order,
                                      size_bytes=size_bytes, seconds=0.0, algbw_bytes_per_second=None,
                                      busbw_bytes_per_second=None, latency_seconds=0.0, bottleneck=None,
                                      model=tuple(model_assumptions().items()))
        assert plan.timing is not None
        return self._result(collective, plan.algorithm, plan.order, size_bytes=size_bytes, timing=plan.timing,
                            hops=plan.transfers, order_exact=plan.exact)

    def plan(self, gpus: Sequence[str], size_bytes: int, collective: Collective = Collective.ALL_REDUCE,
             *, nvls: bool = True, ring_budget: int = RING_BUDGET) -> Plan:
        """How the collective runs over ``gpus`` and its time, without the report (what a search compares)."""
        fab = self.fabric
        unknown_ids = [g for g in gpus if g not in fab.gpus]
        if unknown_ids:
            raise ValueError(f"not a GPU of {self.snap.node}: {', '.join(unknown_ids)}")
        if len(set(gpus)) != len(gpus):
            raise ValueError("a GPU appears twice in the group")
        group = tuple(sorted(gpus, key=self.locality_key))
        n = len(group)
        if n < 2:
            return Plan(algorithm=Algorithm.RING, order=group, seconds=0.0, links_used=0, exact=True)
        if collective is Collective.ALL_TO_ALL:
            share = size_bytes / n
            transfers = [(x, y) for x in group for y in group if x != y]
            lat = max(fab.route(x, y).latency for x, y in transfers)
            timing = traffic_time(fab, [(x, y, share) for x, y in transfers], lat)
            return Plan(algorithm=Algorithm.DIRECT, order=group, seconds=timing.seconds, links_used=len(timing.loads),
                        exact=True, timing=timing, transfers=tuple(transfers))
        steps = _RING_STEPS[collective](n)
        hop_bytes = size_bytes * (2 if collective is Collective.ALL_REDUCE else 1) * (n - 1) / n
        ring = best_ring(fab, group, hop_bytes, steps, ring_budget)
        hops = tuple(ring_hops(ring.order))
        lat = steps * max(fab.route(x, y).latency for x, y in hops)
        timing = traffic_time(fab, [(x, y, hop_bytes) for x, y in hops], lat)
        best = Plan(algorithm=Algorithm.RING, order=ring.order, seconds=timing.seconds, links_used=len(timing.loads),
                    exact=ring.exact, timing=timing, transfers=hops)
        if collective is Collective.ALL_REDUCE and nvls:
            seconds = self._nvls_seconds(group, size_bytes)
            if seconds is not None and seconds < best.seconds * (1 - 1e-9):
                used = 2 * len(self._common_switches(group)) * n
                return Plan(algorithm=Algorithm.NVLS, order=group, seconds=seconds, links_used=used, exact=True)
        return best

    def switch_of(self, gpu: str) -> str:
        """The upstream port of the PCIe switch right above the GPU (its leaf switch), else its host bridge."""
        up = self.fabric.pcie_links(gpu)
        return self.fabric.links[up[1][0]].a if len(up) > 1 else (self.fabric.root.get(gpu) or "")

    def locality_key(self, gpu: str) -> tuple[int, str, str, int]:
        """Sorts GPUs by socket, host bridge, leaf switch, NVML order: a ring in this order crosses each PCIe
        link and the SMP link once each way."""
        fab = self.fabric
        socket = fab.socket.get(gpu)
        return (socket if socket is not None else 1 << 30, fab.root.get(gpu) or "~", self.switch_of(gpu),
                fab.order[gpu])

    # -- NVLS --------------------------------------------------------------------------------------

    def _common_switches(self, group: Sequence[str]) -> set[str]:
        fab = self.fabric
        if len(group) < 2 or not all(g in fab.nvls_capable for g in group):
            return set()
        return set.intersection(*(set(fab.switch_links(g)) for g in group))

    def _nvls_rate(self, gpu: str, common: set[str]) -> float | None:
        rates = [self.fabric.links[self.fabric.switch_links(gpu)[s]].theoretical for s in common]
        return None if None in rates else NVLS_EFFICIENCY * sum(r for r in rates if r is not None)

    def nvls_bound(self, gpu: str) -> float | None:
        """The most NVLS could get out of ``gpu`` (all its NVSwitch links); None when it cannot use NVLS."""
        if gpu not in self.fabric.nvls_capable:
            return None
        return self._nvls_rate(gpu, set(self.fabric.switch_links(gpu)))

    @staticmethod
    def nvls_seconds_at(rate: float, size_bytes: int) -> float:
        return size_bytes / rate + 2 * HOP_LATENCY_SECONDS[LinkKind.NVLINK]

    def _nvls_seconds(self, group: Sequence[str], size_bytes: int) -> float | None:
        common = self._common_switches(group)
        rates = [self._nvls_rate(g, common) for g in group] if common else [None]
        if None in rates:
            return None
        return self.nvls_seconds_at(min(r for r in rates if r is not None), size_bytes)

    def _nvls(self, group: tuple[str, ...], size_bytes: int) -> CollectiveEstimate | None:
        fab = self.fabric
        common = sorted(self._common_switches(group))
        seconds = self._nvls_seconds(group, size_bytes)
        if seconds is None:
            return None
        inputs = [EstimateInput(what="nvls", subject=f"{fab.links[fab.switch_links(g)[s]].id} {g}->{s}",
                                value=(fab.links[fab.switch_links(g)[s]].theoretical or 0.0) * NVLS_EFFICIENCY,
                                unit="bytes_per_second", source="theoretical") for g in group for s in common]
        lat = 2 * HOP_LATENCY_SECONDS[LinkKind.NVLINK]
        inputs.append(EstimateInput(what="latency", subject="2 NVSwitch steps", value=lat, unit="seconds",
                                    source=ESTIMATE))
        gpu = min(group, key=lambda g: self._nvls_rate(g, set(common)) or 0.0)
        rate = self._nvls_rate(gpu, set(common)) or 1.0
        link = fab.links[max((fab.switch_links(gpu)[s] for s in common),
                             key=lambda i: fab.links[i].theoretical or 0.0)]
        capacity = (link.theoretical or 0.0) * NVLS_EFFICIENCY
        neck = Bottleneck(link=link.id, kind=link.kind.value, a=link.a, b=link.b,
                          towards=link.b if link.a == gpu else link.a, capacity_bytes_per_second=capacity,
                          flows=capacity / rate, source="theoretical")
        return self._finish(Collective.ALL_REDUCE, Algorithm.NVLS, group, size_bytes=size_bytes, seconds=seconds,
                            latency=lat, neck=neck, inputs=inputs, order_exact=True)

    # -- assembling a result -----------------------------------------------------------------------

    def _result(self, collective: Collective, algorithm: Algorithm, order: tuple[str, ...], *, size_bytes: int,
                timing: Timing, hops: Iterable[tuple[str, str]], order_exact: bool) -> CollectiveEstimate:
        fab = self.fabric
        hops = list(hops)
        inputs: list[EstimateInput] = []
        for k in sorted(timing.loads):
            link = fab.links[k // 2]
            src, dst = (link.a, link.b) if k % 2 == 0 else (link.b, link.a)
            inputs.append(EstimateInput(what="link", subject=f"{link.id} {src}->{dst}", value=fab.capacity[k],
                                        unit="bytes_per_second", source=fab.source_of(k)))
        for x, y in hops:
            r = fab.route(x, y)
            if r.measured is not None:
                inputs.append(EstimateInput(what="pair", subject=f"{x}->{y}", value=r.measured,
                                            unit="bytes_per_second", source=r.measured_source or UNKNOWN))
            inputs.append(EstimateInput(what="latency", subject=f"{x}->{y}", value=r.latency, unit="seconds",
                                        source=r.latency_source))
        seconds = timing.seconds if math.isfinite(timing.bandwidth_seconds) else None
        return self._finish(collective, algorithm, order, size_bytes=size_bytes, seconds=seconds,
                            latency=timing.latency_seconds, neck=self._bottleneck(timing), inputs=inputs,
                            order_exact=order_exact)

    def _bottleneck(self, timing: Timing) -> Bottleneck | None:
        fab = self.fabric
        if not math.isfinite(timing.bandwidth_seconds):
            return None
        key, capacity, source = timing.worst_key, None, None
        if key is None and timing.worst_pair is not None:
            # a measured pair rate binds: name the narrowest link on that pair's way
            r = fab.route(*timing.worst_pair)
            known = [(k, share) for k, share in r.loads if fab.capacity[k]]
            if known:
                key = max(known, key=lambda ks: ks[1] / (fab.capacity[ks[0]] or math.inf))[0]
            capacity, source = r.measured, r.measured_source
        if key is None:
            return None
        link = fab.links[key // 2]
        if source is None:
            capacity, source = fab.capacity[key], fab.source_of(key)
        flows = timing.loads.get(key, 0.0) / timing.transfer_bytes if timing.transfer_bytes else 0.0
        return Bottleneck(link=link.id, kind=link.kind.value, a=link.a, b=link.b,
                          towards=link.b if key % 2 == 0 else link.a, capacity_bytes_per_second=capacity,
                          flows=flows, source=source or UNKNOWN)

    def _finish(self, collective: Collective, algorithm: Algorithm, order: tuple[str, ...], *, size_bytes: int,
                seconds: float | None, latency: float, neck: Bottleneck | None, inputs: list[EstimateInput],
                order_exact: bool) -> CollectiveEstimate:
        fab = self.fabric
        unknown = [f"nvlinks of {g}" for g in order if g in fab.nvlinks_unknown]
        unknown += [f"pcie path of {g}" for g in order if g in fab.pcie_unknown]
        unknown += sorted({i.subject for i in inputs if i.source == UNKNOWN})
        algbw = size_bytes / seconds if seconds else None
        return CollectiveEstimate(
            collective=collective, algorithm=algorithm, gpus=order, size_bytes=size_bytes, seconds=seconds,
            algbw_bytes_per_second=algbw,
            busbw_bytes_per_second=None if algbw is None else algbw * bus_factor(collective, len(order)),
            latency_seconds=latency, bottleneck=neck, inputs=tuple(inputs), order_exact=order_exact,
            unknown=tuple(unknown), model=tuple(model_assumptions().items()))


def collective_estimate(snap: Snapshot, gpus: Sequence[str], size_bytes: int,
                        collective: Collective = Collective.ALL_REDUCE, *, nvls: bool = True) -> CollectiveEstimate:
    """The estimated time of ``collective`` over ``gpus`` (ids, any order: the ring order is chosen)."""
    return CostModel(snap).estimate(gpus, size_bytes, collective, nvls=nvls)
