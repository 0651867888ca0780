"""One agent's publishing loop against the real kube-apiserver behind the fault proxy (TLS end to end, the
server's own certificate on the proxy), on a simulated clock: ten minutes of each fault cost about the
steady rate, publishing is right again within one back-off maximum after it, and conflicts converge (a
slice that lost our label is labelled again; one of our name that is someone else's is reported once and
left alone)."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporter.kube._api._retry import MAX_DELAY_S
from tests.apiserver import ApiServer
from tests.apiserver_agent import SLICES, create_node, node_slices
from tests.fault_proxy import FaultProxy
from tests.fault_sim import FAULTS, SimAgent, kubeconfig, publish, request_bound, run_fault, sim_agent
from tests.kmock_support import a100_node

pytestmark = [pytest.mark.apiserver, pytest.mark.slow]
MANAGED = "app.kubernetes.io/managed-by"


@pytest.fixture(scope="module")
def proxy(kube_apiserver: ApiServer) -> Iterator[FaultProxy]:
    pki = kube_apiserver.root / "pki"
    p = FaultProxy(kube_apiserver.url, verify=ssl.create_default_context(cafile=str(kube_apiserver.ca)),
                   certfile=str(pki / "serving.crt"), keyfile=str(pki / "serving.key"))
    try:
        yield p
    finally:
        p.close()


def agent_for(server: ApiServer, proxy: FaultProxy, node: str, tmp: Path) -> SimAgent:
    with server.admin() as http:
        create_node(http, node)
    # the admin token: the agent user is the one the audit-log tests count
    config = kubeconfig(tmp / f"{node}.kubeconfig", proxy.url, server.token, server.ca)
    return sim_agent(a100_node(node), config=config, ca=server.ca)


@pytest.mark.parametrize("fault", FAULTS)
def test_a_fault_costs_the_steady_rate_and_publishing_recovers(kube_apiserver: ApiServer, proxy: FaultProxy,
                                                                 fault: str, tmp_path: Path) -> None:
    node = f"fault-{fault}"
    agent = agent_for(kube_apiserver, proxy, node, tmp_path)
    assert publish(agent) == [True, True]
    sent = run_fault(agent, proxy, fault)
    bound = request_bound(fault)  # about one a pass; 410: two a pass, and a list and a watch a back-off step
    assert sent <= bound, f"{fault}: {sent} requests in 10 simulated minutes: {agent.transport.log[-sent:]}"
    agent.clock.sleep(MAX_DELAY_S)
    assert publish(agent) == [True, True]
    with kube_apiserver.admin() as http:
        assert len(node_slices(http, node)) == 1
        assert http.get(f"/api/v1/nodes/{node}").json()["metadata"]["labels"]["gpu.topology/gpu.count"] == "4"


@pytest.mark.parametrize("fault", FAULTS)
def test_a_slice_wiped_during_a_fault_is_created_again_by_the_first_pass_the_server_answers(
        kube_apiserver: ApiServer, proxy: FaultProxy, fault: str, tmp_path: Path) -> None:
    """Kubelet wipes the node's slices five minutes into ten of a fault, which no watch sees: where lists are
    answered (a 410 on every watch) a pass during the fault has created it again already; where nothing is
    answered, the first pass after the fault does, without the watch (not stepped again here)."""
    node = f"wiped-{fault}"
    agent = agent_for(kube_apiserver, proxy, node, tmp_path)
    assert publish(agent) == [True, True]

    def wipe() -> None:
        with kube_apiserver.admin() as http:
            assert http.delete(SLICES, params={"fieldSelector": f"spec.nodeName={node}"}).status_code == 200
    run_fault(agent, proxy, fault, midway=wipe)
    with kube_apiserver.admin() as http:
        if "410" in fault:
            assert len(node_slices(http, node)) == 1, "not created again during the fault"
        agent.clock.sleep(MAX_DELAY_S)  # the client's next try is due
        assert publish(agent) == [True, True]
        assert len(node_slices(http, node)) == 1


def test_a_slice_that_lost_our_label_is_labelled_again(kube_apiserver: ApiServer, proxy: FaultProxy,
                                                        tmp_path: Path) -> None:
    node = "conflict-label"
    agent = agent_for(kube_apiserver, proxy, node, tmp_path)
    assert publish(agent) == [True, True]
    with kube_apiserver.admin() as http:
        (s,) = node_slices(http, node)
        name = s["metadata"]["name"]
        resp = http.patch(f"{SLICES}/{name}", json={"metadata": {"labels": {MANAGED: None}}},
                          headers={"Content-Type": "application/merge-patch+json"})
        assert resp.status_code == 200, resp.text
        # the watch is not stepped here (its MODIFIED event would wake the agent at once): with no state from
        # it yet the pass lists for itself, and finds the slice by its fields, not by the lost label
        assert publish(agent) == [True, True]
        assert http.get(f"{SLICES}/{name}").json()["metadata"]["labels"][MANAGED] == "topolink"
        before = agent.transport.sent
        assert publish(agent) == [True, True]  # converged: one pass is the steady pass again
        assert agent.transport.sent - before <= 2


def test_a_slice_of_our_name_that_is_someone_elses_is_reported_once(kube_apiserver: ApiServer,
                                                                     proxy: FaultProxy, tmp_path: Path) -> None:
    node = "conflict-foreign"
    agent = agent_for(kube_apiserver, proxy, node, tmp_path)
    name = f"{node}-gpu.topology-0"
    with kube_apiserver.admin() as http:
        resp = http.post(SLICES, json={
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": "other.example.com", "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}}})
        assert resp.status_code == 201, resp.text
        results = [agent.sinks[1].publish(agent.snap) for _ in range(3)]
        assert [r.ok for r in results] == [False, True, True] and "someone else" in results[0].detail
        assert http.get(f"{SLICES}/{name}").json()["spec"]["driver"] == "other.example.com"
        assert http.delete(f"{SLICES}/{name}").status_code == 200  # gone: the server's copy decides, not a memory
        assert agent.sinks[1].publish(agent.snap).written == 1
        assert http.get(f"{SLICES}/{name}").json()["spec"]["driver"] != "other.example.com"
