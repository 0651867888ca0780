"""The Prometheus collectors: families from the agent's current :class:`View`, and the HTTP server's counters.

``collect`` only reads the view reference and builds families: no NVML, no sysfs, no locks. Every label
set is stable: a state is a value (a numeric code documented in the family's help), so a change of state
moves a value instead of starting a series; every counter is there at 0 for each label set it can have.

The pair families (:data:`PAIRS`: GPU pairs, GPU x RDMA NIC pairs, NUMA node pairs) depend on the snapshot
and its unread facts alone, so they are built once per snapshot (:func:`pair_families`), not per view, and
they are published whole or not at all: while their series (:func:`pair_series`) are above the limit
(``topolink serve --metrics-pair-series-limit``, default :data:`PAIR_SERIES_LIMIT`) none is, and
``topolink_metrics_pair_series_withheld`` says how many were left out.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric

from topology import (
    NODE,
    SCHEMA,
    Aspect,
    Fact,
    Knowledge,
    LinkCapability,
    Snapshot,
    SourceStatus,
    ordered_gpus,
    ordered_rdma_nics,
)

from .._core._derive import degraded_flags, gpu_nic_rows, gpu_pair_rows, gpu_rows
from .._core._http_limits import HttpStats
from .._core._view import View
from ._families import BY_NAME, DEGRADED_KINDS, FAMILIES, GPUDIRECT, PAIRS, SOURCE_STATUS, Family

_UP = (SourceStatus.OK, SourceStatus.ABSENT)
RUN_STATUSES = ("ok", "waived", "failed", "busy", "busy_unknown")
LIVE = ("topolink_http_connections_closed",)  # counted by the server as it runs, not kept in the view
# The default most pair series a scrape holds: every pair of a node up to the NIC limit (8 GPUs, 1,024 NICs and
# 4 NUMA nodes: 32,840) or of 96 GPUs with 64 NICs and 32 NUMA nodes (34,720), and a first scrape within 1 s of
# CPU at every snapshot limit (docs/reference.md, "Work and series at the limits"); 128 GPUs with 64 NICs and 32
# NUMA nodes (50,048) are just past it, a 256-GPU node's 200,448 pair series far past it.
PAIR_SERIES_LIMIT = 50_000


def _family(f: Family) -> Metric:
    if f.kind == "info":
        return InfoMetricFamily(f.name, f.help, labels=f.labels)
    if f.kind == "counter":
        return CounterMetricFamily(f.name, f.help, labels=f.labels)
    return GaugeMetricFamily(f.name, f.help, labels=f.labels)


class _Families:
    def __init__(self, names: Iterable[str]) -> None:
        self.by_name = {name: _family(BY_NAME[name]) for name in names}

    def add(self, name: str, labels: Iterable[str], value: float) -> None:
        metric = self.by_name[name]
        values = [str(v) for v in labels]
        if isinstance(metric, InfoMetricFamily):
            metric.add_metric(values, dict(zip(BY_NAME[name].labels, values, strict=True)))
        else:
            metric.add_metric(values, value)  # type: ignore[attr-defined]


def pair_series(snap: Snapshot) -> int:
    """The series the pair families may hold for this snapshot (their bounds: G(G-1)/2 twice, U^2, G x N four
    times), counted without working out a pair."""
    g, n = len(ordered_gpus(snap)), len(ordered_rdma_nics(snap))
    distance = snap.matrix("numa_distance")
    u = 0 if distance is None else len(distance.ids)
    return g * (g - 1) + u * u + 4 * g * n


def families(view: View, pair_limit: int = PAIR_SERIES_LIMIT) -> Iterator[Metric]:
    """Every family the view holds (all but :data:`LIVE`): the pair families first when their series are
    within ``pair_limit`` (the order of the ``/metrics`` body), then the view's own."""
    withheld = pair_series(view.snapshot)
    if withheld <= pair_limit:
        yield from pair_families(view.snapshot, tuple(view.unread))
        withheld = 0
    yield from view_families(view, withheld)


def view_families(view: View, withheld: int) -> Iterator[Metric]:
    """Every family but the pair families and :data:`LIVE`, built from one view; ``withheld``: the pair series
    left out of the scrape."""
    out = _Families(f.name for f in FAMILIES if f.name not in LIVE and f.name not in PAIRS)
    add = out.add
    snap = view.snapshot
    add("topolink_build", [view.version], 1)
    add("topolink_snapshot", [snap.node, view.structure_hash, SCHEMA], 1)
    add("topolink_snapshot_complete", [], 1 if snap.complete else 0)
    if snap.taken_at is not None:  # a saved one may be ahead by the clock skew a reader allows: never published so
        add("topolink_snapshot_timestamp_seconds", [], min(snap.taken_at, time.time()))
    add("topolink_discovery_passes", [], view.discovery_passes)
    add("topolink_discovery_retry_seconds", [], view.discovery_delay_s)
    if view.nvml_error:
        add("topolink_nvml_unavailable", [view.nvml_error], 1)
    for o in snap.sources:
        add("topolink_source_up", [o.name], 1 if o.status in _UP else 0)
        add("topolink_source_status", [o.name], SOURCE_STATUS[o.status.value])
        add("topolink_source_duration_seconds", [o.name], o.duration_seconds)
        add("topolink_source_problems", [o.name], sum(p.source == o.name for p in snap.problems))
    for fact, since in view.stale_since:
        add("topolink_fact_unknown_since_timestamp_seconds", [fact.subject, fact.aspect.value], since)
    _topology(snap, add, view.unread)
    _measurements(view, add)
    p = view.probes
    runs = {(test, status): n for test, status, n in p.runs}
    for test in sorted(set(p.tests) | {t for t, _ in runs}):
        for status in RUN_STATUSES:
            add("topolink_probe_runs", [test, status], runs.get((test, status), 0))
    for test, when in p.last_success:
        add("topolink_probe_last_success_timestamp_seconds", [test], when)
    add("topolink_probe_busy_seconds", [], p.busy_seconds)
    add("topolink_probe_duty_cycle_ratio", [], p.duty_cycle)
    for s in view.sinks:
        for result, n in (("written", s.written), ("unchanged", s.unchanged), ("failed", s.failed)):
            add("topolink_sink_publish", [s.name, result], n)
        for reason, n in s.watch_restarts:
            add("topolink_sink_watch_restarts", [s.name, reason], n)
    for name, n in view.state_errors:
        add("topolink_state_file_errors", [name], n)
    if view.state_writable is not None:
        add("topolink_state_writable", [], 1 if view.state_writable else 0)
    add("topolink_metrics_pair_series_withheld", [], withheld)
    yield from out.by_name.values()


def pair_families(snap: Snapshot, unread: tuple[Fact, ...]) -> list[Metric]:
    """The pair families (:data:`PAIRS`) of a snapshot with these facts unread."""
    out = _Families(f.name for f in FAMILIES if f.name in PAIRS)
    add = out.add
    for a, b, _, nvlinks, level in gpu_pair_rows(snap, unread):
        if nvlinks is not None:
            add("topolink_gpu_pair_nvlinks", [a, b], nvlinks)
        add("topolink_gpu_pair_pcie_path", [a, b], level)
    distance = snap.matrix("numa_distance")
    if distance is not None and Knowledge(unread).knows(NODE, Aspect.NUMA):  # disputed and never read: none
        for i, a in enumerate(distance.ids):
            for j, b in enumerate(distance.ids):
                add("topolink_numa_distance", [a, b], distance.values[i][j])
    for gpu, nic, level, nearest, verdict in gpu_nic_rows(snap):
        add("topolink_gpu_nic_pcie_path", [gpu, nic], level)
        add("topolink_gpu_nic_nearest", [gpu, nic], 1 if nearest else 0)
        add("topolink_gpu_nic_gpudirect_ready", [gpu, nic], 1 if verdict == "ready" else 0)
        add("topolink_gpu_nic_gpudirect_verdict", [gpu, nic], GPUDIRECT[verdict])
    return list(out.by_name.values())


def _topology(snap: Snapshot, add: Callable[[str, Iterable[str], float], None], unread: Iterable[Fact]) -> None:
    rows = gpu_rows(snap, unread)
    all_read = all(r.nvlinks is not None for r in rows)
    for row in rows:
        add("topolink_gpu", [row.gpu, row.index, row.uuid, row.name, row.pcie_root, row.numa_node], 1)
        if all_read:  # an island while some GPU's NVLinks are unread could be wrong: none
            add("topolink_gpu_nvlink_island", [row.gpu], int(row.island) if row.island else -1)
        for state, gen, width in row.pcie:
            if gen is not None:
                add("topolink_gpu_pcie_link_generation", [row.gpu, state], gen)
            if width is not None:
                add("topolink_gpu_pcie_link_width", [row.gpu, state], width)
        if row.nvlinks is not None:  # unknown: no sample, never 0
            add("topolink_gpu_nvlinks", [row.gpu], row.nvlinks)
    for island, size in sorted(Counter(r.island for r in rows if r.island).items()):
        add("topolink_nvlink_island_gpus", [island], size)
    for link in snap.links:
        if link.bytes_per_second:
            add("topolink_link_bandwidth_bytes_per_second", [link.id, link.kind.value], link.bytes_per_second)
    for subject, kind, flag in degraded_flags(snap, DEGRADED_KINDS, unread):
        add("topolink_degraded", [subject, kind], flag)


def _measurements(view: View, add: Callable[[str, Iterable[str], float], None]) -> None:
    for i, m in enumerate(view.snapshot.measurements):
        base = [m.test, m.method, ",".join(m.subjects), m.direction, m.backend or "",
                dict(m.conditions).get("profile", "")]
        if m.unit == "seconds":
            add("topolink_latency_seconds", [*base, m.source.value], m.value)
            continue
        add("topolink_bandwidth_bytes_per_second", [*base, m.source.value], m.value)
        peak = view.theoretical[i] if i < len(view.theoretical) else None
        if peak:
            add("topolink_bandwidth_bytes_per_second", [*base, "theoretical"], peak)
            if LinkCapability.compares(m):  # a quick figure is never compared as if it were full's
                add("topolink_bandwidth_measured_ratio", base, m.value / peak)


def live_families(stats: HttpStats) -> Iterator[Metric]:
    out = _Families(LIVE)
    for reason, n in stats.closed.items():
        out.add("topolink_http_connections_closed", [reason], n)
    yield from out.by_name.values()


class SnapshotCollector:
    """A custom collector: ``current()`` returns the view to export, or None before the first pass; the pair
    families while their series are within ``pair_limit``."""

    def __init__(self, current: Callable[[], View | None], pair_limit: int = PAIR_SERIES_LIMIT) -> None:
        self._current = current
        self._pair_limit = pair_limit

    def describe(self) -> Iterable[Metric]:
        return [_family(f) for f in FAMILIES if f.name not in LIVE]

    def collect(self) -> Iterable[Metric]:
        view = self._current()
        if view is None:
            return []
        return families(view, self._pair_limit)


class HttpCollector:
    """The server's own counters, read as they are at scrape time."""

    def __init__(self, stats: HttpStats) -> None:
        self._stats = stats

    def describe(self) -> Iterable[Metric]:
        return [_family(BY_NAME[name]) for name in LIVE]

    def collect(self) -> Iterable[Metric]:
        return live_families(self._stats)
