"""The best ring over a group of GPUs, and the time of any traffic pattern on the fabric.

Traffic is a set of transfers that run at once, each (route, bytes). A link carries the bytes of every
transfer that crosses it in that direction (a striped NVLink transfer its share on each link), so the
bandwidth time is the largest of: bytes on a link over its capacity, and a measured pair's bytes over its
measured rate (a transfer never beats what its pair measured alone). Hops that share a PCIe uplink, a
host bridge's link or the SMP link thus share its bandwidth.

A ring all-reduce moves ``2(n-1)/n x size`` over every hop in ``2(n-1)`` steps, each costing the slowest
hop's latency. The ring's order is searched: the locality order first (socket, host bridge, PCIe chain),
then a greedy order by pair rate, each accepted at once when it meets the group's lower bound; else a
branch and bound over orders, exact unless it runs out of its budget of partial rings. Every partial ring's
cost is a lower bound on its completions' (loads only grow), which is what makes the pruning sound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..fabric._fabric import Fabric

RING_BUDGET = 20_000  # partial rings the branch and bound may extend before it settles for the best found
_EPS = 1e-9


@dataclass(frozen=True, slots=True, kw_only=True)
class Timing:
    """The cost of some traffic, and what bounds it."""

    bandwidth_seconds: float  # inf when a transfer's way has no known rate
    latency_seconds: float
    loads: dict[int, float]  # directed link key -> bytes
    worst_key: int | None  # the link whose bytes over capacity is the bandwidth time
    worst_pair: tuple[str, str] | None  # set instead when a measured pair rate binds
    transfer_bytes: float  # the largest transfer's bytes

    @property
    def seconds(self) -> float:
        return self.bandwidth_seconds + self.latency_seconds


def traffic_time(fab: Fabric, transfers: Sequence[tuple[str, str, float]], latency_seconds: float) -> Timing:
    """Transfers (src, dst, bytes) running at once."""
    loads: dict[int, float] = {}
    worst, worst_key, worst_pair = 0.0, None, None
    for x, y, nbytes in transfers:
        r = fab.route(x, y)
        known = False
        for k, share in r.loads:
            loads[k] = loads.get(k, 0.0) + nbytes * share
            known = known or fab.capacity[k] is not None
        if r.measured is not None:
            known = True
            if nbytes / r.measured > worst:
                worst, worst_key, worst_pair = nbytes / r.measured, None, (x, y)
        if not known:
            return Timing(bandwidth_seconds=math.inf, latency_seconds=latency_seconds, loads=loads,
                          worst_key=None, worst_pair=(x, y), transfer_bytes=nbytes)
    for k, load in loads.items():
        cap = fab.capacity[k]
        if cap is not None and load / cap > worst * (1 + _EPS):
            worst, worst_key, worst_pair = load / cap, k, None
    return Timing(bandwidth_seconds=worst, latency_seconds=latency_seconds, loads=loads, worst_key=worst_key,
                  worst_pair=worst_pair, transfer_bytes=max((b for _, _, b in transfers), default=0.0))


def ring_hops(order: Sequence[str]) -> list[tuple[str, str]]:
    return [(x, order[(i + 1) % len(order)]) for i, x in enumerate(order)] if len(order) > 1 else []


@dataclass(frozen=True, slots=True, kw_only=True)
class Ring:
    order: tuple[str, ...]
    seconds: float  # inf when unknown
    exact: bool  # proven the best order


class _Budget(Exception):
    pass


def _cost(fab: Fabric, order: Sequence[str], hop_bytes: float, steps: int) -> float:
    hops = ring_hops(order)
    lat = max((fab.route(x, y).latency for x, y in hops), default=0.0)
    return traffic_time(fab, [(x, y, hop_bytes) for x, y in hops], steps * lat).seconds


def lower_bound(fab: Fabric, gpus: Sequence[str], hop_bytes: float, steps: int) -> float:
    """No ring over ``gpus`` is faster: each GPU sends one hop and receives one, never faster than its own
    links allow; a ring crosses every link that cuts the group in two (with no NVLink across) at least once
    each way; and each GPU waits at least its nearest neighbour's latency."""
    bounds = [fab.first_link_bound(g) for g in gpus]
    ratio = 1.0 / min(b for b in bounds if b is not None) if None not in bounds else 0.0
    lat = max(min(fab.latency(x, y)[0] for y in gpus if y != x) for x in gpus)
    return hop_bytes * max(ratio, cut_ratio(fab, gpus)) + steps * lat


def _cut(fab: Fabric, side: set[str], rest: set[str], links: Sequence[int]) -> float:
    if not side or not rest or any(fab.nvlinked(x, y) for x in side for y in rest):
        return 0.0
    caps = [fab.capacity[2 * i + d] for i in links for d in (0, 1)]
    return 0.0 if None in caps else 1.0 / min(c for c in caps if c is not None)


def cut_ratio(fab: Fabric, gpus: Sequence[str]) -> float:
    """1 / the narrowest rate of a link that every ring over ``gpus`` crosses both ways: a PCIe link with some
    of the group below it and some not, or the SMP link between the two sockets the group spans; 0 if none."""
    group = set(gpus)
    below: dict[int, set[str]] = {}
    for g in gpus:
        for i, _ in fab.pcie_links(g):
            below.setdefault(i, set()).add(g)
    worst = max((_cut(fab, side, group - side, (i,)) for i, side in below.items()), default=0.0)
    return max(worst, smp_cut_ratio(fab, gpus))


def smp_cut_ratio(fab: Fabric, gpus: Sequence[str]) -> float:
    """1 / the SMP link's rate when ``gpus`` span two sockets with no NVLink between them (every ring crosses
    it both ways), else 0."""
    group = set(gpus)
    sockets = {fab.socket.get(g) for g in gpus}
    if len(sockets) != 2 or None in sockets:
        return 0.0
    sa, sb = sorted(s for s in sockets if s is not None)
    side = {g for g in gpus if fab.socket.get(g) == sa}
    if any(fab.root.get(x) == fab.root.get(y) for x in side for y in group - side):
        return 0.0
    return _cut(fab, side, group - side, (fab.smp_link(sa, sb),))


def best_ring(fab: Fabric, gpus: Sequence[str], hop_bytes: float, steps: int, budget: int = RING_BUDGET) -> Ring:
    """The fastest ring over ``gpus`` (given in locality order) for ``hop_bytes`` per hop in ``steps`` steps."""
    n = len(gpus)
    if n < 3:
        return Ring(order=tuple(gpus), seconds=_cost(fab, gpus, hop_bytes, steps) if n == 2 else 0.0, exact=True)
    bound = lower_bound(fab, gpus, hop_bytes, steps) * (1 + _EPS)
    best = Ring(order=tuple(gpus), seconds=_cost(fab, gpus, hop_bytes, steps), exact=True)
    if best.seconds <= bound:
        return best
    greedy = _greedy(fab, gpus)
    seconds = _cost(fab, greedy, hop_bytes, steps)
    if seconds < best.seconds * (1 - _EPS):
        best = Ring(order=greedy, seconds=seconds, exact=True)
    if best.seconds <= bound:
        return best
    return _branch_and_bound(fab, gpus, hop_bytes, steps, budget=budget, start=best)


def _greedy(fab: Fabric, gpus: Sequence[str]) -> tuple[str, ...]:
    rank = {g: i for i, g in enumerate(gpus)}
    order, left = [gpus[0]], set(gpus[1:])
    while left:
        x = order[-1]
        y = max(left, key=lambda c: (fab.solo(x, c), -rank[c]))
        order.append(y)
        left.remove(y)
    return tuple(order)


def _branch_and_bound(fab: Fabric, gpus: Sequence[str], hop_bytes: float, steps: int, *, budget: int,
                      start: Ring) -> Ring:
    rank = {g: i for i, g in enumerate(gpus)}
    nearest = {x: sorted((y for y in gpus if y != x), key=lambda y: (-fab.solo(x, y), rank[y])) for x in gpus}
    cap = fab.capacity
    loads: dict[int, float] = {}
    best_order, best_seconds = start.order, start.seconds
    first, n = gpus[0], len(gpus)
    path, used = [first], {first}
    expanded = 0

    def extend(x: str, y: str, ratio: float, lat: float) -> tuple[float, float, list[tuple[int, float]]]:
        r = fab.route(x, y)
        undo = []
        known = r.measured is not None
        if r.measured is not None:
            ratio = max(ratio, 1.0 / r.measured)
        for k, share in r.loads:
            old = loads.get(k, 0.0)
            undo.append((k, old))
            loads[k] = old + share
            c = cap[k]
            if c is not None:
                known = True
                ratio = max(ratio, loads[k] / c)
        return (ratio if known else math.inf), max(lat, r.latency), undo

    def restore(undo: list[tuple[int, float]]) -> None:
        for k, old in reversed(undo):
            loads[k] = old

    def search(ratio: float, lat: float) -> None:
        nonlocal best_order, best_seconds, expanded
        x = path[-1]
        if len(path) == n:
            r2, l2, undo = extend(x, first, ratio, lat)
            seconds = hop_bytes * r2 + steps * l2
            restore(undo)
            if seconds < best_seconds * (1 - _EPS):
                best_order, best_seconds = tuple(path), seconds
            return
        for y in nearest[x]:
            if y in used:
                continue
            expanded += 1
            if expanded > budget:
                raise _Budget
            r2, l2, undo = extend(x, y, ratio, lat)
            if hop_bytes * r2 + steps * l2 < best_seconds * (1 - _EPS):
                path.append(y)
                used.add(y)
                search(r2, l2)
                path.pop()
                used.remove(y)
            restore(undo)

    try:
        search(0.0, 0.0)
    except _Budget:
        return Ring(order=best_order, seconds=best_seconds, exact=False)
    return Ring(order=best_order, seconds=best_seconds, exact=True)
