"""``best_groups``: the K best groups of N GPUs on one node for a collective, by the cost model's estimate.

The GPUs to choose from are the node's, less those asked to be left out, lost ones (fell off the bus),
by default those in MIG mode (a MIG GPU takes no part in peer collectives as a whole GPU), and those the
caller says are busy (compute processes, utilisation: a fact of the moment, asked of NVML by the caller);
the result names each left out and why. Equal estimates are ordered by fewer sockets, then fewer host bridges spanned,
then fewer directed physical links used (traffic that stays under one PCIe switch leaves the uplinks free
for other jobs), then GPU index.

With at most :data:`EXACT_GPUS` GPUs to choose from every group is evaluated. Above that the search
builds candidates from the node's structure (runs of N GPUs in locality order: socket, NVLink island,
host bridge, PCIe switch, index, started and ended at each boundary of those), evaluates them most compact
first, and stops once the best meet a bound no group can beat (its GPUs' own links, the lowest latencies)
and no candidate left is more compact; when no candidate meets the bound it improves the best by swapping
one GPU at a time, within :data:`SWAP_BUDGET` evaluations (proportionally fewer for groups of more than
:data:`SWAP_GPUS`, whose evaluations cost more). On an NVLink domain of 72 GPUs that is a few candidates
instead of C(72, 16) = 10^15 groups.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence

from ..model._entities import Snapshot
from ..model._errors import TopolinkError
from ._cost_model import CostModel, Plan
from ._cost_types import Algorithm, Collective, GroupChoice, LeftOut, Placement
from ._ring import smp_cut_ratio

EXACT_GPUS = 10
SWAP_BUDGET = 400
SWAP_GPUS = 16  # groups larger than this get proportionally fewer swaps: each costs more, the whole stays bounded
PLACEMENT_SIZE_BYTES = 1 << 30  # large enough that bandwidth, not latency, decides
_EPS = 1e-9


class PlacementError(TopolinkError, ValueError):
    """A placement request that cannot be answered as asked (an unknown GPU, a group size below 1)."""


def _resolve(model: CostModel, exclude: Iterable[str | int]) -> set[str]:
    by_index = {g.index: gid for gid, g in model.fabric.gpus.items() if g.index is not None}
    out: set[str] = set()
    for item in exclude:
        gid = by_index.get(item) if isinstance(item, int) else (item if item in model.fabric.gpus else None)
        if gid is None:
            raise PlacementError(f"no GPU {item!r} on {model.snap.node}")
        out.add(gid)
    return out


def _islands(model: CostModel, gpus: Sequence[str]) -> dict[str, int]:
    """GPU -> the position of the first GPU of its NVLink island (in ``gpus``' order)."""
    fab = model.fabric
    island = {g: i for i, g in enumerate(gpus)}
    for i, a in enumerate(gpus):
        for b in gpus[i + 1:]:
            if island[a] != island[b] and fab.nvlinked(a, b):
                old, new = max(island[a], island[b]), min(island[a], island[b])
                island = {g: (new if v == old else v) for g, v in island.items()}
    return island


class _Search:
    def __init__(self, model: CostModel, available: list[str], n: int, *, size: int, collective: Collective,
                 top: int) -> None:
        self.model, self.available, self.n, self.size, self.collective, self.top = (
            model, available, n, size, collective, top)
        self.seen: dict[frozenset[str], tuple[tuple[float, int, int, int, tuple[int, ...]], Plan]] = {}

    def key(self, group: Sequence[str], plan: Plan) -> tuple[float, int, int, int, tuple[int, ...]]:
        fab = self.model.fabric
        seconds = float(f"{plan.seconds:.9g}") if math.isfinite(plan.seconds) else math.inf
        sockets, roots = self.spread(group)
        return (seconds, sockets, roots, plan.links_used, tuple(sorted(fab.order[g] for g in group)))

    def spread(self, group: Iterable[str]) -> tuple[int, int]:
        fab = self.model.fabric
        members = list(group)
        return len({fab.socket.get(g) for g in members}), len({fab.root.get(g) for g in members})

    def evaluate(self, group: Iterable[str]) -> tuple[float, int, int, int, tuple[int, ...]]:
        members = frozenset(group)
        if members not in self.seen:
            plan = self.model.plan(tuple(members), self.size, self.collective)
            self.seen[members] = (self.key(tuple(members), plan), plan)
        return self.seen[members][0]

    def best(self) -> list[tuple[frozenset[str], Plan]]:
        ranked = heapq.nsmallest(self.top, self.seen.items(), key=lambda kv: kv[1][0])
        return [(members, plan) for members, (_, plan) in ranked]

    def bound(self) -> float:
        """No group of N among the available GPUs is faster than this."""
        fab, n = self.model.fabric, self.n
        bounds = [fab.first_link_bound(g) for g in self.available]
        lat = sorted(min(fab.latency(x, y)[0] for y in self.available if y != x) for x in self.available)[n - 1]
        if None in bounds:
            return 0.0
        ratio = 1.0 / sorted((b for b in bounds if b is not None), reverse=True)[n - 1]
        if self.collective is Collective.ALL_TO_ALL:  # each GPU sends (n-1)/n of its buffer over its own links
            return self.size * (n - 1) / n * ratio + lat
        steps = 2 * (n - 1) if self.collective is Collective.ALL_REDUCE else n - 1
        hop = self.size * (2 if self.collective is Collective.ALL_REDUCE else 1) * (n - 1) / n
        sockets: dict[int | None, list[str]] = {}
        for g in self.available:
            sockets.setdefault(fab.socket.get(g), []).append(g)
        if len(sockets) == 2 and None not in sockets and n > max(len(v) for v in sockets.values()):
            ratio = max(ratio, smp_cut_ratio(fab, self.available))  # every group spans both sockets
        ring = hop * ratio + steps * lat
        nvls = sorted((r for g in self.available if (r := self.model.nvls_bound(g)) is not None), reverse=True)
        if self.collective is Collective.ALL_REDUCE and len(nvls) >= n:
            return min(ring, self.model.nvls_seconds_at(nvls[n - 1], self.size))
        return ring

    def candidates(self) -> list[list[str]]:
        avail, n = self.available, self.n
        fab = self.model.fabric
        island = _islands(self.model, avail)
        order = sorted(avail, key=lambda g: (self.model.locality_key(g)[0], island[g], *self.model.locality_key(g)[1:]))
        levels = [[f"{fab.socket.get(g)}/{island[g]}" for g in order], [str(fab.root.get(g)) for g in order],
                  [self.model.switch_of(g) for g in order]]
        starts = {0}
        for marks in levels:
            cuts = {i for i in range(1, len(order)) if marks[i] != marks[i - 1]}
            if len(cuts) < len(order) - 1:  # a level where every GPU is a unit of its own adds nothing
                starts |= cuts
        windows = [order[s:s + n] for s in sorted(starts) if s + n <= len(order)]
        windows += [order[e - n:e] for e in sorted(starts | {len(order)}) if e >= n]
        return sorted(windows, key=lambda w: (self.spread(w), sorted(fab.order[g] for g in w)))

    def _swaps(self, current: frozenset[str]) -> Iterable[frozenset[str]]:
        """Groups one swap away, the likeliest improvements first: the member least tied to the others out,
        the outsider most tied to the members in."""
        fab = self.model.fabric
        outside = [g for g in self.available if g not in current]
        if not outside:
            return iter(())
        weakest = sorted(current, key=lambda g: min(fab.solo(g, o) for o in current if o != g))
        strongest = sorted(outside, key=lambda g: -max(fab.solo(g, o) for o in current))
        return ((current - {out}) | {into} for out, into in itertools.product(weakest, strongest))

    def improve(self, start: frozenset[str], budget: int) -> None:
        """Swaps one GPU at a time while that makes the group faster, within ``budget`` evaluations."""
        current, spent = start, 0
        while spent < budget:
            here, better = self.evaluate(current), None
            for trial in self._swaps(current):
                spent += 1
                if spent > budget or self.evaluate(trial) < here:
                    better = trial if spent <= budget else None
                    break
            if better is None:
                return
            current = better

    def fill(self, start: frozenset[str], count: int) -> None:
        """Evaluates groups one swap from ``start`` until ``count`` groups are known (for the K best when the
        structure gives fewer candidates)."""
        for trial in self._swaps(start):
            if len(self.seen) >= count:
                return
            self.evaluate(trial)


def best_groups(snap_or_model: Snapshot | CostModel, n: int, *, size_bytes: int = PLACEMENT_SIZE_BYTES, top: int = 3,
                exclude: Iterable[str | int] = (), collective: Collective = Collective.ALL_REDUCE,
                include_lost: bool = False, include_mig: bool = False,
                busy: Mapping[str, str] | None = None) -> Placement:
    """The ``top`` best groups of ``n`` GPUs for ``collective`` of ``size_bytes``. ``snap_or_model`` is a
    :class:`Snapshot` or a :class:`CostModel` built from one (to reuse its routes); ``exclude`` takes GPU ids
    or NVML indices; ``busy`` maps GPU ids to why each is busy (left out, with that reason)."""
    model = snap_or_model if isinstance(snap_or_model, CostModel) else CostModel(snap_or_model)
    if n < 1 or top < 1:
        raise PlacementError("a group has at least 1 GPU, and at least 1 group is asked for")
    fab = model.fabric
    left_out = _left_out(model, _resolve(model, exclude), busy or {}, include_lost=include_lost,
                         include_mig=include_mig)
    out = {x.gpu for x in left_out}
    available = sorted((g for g in fab.gpus if g not in out), key=model.locality_key)

    def placement(groups: tuple[GroupChoice, ...], evaluated: int, exhaustive: bool, optimal: bool,
                  note: str) -> Placement:
        return Placement(node=model.snap.node, gpus=n, size_bytes=size_bytes, collective=collective, groups=groups,
                         available=tuple(sorted(available, key=lambda g: fab.order[g])), left_out=tuple(left_out),
                         evaluated=evaluated, exhaustive=exhaustive, optimal=optimal, note=note)

    if n > len(available):
        return placement((), 0, True, True, f"{len(available)} GPUs available, {n} asked for")
    search = _Search(model, available, n, size=size_bytes, collective=collective, top=top)
    exhaustive = len(available) <= EXACT_GPUS
    optimal = _run(search, available, n, top, exhaustive=exhaustive)
    choices = []
    for rank, (members, plan) in enumerate(search.best(), 1):
        ids = tuple(sorted(members, key=lambda g: fab.order[g]))
        estimate = model.estimate(ids, size_bytes, collective)
        choices.append(GroupChoice(rank=rank, gpus=ids, indices=tuple(fab.gpus[g].index for g in ids),
                                   estimate=estimate, links_used=plan.links_used))
    note = "" if optimal else "best found: no bound proves it best among all groups"
    if choices and choices[0].estimate.algorithm is Algorithm.NVLS:
        note = (note + "; " if note else "") + "NVLS (NVLink SHARP) is faster than the best ring for this group"
    return placement(tuple(choices), len(search.seen), exhaustive, optimal, note)


def _left_out(model: CostModel, excluded: set[str], busy: Mapping[str, str], *, include_lost: bool,
              include_mig: bool) -> list[LeftOut]:
    """The GPUs no group may have, each with its reason, in the fabric's order."""
    left_out = []
    for gid, g in model.fabric.gpus.items():
        reason = ("excluded" if gid in excluded else "lost" if g.lost and not include_lost
                  else "mig" if g.mig_enabled and not include_mig else "busy" if gid in busy else None)
        if reason:
            left_out.append(LeftOut(gpu=gid, index=g.index, reason=reason,
                                    detail=busy[gid] if reason == "busy" else ""))
    return left_out


def _run(search: _Search, available: list[str], n: int, top: int, *, exhaustive: bool) -> bool:
    """Evaluates every group (``exhaustive``) or searches from the structure's candidates, then improves the
    best by swaps; True when the best found is proven best among all groups."""
    if exhaustive:
        for group in itertools.combinations(available, n):
            search.evaluate(group)
        return True
    bound = search.bound() * (1 + _EPS)
    for candidate in search.candidates():
        ranked = search.best()
        if len(ranked) == top and all(plan.seconds <= bound for _, plan in ranked) \
                and search.spread(candidate) > search.spread(ranked[-1][0]):
            break  # the rest can neither be faster nor span fewer sockets and host bridges
        search.evaluate(candidate)
    if len(search.seen) < min(top, math.comb(len(available), n)):
        search.fill(search.best()[0][0], top)
    first = search.best()[0]
    if first[1].seconds <= bound:
        return True
    search.improve(first[0], SWAP_BUDGET * SWAP_GPUS // max(n, SWAP_GPUS))
    return search.best()[0][1].seconds <= bound
