"""``coherent``: a snapshot whose every field is in range may still say things that cannot all be true.
Each rule here is one discovery itself keeps, so a document breaking it was edited or made elsewhere and
is refused whole (``SchemaError`` naming the field), never rendered as if complete.

- Something was read: ``sources`` is not empty (nothing is known otherwise; see ``Snapshot.complete``).
- Every id it refers to is one of its own, and no PCI function is two devices (``_references``).
- A source that is ``partial``, ``failed`` or ``disabled`` has a problem saying which facts it left
  unknown (v2: discovery always writes one), and a GPU marked ``lost`` is wholly unknown.
- NVML and the GPUs agree: NVML ``absent`` with GPUs whose NVLinks are said known is the confident wrong
  graph of a driver not up yet; a GPU NVML did not number (no index) while NVML was read has an unknown
  identity.
- NVML's P2P status over NVLink is OK only between GPUs an NVLink path joins, unless the NVLinks of either
  are unknown.
- Numbers mean what they say: rates, sizes and durations are positive (and below ``MAX_RATE`` and
  ``MAX_SECONDS``), statistics ordered (p5 <= median <= p95), a measurement names devices of the snapshot
  (or ``host``), and a measured rate is at most ``MEASURED_OVER_THEORETICAL`` times what the links allow
  (``LinkCapability``): 1.5 leaves room for an all-reduce through NVSwitch reductions (NVLS: busbw above
  the per-link rate) and for rounding, not for a copy four times faster than its link.
"""

from __future__ import annotations

import math

from ..fabric._capability import LinkCapability
from ..fabric._paths import path_index
from ..fabric._physics_rules import measured_breach
from ..model._entities import Snapshot
from ..model._errors import SchemaError
from ..model._facts import Aspect, Knowledge
from ..model._measurement import Measurement
from ..model._provenance import Source, SourceStatus
from ._references import references

MAX_RATE = 1e15  # bytes per second: 1 PB/s, a hundred times any memory or link of today
MAX_SECONDS = 1e6  # a latency or a source's duration of 11 days is not one
_HOST = "host"  # the probes' subject for host memory on no known NUMA node
_OWING = (SourceStatus.PARTIAL, SourceStatus.FAILED, SourceStatus.DISABLED)
_P2P_NVLINK = "nvml_p2p_nvlink"
_P2P_OK = 0  # nvmlGpuP2PStatus_t NVML_P2P_STATUS_OK


def coherent(snap: Snapshot, *, v1: bool = False) -> None:
    """Raises SchemaError at the first rule ``snap`` breaks (the field named); ``v1`` documents could not
    say which facts a problem leaves unknown, so the rules about problems apply to v2 only."""
    if not snap.sources:
        raise SchemaError("snapshot.sources: empty: no source read anything, so nothing in it is known")
    k = snap.knowledge()
    references(snap, k)
    if not v1:
        _owed(snap)
        _nvml(snap, k)
    _p2p(snap, k)
    for i, link in enumerate(snap.links):
        if link.bytes_per_second is not None and link.bytes_per_second <= 0:
            raise SchemaError(f"snapshot.links[{i}].bytes_per_second: {link.bytes_per_second!r} is not positive")
    for i, o in enumerate(snap.sources):
        if not (math.isfinite(o.duration_seconds) and 0 <= o.duration_seconds <= MAX_SECONDS):
            raise SchemaError(f"snapshot.sources[{i}].duration_seconds: {o.duration_seconds!r} is not a duration")
    if snap.taken_at is not None and not (math.isfinite(snap.taken_at) and snap.taken_at >= 0):
        raise SchemaError(f"snapshot.taken_at: {snap.taken_at!r} is not a time")
    cap = LinkCapability(snap)
    devices = ({g.id for g in snap.gpus} | {n.id for n in snap.nics} | {n.id for n in snap.numa_nodes}
               | {f.id for f in snap.pci} | {_HOST})
    for i, m in enumerate(snap.measurements):
        where = f"snapshot.measurements[{i}]"
        stray = [s for s in m.subjects if s not in devices]
        if stray:
            raise SchemaError(f"{where}.subjects: {stray[0]!r} is no device of the snapshot")
        _measurement(where, m, cap)


def _owed(snap: Snapshot) -> None:
    said = {p.source for p in snap.problems if p.unknown}
    for i, o in enumerate(snap.sources):
        if o.status in _OWING and o.name not in said:
            raise SchemaError(f"snapshot.sources[{i}].status: {o.name} is {o.status.value}, yet no problem of "
                              f"{o.name} says what it left unknown")


def _nvml(snap: Snapshot, k: Knowledge) -> None:
    nvml = next(((i, o) for i, o in enumerate(snap.sources) if o.name == "nvml"), None)
    read = nvml is not None and nvml[1].status in (SourceStatus.OK, SourceStatus.PARTIAL)
    for i, g in enumerate(snap.gpus):
        if g.lost and k.knows(g.id, Aspect.ALL):
            raise SchemaError(f"snapshot.gpus[{i}].lost: {g.id} is lost, yet no problem leaves it unknown")
        if read and g.index is None and k.knows(g.id, Aspect.IDENTITY):
            raise SchemaError(f"snapshot.gpus[{i}].index: NVML was read but did not number {g.id}, yet its "
                              "identity is said known")
    if nvml is not None and nvml[1].status is SourceStatus.ABSENT and any(
            k.knows(g.id, Aspect.NVLINKS) for g in snap.gpus):
        raise SchemaError(f"snapshot.sources[{nvml[0]}].status: NVML absent while GPUs are on the bus, yet their "
                          "NVLinks are said known")


def _p2p(snap: Snapshot, k: Knowledge) -> None:
    m = snap.matrix(_P2P_NVLINK)
    if m is None:
        return
    index = path_index(snap)
    for i, a in enumerate(m.ids):
        for j in range(i + 1, len(m.ids)):
            b = m.ids[j]
            if m.values[i][j] != _P2P_OK or not (k.knows(a, Aspect.NVLINKS) and k.knows(b, Aspect.NVLINKS)):
                continue
            if not index.nvlinks(a, b):
                raise SchemaError(f"snapshot.matrices ({_P2P_NVLINK}): {a} and {b} do P2P over NVLink, yet no "
                                  "NVLink joins them and the NVLinks of both are said to be known")


def _positive(where: str, value: float | None) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise SchemaError(f"{where}: {value!r} is not a positive number")


def _measurement(where: str, m: Measurement, cap: LinkCapability) -> None:
    _positive(f"{where}.value", m.value)
    ceiling = MAX_SECONDS if m.unit == "seconds" else MAX_RATE
    if m.value > ceiling:
        raise SchemaError(f"{where}.value: {m.value:.4g} {m.unit} is beyond anything measured ({ceiling:g})")
    _positive(f"{where}.size_bytes", m.size_bytes)
    if m.taken_at is not None and not (math.isfinite(m.taken_at) and m.taken_at >= 0):
        raise SchemaError(f"{where}.taken_at: {m.taken_at!r} is not a time")
    s = m.stats
    if s is not None:
        for name in ("median", "p5", "p95"):
            _positive(f"{where}.stats.{name}", getattr(s, name))
        for j, sample in enumerate(s.samples):
            _positive(f"{where}.stats.samples[{j}]", sample)
        if not (math.isfinite(s.cv) and s.cv >= 0):
            raise SchemaError(f"{where}.stats.cv: {s.cv!r} is not a coefficient of variation")
        if not s.p5 <= s.median <= s.p95:
            raise SchemaError(f"{where}.stats: p5 {s.p5!r}, median {s.median!r}, p95 {s.p95!r} are not in order")
    why = measured_breach(m, cap) if m.source is Source.MEASURED else ""
    if why:
        raise SchemaError(f"{where}.value: {why}")
