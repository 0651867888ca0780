"""A failed sync is requeued on its sink's own backoff (client-go's default controller rate limiter: 5 ms doubling
to 1000 s per sink, reset by a success, an overall bucket of 10 a second; Retry-After a floor), never given up and
never waiting for the next discovery pass: the rule on an injected clock, then the agent's sync worker with the
real client and sink against kmock answering a write 500 or 429."""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import threading
import time
from pathlib import Path
from typing import Any

import kmock as kmock_lib
import pytest

from agent.serve import Agent, ServeConfig
from agent.serve._requeue import RateLimiter
from agent.serve._run import discovery_loop
from agent.serve._wake import Wake
from exporter.kube import Backoff, LabelConfig, LightkubeApi, NodeLabelSink
from tests.kmock_support import NODE, NODES, a100_node, start_objects


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_each_failure_in_a_row_doubles_the_sinks_wait_from_5_ms_to_1000_s_and_a_success_resets_it() -> None:
    clock = Clock()
    limiter = RateLimiter(clock=clock)
    waits = []
    for _ in range(25):
        waits.append(limiter.when("node-labels"))
        clock.now += 1.0  # the bucket refills: only the per-sink backoff shows
    assert waits[:4] == [0.005, 0.01, 0.02, 0.04] and waits[-1] == 1000.0
    assert all(b == min(2 * a, 1000.0) for a, b in itertools.pairwise(waits))
    assert limiter.when("resource-slices") == 0.005  # per sink: another's failures do not count
    assert limiter.result("node-labels", ok=True) is None and limiter.failures("node-labels") == 0
    assert limiter.result("node-labels", ok=False) == 0.005  # started over


def test_retry_after_is_a_floor_and_the_overall_bucket_spreads_a_burst() -> None:
    clock = Clock()
    limiter = RateLimiter(clock=clock)
    assert limiter.when("a", floor=30.0) == 30.0  # the server's Retry-After over a 5 ms backoff
    assert limiter.when("a", floor=5000.0) == 1000.0  # never longer than the maximum
    assert limiter.when("a", floor=None) == 0.02
    waits = [limiter.when(f"sink-{i}") for i in range(110)]  # 113 tokens in all at one instant: 100 a burst
    assert max(waits[:97]) == 0.005 and waits[97] > 0.005 and waits[-1] == pytest.approx(1.3)  # then 10 a second


def test_a_requeue_is_due_after_its_wait_and_the_sooner_of_two_wins_and_a_pass_takes_it() -> None:
    wake = Wake(resync_delay_s=3600)
    wake.requeue("node-labels", "sync failed (Unavailable): requeued", 3600)
    wake.requeue("node-labels", "sooner", 0.05)
    assert wake.wait(10) == ("", {"node-labels": "sooner"})
    assert wake.wait(0) == ("interval", {})  # consumed
    wake.requeue("node-labels", "later", 3600)
    wake("SIGHUP")
    assert wake.wait(10) == ("SIGHUP", {})  # the pass syncs every sink: the requeue is folded into it
    assert wake.wait(0) == ("interval", {})


@pytest.mark.asyncio
@pytest.mark.parametrize(("status", "after"), [(500, None), (429, 1)])
async def test_a_failed_write_is_retried_on_its_backoff_before_the_next_discovery_pass(
        kmock: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture, status: int, after: int | None) -> None:
    start_objects(kmock)
    headers = {"Retry-After": str(after)} if after is not None else {}
    kmock["patch", NODES][:1] << status << kmock_lib.headers(headers) << {
        "kind": "Status", "apiVersion": "v1", "code": status, "message": "injected"}
    # the client's own backoff short (it floors the requeue) and one try a call: every try is a sync of the agent's
    api = LightkubeApi.connect(server=str(kmock.url).rstrip("/"),
                               backoff=Backoff(base=0.01, attempts=1, rng=random.Random(1)))
    agent = Agent(ServeConfig(state_dir=tmp_path / "state", probe_interval_s=0, discovery_interval_s=3600),
                  lambda: a100_node(NODE), dict, [NodeLabelSink(api, NODE, LabelConfig())],
                  log=logging.getLogger("test.requeue"))
    wake = Wake()
    agent.requeue = wake.requeue
    caplog.set_level(logging.INFO, logger="test.requeue")
    worker = threading.Thread(target=discovery_loop, args=(agent, wake), daemon=True)
    worker.start()

    def logged(message: str) -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.getMessage() == message]
    try:
        deadline = time.monotonic() + 20
        while not logged("publish recovered") and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert logged("publish recovered"), "the failed sync was not tried again"
        failed, *again = logged("publish failed")
        # the requeue waits for the client's own backoff too: a retry it would refuse unsent is not a sync
        assert again == [], [r.fields["detail"] for r in again]  # type: ignore[attr-defined]
        resync = logged("resync")[0]  # the first sync after it (a slow machine may log a later one too)
        assert len(logged("discovery pass")) == 1  # the start's: the retry was a requeue, not a pass an hour later
        assert "requeued" in resync.fields["why"]  # type: ignore[attr-defined]
        if after is not None:  # Retry-After honoured: no try sooner than the server asked
            assert resync.created - failed.created >= after
    finally:
        agent.stopping.set()
        wake("stop")
        await asyncio.to_thread(worker.join, 10)
        assert not worker.is_alive()
