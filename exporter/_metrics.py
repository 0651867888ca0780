"""The Prometheus collector over the agent's current :class:`View`, and the cached exposition.

``collect`` only reads the view reference and builds families: no NVML, no sysfs, no locks. The view
changes only when the agent swaps it, so the exposition is rendered once per view (text and OpenMetrics)
and every scrape in between gets the same bytes.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from topology import NODE, SCHEMA, Aspect, Fact, Knowledge, Snapshot, SourceStatus

from ._derive import degraded, gpu_nic_rows, gpu_pair_rows, gpu_rows
from ._families import BY_NAME, FAMILIES, Family
from ._view import View

_UP = (SourceStatus.OK, SourceStatus.ABSENT)


def _family(f: Family) -> Metric:
    if f.kind == "info":
        return InfoMetricFamily(f.name, f.help, labels=f.labels)
    if f.kind == "counter":
        return CounterMetricFamily(f.name, f.help, labels=f.labels)
    return GaugeMetricFamily(f.name, f.help, labels=f.labels)


class _Families:
    def __init__(self) -> None:
        self.by_name = {f.name: _family(f) for f in FAMILIES}

    def add(self, name: str, labels: Iterable[str], value: float) -> None:
        metric = self.by_name[name]
        values = [str(v) for v in labels]
        if isinstance(metric, InfoMetricFamily):
            metric.add_metric(values, dict(zip(BY_NAME[name].labels, values, strict=True)))
        else:
            metric.add_metric(values, value)  # type: ignore[attr-defined]


def families(view: View) -> Iterator[Metric]:
    """Every family, built from one view."""
    out = _Families()
    add = out.add
    snap = view.snapshot
    add("topolink_build", [view.version], 1)
    add("topolink_snapshot", [snap.node, view.structure_hash, SCHEMA], 1)
    add("topolink_snapshot_complete", [], 1 if snap.complete else 0)
    if snap.taken_at is not None:
        add("topolink_snapshot_timestamp_seconds", [], snap.taken_at)
    add("topolink_discovery_passes", [], view.discovery_passes)
    add("topolink_discovery_retry_seconds", [], view.discovery_delay_s)
    if view.nvml_error:
        add("topolink_nvml_unavailable", [view.nvml_error], 1)
    for o in snap.sources:
        add("topolink_source_up", [o.name, o.status.value], 1 if o.status in _UP else 0)
        add("topolink_source_duration_seconds", [o.name], o.duration_seconds)
        add("topolink_source_problems", [o.name], sum(p.source == o.name for p in snap.problems))
    for fact, since in view.stale_since:
        add("topolink_fact_unknown_since_timestamp_seconds", [fact.subject, fact.aspect.value], since)
    _topology(snap, add, view.unread)
    _measurements(view, add)
    p = view.probes
    for test, status, count in p.runs:
        add("topolink_probe_runs", [test, status], count)
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
    yield from out.by_name.values()


def _topology(snap: Snapshot, add: Callable[[str, Iterable[str], float], None], unread: Iterable[Fact]) -> None:
    rows = gpu_rows(snap, unread)
    for row in rows:
        add("topolink_gpu", [row.gpu, row.index, row.uuid, row.name, row.pcie_root, row.numa_node, row.island], 1)
        for state, gen, width in row.pcie:
            if gen is not None:
                add("topolink_gpu_pcie_link_generation", [row.gpu, state], gen)
            if width is not None:
                add("topolink_gpu_pcie_link_width", [row.gpu, state], width)
        if row.nvlinks is not None:  # unknown: no sample, never 0
            add("topolink_gpu_nvlinks", [row.gpu], row.nvlinks)
    for a, b, path, nvlinks in gpu_pair_rows(snap, unread):
        add("topolink_gpu_pair_path", [a, b, path], 1)
        if nvlinks is not None:
            add("topolink_gpu_pair_nvlinks", [a, b], nvlinks)
    for island, size in sorted(Counter(r.island for r in rows if r.island).items()):
        add("topolink_nvlink_island_gpus", [island], size)
    distance = snap.matrix("numa_distance")
    if distance is not None and Knowledge(unread).knows(NODE, Aspect.NUMA):  # disputed and never read: none
        for i, a in enumerate(distance.ids):
            for j, b in enumerate(distance.ids):
                add("topolink_numa_distance", [a, b], distance.values[i][j])
    for gpu, nic, path, nearest, verdict in gpu_nic_rows(snap):
        add("topolink_gpu_nic_path", [gpu, nic, path, "true" if nearest else "false"], 1)
        add("topolink_gpu_nic_gpudirect_ready", [gpu, nic, verdict], 1 if verdict == "ready" else 0)
    for link in snap.links:
        if link.bytes_per_second:
            add("topolink_link_bandwidth_bytes_per_second", [link.id, link.kind.value], link.bytes_per_second)
    for subject, kind, reason in degraded(snap, unread):
        add("topolink_degraded", [subject, kind, reason], 1)


def _measurements(view: View, add: Callable[[str, Iterable[str], float], None]) -> None:
    for i, m in enumerate(view.snapshot.measurements):
        base = [m.test, m.method, ",".join(m.subjects), m.direction, m.backend or ""]
        if m.unit == "seconds":
            add("topolink_latency_seconds", [*base, m.source.value], m.value)
            continue
        add("topolink_bandwidth_bytes_per_second", [*base, m.source.value], m.value)
        peak = view.theoretical[i] if i < len(view.theoretical) else None
        if peak:
            add("topolink_bandwidth_bytes_per_second", [*base, "theoretical"], peak)
            add("topolink_bandwidth_measured_ratio", base, m.value / peak)


class SnapshotCollector:
    """A custom collector: ``current()`` returns the view to export, or None before the first pass."""

    def __init__(self, current: Callable[[], View | None]) -> None:
        self._current = current

    def describe(self) -> Iterable[Metric]:
        return [_family(f) for f in FAMILIES]

    def collect(self) -> Iterable[Metric]:
        view = self._current()
        if view is None:
            return []
        return families(view)


@dataclass(frozen=True, slots=True)
class Exposition:
    text: bytes
    openmetrics: bytes


class MetricsCache:
    """The agent's own registry with one collector; renders each view once, on the first scrape of it."""

    def __init__(self, current: Callable[[], View | None]) -> None:
        self._current = current
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(SnapshotCollector(lambda: self._rendering))
        self._rendering: View | None = None
        self._lock = threading.Lock()
        self._cached: tuple[int, Exposition] | None = None

    def exposition(self) -> Exposition:
        view = self._current()
        key = -1 if view is None else view.generation
        cached = self._cached
        if cached is not None and cached[0] == key:
            return cached[1]
        with self._lock:
            if self._cached is not None and self._cached[0] == key:
                return self._cached[1]
            self._rendering = view
            rendered = Exposition(generate_latest(self.registry),
                                  generate_openmetrics(self.registry))  # type: ignore[no-untyped-call]
            self._cached = (key, rendered)
            return rendered
