"""``topolink serve`` publishing an 8-GPU H100 node (the hgx-h100 profile through the test NVML) to a real
kube-apiserver and etcd: what an emulator cannot show. Writes are counted from the server's audit log, which
records every request with its user (the agent has a token of its own) and User-Agent.

The agent runs with a 600 s discovery interval, so anything that happens within seconds was the watch's
doing, not the interval's. Times printed here are measured on this machine (``-s`` shows them).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.apiserver import ApiServer, by, calls, writes
from tests.apiserver_agent import (
    SLICES,
    TOPOLINK,
    Serve,
    collect_garbage,
    create_node,
    json_lines,
    metric,
    node_slices,
    start_serve,
    wait_until,
)
from tests.fakenvml import FakeNode, materialize

pytestmark = [pytest.mark.apiserver, pytest.mark.slow]
FOREIGN = {"example.com/keep": "yes"}


@pytest.fixture(scope="module")
def machine(tmp_path_factory: pytest.TempPathFactory) -> FakeNode:
    return materialize("hgx-h100", tmp_path_factory.mktemp("hgx-h100"))


def node_name(request: pytest.FixtureRequest) -> str:
    return re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:50].strip("-")


@pytest.fixture
def agent(kube_apiserver: ApiServer, machine: FakeNode, tmp_path: Path,
          request: pytest.FixtureRequest) -> Iterator[tuple[str, Serve]]:
    node = node_name(request)
    with kube_apiserver.admin() as http:
        create_node(http, node, FOREIGN)
    served = start_serve(kube_apiserver, machine, node, tmp_path)
    try:
        yield node, served
    finally:
        served.stop()


def when(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["stageTimestamp"].replace("Z", "+00:00")).timestamp()


def test_labels_and_one_slice_then_no_writes(kube_apiserver: ApiServer, agent: tuple[str, Serve]) -> None:
    node, served = agent
    with kube_apiserver.admin() as http:
        meta = http.get(f"/api/v1/nodes/{node}").json()["metadata"]
        (pool,) = node_slices(http, node)
    ours = {k for k in meta["labels"] if k.startswith("gpu.topology/")}
    assert {"gpu.topology/gpu.count", "gpu.topology/interconnect"} <= ours
    assert meta["labels"]["gpu.topology/gpu.count"] == "8" and meta["labels"].items() >= FOREIGN.items()
    (applied,) = [m for m in meta["managedFields"] if m["manager"] == "topolink"]
    assert applied["operation"] == "Apply"
    assert {k.removeprefix("f:") for k in applied["fieldsV1"]["f:metadata"]["f:labels"]} == ours
    spec = pool["spec"]
    assert spec["driver"] == "gpu.topology" and spec["nodeName"] == node and len(spec["devices"]) == 16
    assert pool["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": node,
                                                    "uid": meta["uid"], "controller": True}]
    assert all(d["taints"][0]["key"] == "gpu.topology/topology-only" for d in spec["devices"])

    mark = kube_apiserver.audit_mark()
    for _ in range(3):
        served.pass_now()
    steady = by(kube_apiserver.audit(mark))
    assert writes(steady) == [], calls(writes(steady))
    # a pass reads the Node for its labels and nothing else: the slices come from the watch's cache
    assert sorted({c for c in calls(steady)}) == [("get", "nodes")], calls(steady)

    events = by(kube_apiserver.audit())
    assert {e["userAgent"] for e in events} == {"topolink/0.1.0"}
    for e in events:
        if (e.get("objectRef") or {}).get("resource") == "resourceslices" and e["verb"] in ("list", "watch"):
            assert f"spec.nodeName%3D{node}" in e["requestURI"] and "spec.driver%3Dgpu.topology" in e["requestURI"]
            assert e["verb"] == "list" or "allowWatchBookmarks=true" in e["requestURI"]
    assert json_lines(served.lines())  # --log-format json: every line is JSON
    text = served.metrics()
    for reason in ("closed", "expired", "error"):
        assert metric(text, "topolink_sink_watch_restarts_total", sink="resource-slices", reason=reason) == 0


def test_a_restarted_agent_writes_nothing(kube_apiserver: ApiServer, agent: tuple[str, Serve], machine: FakeNode,
                                          tmp_path: Path) -> None:
    node, served = agent
    assert served.stop() == 0
    mark = kube_apiserver.audit_mark()
    again = start_serve(kube_apiserver, machine, node, tmp_path / "again")
    try:
        again.pass_now()
    finally:
        again.stop()
    assert writes(kube_apiserver.audit(mark)) == []


def recreated(kube_apiserver: ApiServer, node: str, mark: int, gone: str) -> float:
    """Seconds from the deletion of slice ``gone`` to the agent's create of its successor (server times)."""
    with kube_apiserver.admin() as http:
        wait_until("the slice created again", lambda: [s for s in node_slices(http, node)
                                                        if s["metadata"]["uid"] != gone])
    events = kube_apiserver.audit(mark)
    deleted = [e for e in events if e["verb"] in ("delete", "deletecollection") and e["user"]["username"] == "admin"
               and (e.get("objectRef") or {}).get("resource") == "resourceslices"]
    created = [e for e in writes(events) if e["verb"] == "create"]
    assert len(deleted) == 1 and len(created) == 1, calls(events)
    return when(created[0]) - when(deleted[0])


@pytest.mark.parametrize("how", ["by-name", "collection"])
def test_deleted_slices_come_back_within_a_second(kube_apiserver: ApiServer, agent: tuple[str, Serve],
                                                  how: str) -> None:
    """By name, as ``kubectl delete`` does, or as kubelet does at its start: a delete-collection of every slice
    on its node (``fieldSelector=spec.nodeName``)."""
    node, _ = agent
    with kube_apiserver.admin() as http:
        (pool,) = node_slices(http, node)
        mark = kube_apiserver.audit_mark()
        if how == "by-name":
            assert http.delete(f"{SLICES}/{pool['metadata']['name']}").status_code == 200
        else:
            assert http.delete(SLICES, params={"fieldSelector": f"spec.nodeName={node}"}).status_code == 200
    took = recreated(kube_apiserver, node, mark, pool["metadata"]["uid"])
    print(f"\nslice deleted ({how}) -> created again: {took * 1000:.0f} ms (measured, server timestamps)")
    assert took < 2.0


def test_a_node_deleted_and_created_again_gets_slices_it_owns(kube_apiserver: ApiServer,
                                                              agent: tuple[str, Serve]) -> None:
    """There is no garbage collector here (no controller-manager): :func:`collect_garbage` does its one rule,
    deleting slices whose owner uid no longer exists, every 50 ms for 4 s after the Node comes back with a new
    uid. An agent that kept the old uid would create a slice the collector deletes, again and again; this one
    reads the uid again when it sees its slice deleted, so it creates exactly one."""
    node, served = agent
    with kube_apiserver.admin() as http:
        old = http.get(f"/api/v1/nodes/{node}").json()["metadata"]["uid"]
        assert http.delete(f"/api/v1/nodes/{node}").status_code == 200
        new = create_node(http, node, FOREIGN)["metadata"]["uid"]
        assert new != old
        mark = kube_apiserver.audit_mark()
        collected = 0
        for _ in range(80):
            collected += collect_garbage(http)
            time.sleep(0.05)
        pools = node_slices(http, node)
        labels = http.get(f"/api/v1/nodes/{node}").json()["metadata"]["labels"]
    creates = [e for e in writes(kube_apiserver.audit(mark)) if e["verb"] == "create"]
    assert (collected, len(creates)) == (1, 1), f"{collected} collected, {len(creates)} created"
    assert [o["uid"] for p in pools for o in p["metadata"]["ownerReferences"]] == [new]
    assert labels["gpu.topology/gpu.count"] == "8"  # the pass that re-created the slice labelled the new Node
    assert served.proc.poll() is None


def test_a_watch_broken_by_the_server_comes_back(kube_apiserver: ApiServer, agent: tuple[str, Serve]) -> None:
    """The API server restarts: the watch's connection breaks (restart reason ``error``); resumed from its
    resourceVersion, it meets a server whose watch cache starts later (writes to other objects moved it on), which
    answers with an ERROR event inside the stream, 410 Gone (reason ``expired``): the agent lists again, and a
    slice deleted afterwards is back as fast as before."""
    node, served = agent
    with kube_apiserver.admin() as http:
        for i in range(5):
            http.post("/api/v1/namespaces/default/configmaps",
                      json={"metadata": {"name": f"{node}-{i}"[:63]}, "data": {"x": "y"}})
    kube_apiserver.restart()

    def counts() -> dict[str, float | None]:
        text = served.metrics()
        return {r: metric(text, "topolink_sink_watch_restarts_total", sink="resource-slices", reason=r)
                for r in ("error", "expired")}

    with kube_apiserver.admin() as http:
        (pool,) = node_slices(http, node)
        # the broken watch reopens after a jittered wait of 30 to 60 s (ERROR_WINDOW_S), meets the 410, and gets the
        # state again at once (the first 410 since the backoff reset)
        wait_until("the watch open again", lambda: (served.pass_now(), (counts()["expired"] or 0) >= 1)[1], 90, 0.5)
        mark = kube_apiserver.audit_mark()
        assert http.delete(f"{SLICES}/{pool['metadata']['name']}").status_code == 200
    took = recreated(kube_apiserver, node, mark, pool["metadata"]["uid"])
    print(f"\nafter an API server restart, slice deleted -> created again: {took * 1000:.0f} ms (measured)")
    assert took < 2.0
    assert (counts()["error"] or 0) >= 1
    assert json_lines(served.lines())  # the watch's own lines are JSON too


def test_prune_on_a_server_without_device_taint_rules(kube_apiserver: ApiServer, agent: tuple[str, Serve]) -> None:
    """DeviceTaintRules need a feature gate that 1.36 leaves off: prune removes the rest, says the kind is not
    served, and exits 0 (a Job that waits for it completes)."""
    node, served = agent
    assert served.stop() == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOPOLINK_", "KUBECONFIG"))}
    proc = subprocess.run([str(TOPOLINK), "prune", "--node-name", node, "--kubeconfig",
                           str(kube_apiserver.kubeconfig(kube_apiserver.agent_token))],
                          capture_output=True, text=True, timeout=120, env=env, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "DeviceTaintRules: not served by this API server, nothing to prune" in proc.stdout
    assert re.search(r"labels cleared on 1 node\(s\), 0 NodeFeature\(s\), 1 ResourceSlice\(s\)", proc.stdout)
    with kube_apiserver.admin() as http:
        labels = http.get(f"/api/v1/nodes/{node}").json()["metadata"]["labels"]
        assert node_slices(http, node) == []
    assert not [k for k in labels if k.startswith("gpu.topology/")] and labels.items() >= FOREIGN.items()
