"""``topolink serve``: the node agent. Discovery on an interval and on SIGHUP, probes on their own
schedule (idle GPUs only, duty-cycle bound), state kept across restarts, every sink fed the served snapshot.

Threads: the main one waits for signals; one runs discovery, one probes, one serves HTTP (uvicorn). They
share one :class:`Agent`, which swaps an immutable :class:`exporter.View` under a lock; readers never lock.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import probes
from exporter import ProbeStats, PublishResult, Sink, View, WatchingSink, sink_stats
from topology import Fact, LinkCapability, Measurement, Snapshot, carry_forward, structure_hash, with_measurements

from ._config import ServeConfig
from ._log import Failures, event
from ._probe import BUSY, BUSY_UNKNOWN, Busy, Item, run_pass
from ._requeue import RateLimiter
from ._retry import nvml_waiting, retry_delay
from ._state import REPORT_FILE, SNAPSHOT_FILE, Loaded, StateDir, stale_since


class Agent:
    def __init__(self, config: ServeConfig, discover: Callable[[], Snapshot], busy: Busy, sinks: Sequence[Sink],
                 *, log: logging.Logger, clock: Callable[[], float] = time.time) -> None:
        self.config, self._discover, self._busy, self._sinks, self.log = config, discover, busy, sinks, log
        self._clock = clock
        self._lock = threading.Lock()
        self._state = StateDir(config.state_dir)
        self.started = clock()
        self.view: View | None = None
        self._served: Snapshot | None = None
        self._stale: dict[Fact, float] = {}
        self._unread: frozenset[Fact] = frozenset()  # unknown in every pass since the start: never had a value
        self._measurements: tuple[Measurement, ...] = ()
        self._passes = 0
        self._generation = 0
        self._state_errors: Counter[str] = Counter({SNAPSHOT_FILE: 0, REPORT_FILE: 0})  # present from the start
        self._state_error: str | None = None  # why the state directory refused the last write
        self._state_tried = False
        self._known_tests: tuple[str, ...] = ()
        self.on_view: Callable[[], None] = lambda: None  # called with each new view (the metrics cache renders it)
        self._saved_key: tuple[object, ...] | None = None
        self._sink_totals = {s.name: sink_stats(s) for s in sinks}
        self._runs: Counter[tuple[str, str]] = Counter()
        self._failures = Failures(log)  # publish failures: one line until the sink publishes again
        self._limiter = RateLimiter()  # a failed sync's backoff, per sink; the sync queued again by ``requeue``
        self.requeue: Callable[[str, str, float], None] = lambda _sink, _why, _after_s: None  # ``Wake.requeue``
        self._busy_s = 0.0
        self._reasons: tuple[tuple[str, str, str], ...] = ()
        self._probe_running = False
        self._probe_requests: dict[str, dict[str, Any]] = {}
        self._nvml_error: str | None = None  # NVML's error while it does not answer on a node with GPUs
        self._nvml_failures = 0  # passes in a row that found it so
        self.probe_wake = threading.Event()
        self.stopping = threading.Event()
        self._state_result(self._state.writable())  # known from the first view on

    # -- discovery -----------------------------------------------------------------------------------
    def discover_once(self, why: str) -> None:
        t0 = time.monotonic()
        try:
            current = self._discover()
        except Exception as exc:  # a discovery bug must not stop the agent serving what it knows
            event(self.log, "discovery failed", logging.ERROR, why=why, error=f"{type(exc).__name__}: {exc}")
            return
        now = self._clock()
        waiting = nvml_waiting(current)
        with self._lock:
            if self._served is None:
                self._restore(current)
                self._unread = frozenset() if self._served is not None else current.unknown
            self._unread &= current.unknown  # read once: from then on it has a value, stale or fresh
            served = with_measurements(carry_forward(self._served, current), self._measurements)
            self._served = served
            self._stale = stale_since(self._stale, current.unknown, now)
            self._passes += 1
            answered = self._nvml_failures if waiting is None else 0
            self._nvml_error, self._nvml_failures = waiting, 0 if waiting is None else self._nvml_failures + 1
            self._rebuild()
        event(self.log, "discovery pass", why=why, complete=current.complete, unknown=len(current.unknown),
              gpus=len(served.gpus), seconds=round(time.monotonic() - t0, 3))
        if waiting is not None:
            event(self.log, "waiting for NVML", logging.WARNING, error=waiting, tries=self._nvml_failures,
                  next_try_s=self.next_discovery_in())
        elif answered:
            event(self.log, "NVML answered", after_tries=answered)
        if current.complete:
            self._save_snapshot(served)
        else:
            self._state_result(self._state.writable())
        self._publish(served)

    def next_discovery_in(self) -> float:
        """Seconds to the next pass: the interval, sooner while NVML does not answer (``retry_delay``)."""
        return retry_delay(self._nvml_failures, self.config.discovery_interval_s)

    def _restore(self, first: Snapshot) -> None:
        loaded: Loaded = self._state.load(structure_hash(first))
        for name, why in loaded.errors:
            self._state_errors[name] += 1
            event(self.log, "state file ignored", logging.WARNING, file=name, reason=why)
        for note in loaded.notes:
            event(self.log, "state file not used", note=note)
        if loaded.snapshot is not None:
            self._served = loaded.snapshot
            self._measurements = loaded.snapshot.measurements
        if loaded.measurements:
            self._measurements = with_measurements(Snapshot(node=""), self._measurements + loaded.measurements
                                                   ).measurements
        if loaded.snapshot is not None or loaded.measurements:
            event(self.log, "state loaded", directory=str(self._state.root), measurements=len(self._measurements))

    def _save_snapshot(self, served: Snapshot) -> None:
        key = (structure_hash(served), served.measurements)
        if key == self._saved_key:
            self._state_result(self._state.writable())  # nothing new to keep: still check it would be kept
            return
        try:
            self._state.save_snapshot(served)
            self._saved_key = key
            self._state_result(None)
        except OSError as exc:
            self._state_result(f"{SNAPSHOT_FILE}: {exc}")

    def _state_result(self, error: str | None) -> None:
        """Logs and shows a change in whether the state directory takes writes (not every failed pass)."""
        if self._state_tried and (error is None) == (self._state_error is None):
            return  # no change (another file may fail in other words): no new line, no new view
        if error is not None:
            event(self.log, "state not written", logging.WARNING, directory=str(self._state.root), error=error)
        elif self._state_error is not None:
            event(self.log, "state written again", directory=str(self._state.root))
        with self._lock:
            self._state_tried, self._state_error = True, error
            self._rebuild()

    def resync(self, whys: dict[str, str]) -> None:
        """A sync from the served snapshot, no discovery: of every sink when a watch saw a change (a Node deleted and
        created again lost its labels too, and only the slice watch sees it), of the failed sinks alone on a requeue."""
        with self._lock:
            served = self._served
        if served is not None and whys:
            event(self.log, "resync", sinks=",".join(sorted(whys)), why="; ".join(whys[n] for n in sorted(whys)))
            self._publish(served, frozenset(whys) if all(map(self._limiter.failures, whys)) else None)

    def _publish(self, served: Snapshot, only: frozenset[str] | None = None) -> None:
        sinks = [s for s in self._sinks if only is None or s.name in only]
        for sink in sinks:
            try:
                result = sink.publish(served)
            except Exception as exc:  # a sink must report, not raise; one that does is counted as failed
                result = PublishResult(failed=1, detail=f"{type(exc).__name__}: {exc}")
            self._sink_totals[sink.name] = sink_stats(sink, self._sink_totals[sink.name], result)
            self._failures.result(sink.name, result.ok, result.detail)
            # a failed sync is tried again on its sink's backoff, not at the next discovery pass; never given up
            if (after_s := self._limiter.result(sink.name, result.ok, result.retry_after)) is not None:
                self.requeue(sink.name, f"sync failed ({result.detail.split(':', 1)[0]}): requeued", after_s)
        if sinks:
            with self._lock:
                self._rebuild()

    def _rebuild(self) -> None:
        """A new view from the current state; the caller holds the lock."""
        served = self._served
        if served is None:
            return
        self._generation += 1
        now = self._clock()
        elapsed = max(now - self.started, 1e-9)
        last: dict[str, float] = {}
        for m in served.measurements:
            if m.taken_at is not None and m.source.value == "measured":  # never a time still to come
                last[m.test] = max(last.get(m.test, 0.0), min(m.taken_at, now))
        if not self._known_tests:
            self._known_tests = tuple(self.config.probe_tests or (
                s.name for s in probes.specs_for(probes.choose_backend(self.config.probe_backend, served))))
        stats = ProbeStats(runs=tuple((t, s, n) for (t, s), n in sorted(self._runs.items())),
                           tests=self._known_tests,
                           last_success=tuple(sorted(last.items())), busy_seconds=self._busy_s,
                           duty_cycle=self._busy_s / elapsed, running=self._probe_running,
                           last_reasons=self._reasons)
        self.view = View(snapshot=served, version=self.config.version, structure_hash=structure_hash(served),
                         stale_since=tuple(self._stale.items()), unread=tuple(sorted(self._unread)),
                         theoretical=tuple(map(LinkCapability(served).of, served.measurements)), probes=stats,
                         sinks=tuple(self._sink_totals.values()),
                         state_errors=tuple(sorted(self._state_errors.items())),
                         state_writable=None if not self._state_tried else self._state_error is None,
                         degradations=self._degradations(),
                         discovery_passes=self._passes, generation=self._generation,
                         nvml_error=self._nvml_error or "", discovery_delay_s=self.next_discovery_in())
        self.on_view()

    def _degradations(self) -> tuple[str, ...]:
        watches = tuple(f"{s.name}: {w}" for s in self._sinks if isinstance(s, WatchingSink) and (w := s.watch_error()))
        return watches if self._state_error is None else (f"state directory {self._state.root} not writable ("
            f"{self._state_error}): probe results and the last snapshot are lost at the next restart", *watches)

    # -- probes --------------------------------------------------------------------------------------
    def probe_start(self) -> str | None:
        with self._lock:
            if self._probe_running or any(r["status"] == "queued" for r in self._probe_requests.values()):
                return None
            run_id = uuid.uuid4().hex[:12]
            self._probe_requests[run_id] = {"id": run_id, "status": "queued", "requested": self._clock()}
        self.probe_wake.set()
        return run_id

    def probe_status(self, run_id: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._probe_requests.get(run_id)
            return dict(found) if found is not None else None

    def probe_once(self, why: str) -> bool:
        """One pass over the served snapshot; False when there was nothing to probe yet."""
        with self._lock:
            snap = self._served
            if snap is None:
                return False
            self._probe_running = True
            queued = [r for r in self._probe_requests.values() if r["status"] == "queued"]
            for r in queued:
                r.update(status="running", started=self._clock())
            self._rebuild()
        event(self.log, "probe pass started", why=why, profile=self.config.probe_profile)
        t0 = time.monotonic()
        skipped: list[tuple[str, str, str]] = []
        report = self._run_probes(snap, lambda item: self._on_item(item, skipped))
        elapsed = time.monotonic() - t0
        served = self._probes_done(report, queued, tuple(skipped), elapsed)
        ran = sum(o.status is probes.Status.OK for o in report.outcomes) if report else 0
        event(self.log, "probe pass ended", why=why, seconds=round(elapsed, 3), ran=ran, not_run=len(skipped))
        if report is not None and report.ran and served is not None and not self.stopping.is_set():
            self._keep(report, snap, served)
        return True

    def _run_probes(self, snap: Snapshot, on_item: Callable[[Item], None]) -> probes.ProbeReport | None:
        try:
            return run_pass(snap, profile=self.config.probe_profile, backend=self.config.probe_backend,
                            collective_timing=self.config.probe_collective_timing,
                            tests=self.config.probe_tests, busy=self._busy, stop=self.stopping,
                            item_timeout_s=self.config.probe_item_timeout_s, on_item=on_item)
        except Exception as exc:  # a planning error (unknown test) or a runner bug: report, keep serving
            event(self.log, "probe pass failed", logging.ERROR, error=f"{type(exc).__name__}: {exc}")
            return None

    def _on_item(self, item: Item, skipped: list[tuple[str, str, str]]) -> None:
        """Counts each item's end, keeps why it did not run, and logs a busy GPU or a failure."""
        if self.stopping.is_set() and item.status == "failed":  # its child was killed by our shutdown
            event(self.log, "probe stopped", test=item.test, subjects=",".join(item.subjects),
                  reason="the agent is stopping")
            return
        with self._lock:
            self._runs[item.test, item.status] += 1
        if item.status != "ok":
            skipped.append((item.test, ",".join(item.subjects), item.reason))
        if item.status in (BUSY, BUSY_UNKNOWN, "failed"):
            level = logging.INFO if item.status == BUSY else logging.WARNING
            event(self.log, f"probe {item.status.replace('_', ' ')}", level,
                  test=item.test, subjects=",".join(item.subjects), reason=item.reason)

    def _probes_done(self, report: probes.ProbeReport | None, queued: list[dict[str, Any]],
                     skipped: tuple[tuple[str, str, str], ...], elapsed: float) -> Snapshot | None:
        """The pass's measurements into the served snapshot, its requests done; the snapshot now served."""
        with self._lock:
            self._busy_s += elapsed
            self._probe_running = False
            self._reasons = skipped
            if report is not None and report.measurements:
                self._measurements = with_measurements(Snapshot(node=""), self._measurements + report.measurements
                                                       ).measurements
                if self._served is not None:
                    self._served = with_measurements(self._served, report.measurements)
            for r in queued:
                r.update(status="done", ended=self._clock(), ran=bool(report and report.ran))
            self._rebuild()
            return self._served

    def _keep(self, report: probes.ProbeReport, snap: Snapshot, served: Snapshot) -> None:
        """The report and the snapshot with its measurements into the state directory, and to every sink."""
        try:
            self._state.save_report(probes.report_json(report, snap) + "\n")
        except OSError as exc:
            self._state_result(f"{REPORT_FILE}: {exc}")
        if served.complete:
            self._save_snapshot(served)
        self._publish(served)

    def gpus_idle(self) -> bool:
        with self._lock:
            gpus = {g.id: g.index for g in self._served.gpus} if self._served else {}
        answer = self._busy()
        return not any(probes.busy_of(answer, g, index) for g, index in gpus.items())
