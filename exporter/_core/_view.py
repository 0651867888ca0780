"""What the agent serves at one moment: the served snapshot and the agent's own counters, frozen.

The agent builds a new :class:`View` after every discovery pass, probe pass or publish, and swaps one
reference; the collector, the HTTP API and the page only read it. Nothing here reads a clock or a file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from topology import Fact, Snapshot

from ._sink import PublishResult, WatchingSink


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeStats:
    runs: tuple[tuple[str, str, int], ...] = ()  # (test, status, count) since the agent started
    tests: tuple[str, ...] = ()  # the tests the agent may run: their counters start at 0
    last_success: tuple[tuple[str, float], ...] = ()  # (test, unix seconds)
    busy_seconds: float = 0.0  # wall time spent running probes since start
    duty_cycle: float = 0.0  # busy_seconds / wall time since start
    running: bool = False
    last_reasons: tuple[tuple[str, str, str], ...] = ()  # (test, subjects, why) of the last pass's skips/failures


@dataclass(frozen=True, slots=True, kw_only=True)
class SinkStats:
    name: str
    written: int = 0
    unchanged: int = 0
    failed: int = 0
    detail: str = ""
    watch_restarts: tuple[tuple[str, int], ...] = ()  # (reason, times) of a sink that watches what it wrote


def sink_stats(sink: object, old: SinkStats | None = None, result: PublishResult | None = None) -> SinkStats:
    """A sink's totals: ``old`` plus one publish's ``result``, and its watch's restarts as they are now (every
    reason from the start, at 0 until it happens)."""
    name = str(getattr(sink, "name", ""))
    old = old or SinkStats(name=name)
    now = result or PublishResult(detail=old.detail)
    restarts = tuple(sorted(sink.watch_restarts().items())) if isinstance(sink, WatchingSink) else ()
    return SinkStats(name=name, written=old.written + now.written, unchanged=old.unchanged + now.unchanged,
                     failed=old.failed + now.failed, detail=now.detail, watch_restarts=restarts)


@dataclass(frozen=True, slots=True, kw_only=True)
class View:
    """``theoretical[i]`` is what the links allow for ``snapshot.measurements[i]`` (None: not known)."""

    snapshot: Snapshot
    version: str = "0+unknown"
    structure_hash: str = ""
    stale_since: tuple[tuple[Fact, float], ...] = ()  # unknown facts, and since when (unix seconds)
    unread: tuple[Fact, ...] = ()  # unknown facts no pass has read since the start: no value, not even a stale one
    theoretical: tuple[float | None, ...] = ()
    probes: ProbeStats = field(default_factory=ProbeStats)
    sinks: tuple[SinkStats, ...] = ()
    state_errors: tuple[tuple[str, int], ...] = ()  # (state file, corrupt or foreign loads)
    state_writable: bool | None = None  # the state directory took the last write (None: none tried yet)
    degradations: tuple[str, ...] = ()  # why the agent serves with less than it should (/readyz says each)
    discovery_passes: int = 0
    generation: int = 0  # bumps on every new view: the cache key of everything rendered from it
    nvml_error: str = ""  # NVML's error while it does not answer on a node with NVIDIA GPUs: not ready
    discovery_delay_s: float = 0.0  # to the next discovery pass: the interval, or sooner while NVML is retried

    @property
    def not_ready(self) -> str:
        """Why the agent is not ready (empty when it is): what /readyz answers with 503."""
        if not self.nvml_error:
            return ""
        return (f"NVML does not answer ({self.nvml_error}) while NVIDIA GPUs are on the PCI bus: the driver is "
                f"not up; NVLink and GPU identity facts are unknown and nothing derived from them is published; "
                f"discovery tries again in {self.discovery_delay_s:g} s")
