"""Time is checked: a state file, a probe report or a measurement dated after this machine's clock (beyond
the clock skew) is refused with its name and time, and no metric publishes a time still to come."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import topology as t
from agent.serve._state import REPORT_FILE, SNAPSHOT_FILE, StateDir
from topology.model._clock import MAX_CLOCK_SKEW_S

OK = t.SourceOutcome(name="numa", status=t.SourceStatus.OK, duration_seconds=0.1)
NUMA = t.NumaNode(id="numa0", os_index=0, cpus=(0, 1))


def snap(taken_at: float | None, measured_at: float | None = None) -> t.Snapshot:
    copies = () if measured_at is None else (t.Measurement(
        test="host_memcpy", subjects=("numa0",), direction="a->b", value=5e9, unit="bytes_per_second",
        source=t.Source.MEASURED, method="memcpy", size_bytes=1 << 20, taken_at=measured_at),)
    return t.Snapshot(node="n", numa_nodes=(NUMA,), sources=(OK,), taken_at=taken_at, measurements=copies)


@pytest.mark.parametrize("ahead", [MAX_CLOCK_SKEW_S + 1, 3600.0, 100 * 365.25 * 86400])
def test_state_files_dated_ahead_are_ignored_with_their_name_and_time(tmp_path: Path, ahead: float) -> None:
    future = time.time() + ahead
    state = StateDir(tmp_path)
    state.save_snapshot(snap(future))
    report = {"schema": "topolink.probe/v2", "snapshot": t.to_dict(snap(time.time(), future))}
    state.save_report(json.dumps(report))
    loaded = state.load(t.structure_hash(snap(None)))
    assert loaded.snapshot is None and loaded.measurements == ()
    why = dict(loaded.errors)
    assert "snapshot.taken_at: " in why[SNAPSHOT_FILE] and "is in the future" in why[SNAPSHOT_FILE]
    assert "snapshot.measurements[0].taken_at: " in why[REPORT_FILE] and "in the future" in why[REPORT_FILE]
    assert time.strftime("%Y", time.gmtime(future)) in why[REPORT_FILE]


def test_state_files_within_the_skew_are_loaded(tmp_path: Path) -> None:
    soon = time.time() + MAX_CLOCK_SKEW_S / 2
    state = StateDir(tmp_path)
    state.save_snapshot(snap(soon))
    state.save_report(json.dumps({"schema": "topolink.probe/v2", "snapshot": t.to_dict(snap(soon, soon))}))
    loaded = state.load(t.structure_hash(snap(None)))
    assert loaded.errors == () and loaded.snapshot is not None and len(loaded.measurements) == 1


def test_the_last_success_metric_is_never_ahead_of_the_clock() -> None:
    import logging

    from agent.serve import Agent, ServeConfig

    now = 1_800_000_000.0
    agent = Agent(ServeConfig(), lambda: snap(now), lambda: {}, (), log=logging.getLogger("test"), clock=lambda: now)
    agent._served = snap(now, now + MAX_CLOCK_SKEW_S / 2)  # believed, as within the skew, yet not published ahead
    agent._rebuild()
    assert agent.view.probes.last_success == (("host_memcpy", now),)


def test_the_snapshot_timestamp_metric_is_never_ahead_of_the_clock() -> None:
    from exporter import View, families

    ahead = snap(time.time() + MAX_CLOCK_SKEW_S / 2)  # a state file within the skew: read, yet not published ahead
    stamp = next(f for f in families(View(snapshot=ahead, structure_hash=t.structure_hash(ahead)))
                 if f.name == "topolink_snapshot_timestamp_seconds")
    assert stamp.samples[0].value <= time.time()
