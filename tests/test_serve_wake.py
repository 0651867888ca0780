"""What wakes the sync worker: SIGHUP asks for a discovery pass at once; a sink's watch asks for a resync of that
sink, delayed a little and coalesced (a burst of events is one resync), never a discovery pass."""

from __future__ import annotations

import threading

from agent.serve._wake import Wake


def test_a_burst_of_watch_events_is_one_delayed_resync_per_sink() -> None:
    wake = Wake(resync_delay_s=0.2)
    for i in range(5):
        wake.resync("resource-slices", f"resourceslice s{i} deleted")
    wake.resync("other", "changed")
    assert wake.wait(10) == ("", {"resource-slices": "resourceslice s0 deleted", "other": "changed"})
    assert wake.wait(0) == ("interval", {})  # consumed: nothing more queued


def test_a_discovery_wake_comes_at_once_and_takes_the_queued_resync_with_it() -> None:
    wake = Wake(resync_delay_s=3600)  # a resync not yet due
    wake.resync("resource-slices", "resourceslice s0 deleted")
    threading.Timer(0.05, wake, args=("SIGHUP",)).start()
    assert wake.wait(10) == ("SIGHUP", {})  # the pass publishes every sink: the resync is folded into it
    assert wake.wait(0) == ("interval", {})


def test_nothing_queued_is_the_interval() -> None:
    assert Wake().wait(0.01) == ("interval", {})
