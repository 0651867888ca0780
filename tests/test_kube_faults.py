"""The client's retry policy under ten simulated minutes of each fault, one agent against kmock behind the
fault proxy: the requests it sends a failing server stay at the steady rate (one a pass, averaged); a server
that answers lists but 410s every watch gets two a pass (each pass lists: no watch keeps the store) and the
watch's back-off steps; and it publishes again once the fault ends. The real server behind the same proxy is in
``tests/test_apiserver_faults.py``; the counts are printed by ``benchmarks/faults.py``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from exporter.kube._api._retry import MAX_DELAY_S
from tests.fault_proxy import FaultProxy
from tests.fault_sim import FAULTS, publish, request_bound, run_fault, sim_agent
from tests.kmock_support import a100_node, start_objects

pytestmark = pytest.mark.asyncio


@pytest.fixture
def proxy(kmock: Any) -> Iterator[FaultProxy]:
    start_objects(kmock)
    p = FaultProxy(str(kmock.url).rstrip("/"))
    try:
        yield p
    finally:
        p.close()


@pytest.mark.parametrize("fault", FAULTS)
async def test_ten_minutes_of_a_fault_stay_within_their_request_bound(proxy: FaultProxy, fault: str) -> None:
    agent = sim_agent(a100_node(), server=proxy.url)
    assert await asyncio.to_thread(publish, agent) == [True, True]
    sent = await asyncio.to_thread(run_fault, agent, proxy, fault)
    bound = request_bound(fault)  # about one a pass; 410: two a pass, and a list and a watch a back-off step
    assert sent <= bound, f"{fault}: {sent} requests in 10 simulated minutes: {agent.transport.log[-sent:]}"
    agent.clock.sleep(MAX_DELAY_S)  # the fault is over: within one back-off maximum the agent publishes again
    assert await asyncio.to_thread(publish, agent) == [True, True]
