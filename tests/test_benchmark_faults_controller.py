"""The smoke run of ``benchmarks/faults.py``'s fleet controller table on the shared API server, small and short:
a fleet of 20 nodes, one controller behind the fault proxy, eight seconds of 500s, with its objects deleted and a
node moved as the fault starts. Held to the benchmark's targets: right again (every object the fleet wants, none
left that it does not) within the agent's recovery bound, and no storm: the requests during the fault at most
twice the steady rate, the Lease's GET and apply each retry period (eight seconds, not four: over four, the
Lease's four requests and the failed writes' first backoff retries already make two a second, no storm). The
full table (30 s faults, every kind) is the benchmark's."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from benchmarks._fault_controller import controller_rig, steady
from benchmarks._fault_fleet import Phase, run_fault
from benchmarks.faults import RECOVERY_S
from tests.apiserver import ApiServer

pytestmark = [pytest.mark.apiserver, pytest.mark.slow]


def test_the_controller_is_right_again_after_a_fault_without_a_storm(kube_apiserver: ApiServer,
                                                                    tmp_path: Path) -> None:
    rig = controller_rig(kube_apiserver, 20, tmp_path, f"fc{uuid.uuid4().hex[:6]}", claims=False)
    try:
        rig.start(1)
        steady(rig, 60)
        got = list(run_fault(rig, "500", before=2.0, during=8.0, settle_max=RECOVERY_S, window=4.0))
        phases = {p.name: p for p in got if isinstance(p, Phase)}
        recovered = got[-1][1]
        assert recovered is not None and recovered <= RECOVERY_S, (rig.wrong(), rig.said[-10:])
        steady_rate = 2 / rig.cfg.times.retry  # the leader's Lease: a GET and an apply each retry period
        assert phases["during"].rate <= 2 * steady_rate, phases
        assert not rig.wrong()
    finally:
        rig.close()
