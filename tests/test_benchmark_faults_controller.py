"""The smoke run of ``benchmarks/faults.py``'s fleet controller table on the shared API server, small and short:
a fleet of 20 nodes, one controller behind the fault proxy. Four seconds of 500s alone (nothing else changing)
bring no storm: the requests during the fault are at most twice the steady rate (the Lease's GET and apply each
retry period) and, for each watch the fault broke (the proxy drops every stream as the fault starts), the two
tries its backoff allows in four seconds (at once, then no sooner than two seconds). A steady controller's rate
is its Lease's alone, so its informers' re-opened watches (one for each kind it reads) would read as a storm
against 2x steady alone; the agents' fleet table compares with a steady rate that holds their passes' writes.
Four seconds of 500s with its objects deleted and a node moved as they start leave it right again (every object
the fleet wants, none left that it does not) within the agent's recovery bound. The full table (30 s faults,
every kind) is the benchmark's."""

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
        watches = rig.proxy.streams
        assert watches > 0  # the steady state watches what it keeps
        alone = list(run_fault(rig, "500", before=2.0, during=4.0, settle_max=RECOVERY_S, window=4.0, damage=False))
        phases = {p.name: p for p in alone if isinstance(p, Phase)}
        steady_rate = 2 / rig.cfg.times.retry  # the leader's Lease: a GET and an apply each retry period
        during = phases["during"]
        assert during.sent <= 2 * steady_rate * during.seconds + 2 * watches, (phases, watches)
        got = list(run_fault(rig, "500", before=2.0, during=4.0, settle_max=RECOVERY_S, window=4.0))
        recovered = got[-1][1]
        assert recovered is not None and recovered <= RECOVERY_S, (rig.wrong(), rig.said[-10:])
        assert not rig.wrong()
    finally:
        rig.close()
