"""The ``image`` tier: the node agent's image, built as scripts/image.sh builds it, run with podman as a kubelet
runs the pod the DaemonSet controller made (tests/image_pod.py), against the real kube-apiserver with
kube-scheduler and kube-controller-manager beside it, next to the same agent outside any container.

The default overlay is applied to the server; of two Ready nodes (tests/ready_nodes.py: no kubelet), the GPU
node ``image-node`` carries GFD's label the DaemonSet's affinity selects, ``image-outside`` (where the outside
agent publishes) none, and the controller makes no pod for it. The pod the controller made and the scheduler
bound is read back from the server and run, its init containers in order, then the agent, with its own name and
uid and a token bound to it, as the kubelet requests one. No kubelet runs, so nothing else runs it. The prune
Job's pod is still run from the Job's template of the rendered ``overlays/prune`` (the Job itself is not
created), with a token bound to a stand-in Pod.

The node is this machine: its own /sys and /proc, and the test NVML in place of the driver (an 8-GPU H100
profile whose GPUs this machine's PCI tree does not hold, so both agents publish the same partial snapshot).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.apiserver import ApiServer
from tests.apiserver_agent import (
    SLICES,
    Serve,
    agent_token,
    node_slices,
    pod_token,
    start_serve,
    wait_until,
)
from tests.fakenvml import ENV_PROFILE, FakeNode, materialize
from tests.image_pod import (
    IMAGE,
    NVML_IN_CONTAINER,
    PROFILE_IN_CONTAINER,
    Node,
    Pod,
    build,
    podman,
    run_args,
    skip_reason,
)
from tests.ready_nodes import ReadyNodes
from tests.test_apiserver_policy import PATHS, apply
from tests.test_apiserver_rollout import (
    DAEMONSET,
    GPU_NODES,
    add_runtime_class,
    agent_pods,
    node_of,
    overlay,
    remove_agents,
    remove_nodes,
)
from tests.test_daemonset import kustomize

pytestmark = [pytest.mark.image, pytest.mark.apiserver, pytest.mark.slow]
NS = "topolink"
PREFIX = "gpu.topology/"
MAX_MB = 250.0
AGENT, PRUNE = f"topolink-agent-{os.getpid()}", f"topolink-prune-{os.getpid()}"
NODE, OUTSIDE = "image-node", "image-outside"
CONFIG_MAPS = f"/api/v1/namespaces/{NS}/configmaps"


@dataclasses.dataclass
class Running:
    node: Node
    pod: dict[str, Any]  # the DaemonSet controller's Pod, as the API server holds it
    container: str
    port: int
    outside: Serve
    outside_node: str
    built: str


def _only(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (obj,) = [d for d in docs if d["kind"] == kind]
    return obj


def _install(http: httpx.Client, docs: list[dict[str, Any]]) -> None:
    for obj in docs:
        if obj["kind"] in PATHS and obj["kind"] != "CustomResourceDefinition":
            assert apply(http, obj).status_code in (200, 201), obj["kind"]


def _ours(labels: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in labels.items() if k.startswith(PREFIX)}


def _slice_specs(http: httpx.Client, node: str) -> list[dict[str, Any]]:
    specs = []
    for s in node_slices(http, node):
        spec = dict(s["spec"])
        spec.pop("nodeName")
        spec["pool"] = {k: v for k, v in spec["pool"].items() if k != "name"}
        for device in spec.get("devices", []):  # the API server stamps each taint when it stores it
            device["taints"] = [{k: v for k, v in t.items() if k != "timeAdded"} for t in device.get("taints", [])]
        specs.append(spec)
    return specs


def _up(url: str) -> bool:
    try:
        return httpx.get(url + "/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _controllers_pod(http: httpx.Client) -> dict[str, Any]:
    """The DaemonSet controller's pod, once the scheduler bound it to the GPU node."""
    def bound() -> list[dict[str, Any]]:
        return [p for p in agent_pods(http) if p["spec"].get("nodeName") == NODE]

    (pod,) = wait_until(f"the DaemonSet controller's pod bound to {NODE}", bound, timeout=90)
    return pod


def _config_maps(http: httpx.Client, pod: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The namespace's ConfigMaps, as the kubelet reads them for the pod's env and volumes, once those its
    projected volumes name are there (the controller manager publishes the CA bundles into each namespace)."""
    named = {src["configMap"]["name"] for vol in pod["spec"]["volumes"] if "projected" in vol
             for src in vol["projected"]["sources"] if "configMap" in src and not src["configMap"].get("optional")}

    def read() -> dict[str, dict[str, str]]:
        found = {cm["metadata"]["name"]: cm.get("data", {}) for cm in http.get(CONFIG_MAPS).json()["items"]}
        return found if named <= set(found) else {}

    return dict(wait_until(f"the ConfigMaps {sorted(named)}", read, timeout=60))


def _run_pod(server: ApiServer, http: httpx.Client, root: Path, fake: FakeNode) -> tuple[Node, dict[str, Any]]:
    """The controller's pod run as its node's kubelet runs it: init containers in order, each to completion,
    then the agent, detached."""
    pod = _controllers_pod(http)
    node = Node(NODE, root / "node", server.url, server.ca, _config_maps(http, pod), runtime=[
        "-v", f"{fake.nvml_library}:{NVML_IN_CONTAINER}:ro", "-v", f"{fake.nvml_profile}:{PROFILE_IN_CONTAINER}:ro",
        "-e", f"{ENV_PROFILE}={PROFILE_IN_CONTAINER}"])
    meta, spec = pod["metadata"], pod["spec"]
    ident = Pod(meta["name"], meta["uid"], meta["namespace"], pod_token(http, pod))
    for i, init in enumerate(spec.get("initContainers", [])):
        podman("run", "--rm", *run_args(spec, init, node, ident, f"topolink-init-{i}-{os.getpid()}"))
    (agent,) = spec["containers"]
    port = int(agent["ports"][0]["containerPort"])
    with socket.socket() as probe:  # the pod shares the host's network here: its port must be free
        if probe.connect_ex(("127.0.0.1", port)) == 0:
            pytest.fail(f"port {port} of the pod is in use on this machine: stop what listens there")
    podman("run", "-d", *run_args(spec, agent, node, ident, AGENT))
    return node, pod


@pytest.fixture(scope="module")
def running(kube_control_plane: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    built = build(sys.executable)
    root = tmp_path_factory.mktemp("image-node")
    fake = materialize("hgx-h100", root / "nvml")
    # A policy whose parameters are a ConfigMap, once left without a binding (as an uninstall by an earlier test
    # leaves it), resolves no parameters again until the API server restarts (kubernetes/kubernetes#133827; the
    # fix, #141015, is not in v1.36.2): install on a freshly started API server.
    kube_control_plane.restart()
    with kube_control_plane.admin() as http:
        nodes = ReadyNodes(http)
        outside: Serve | None = None
        try:
            add_runtime_class(http)
            nodes.add(NODE, GPU_NODES["ro-gpu-gfd"])  # GFD's nvidia.com/gpu.present, as on a GPU Operator node
            nodes.add(OUTSIDE)
            overlay(kube_control_plane, "apply", "default")
            node, pod = _run_pod(kube_control_plane, http, root, fake)
            # the same agent outside any container, on the same machine: this machine's /sys, the same test NVML
            outside = start_serve(kube_control_plane, dataclasses.replace(fake, root=Path("/")), OUTSIDE,
                                  root / "outside")
            port = int(pod["spec"]["containers"][0]["ports"][0]["containerPort"])
            try:
                wait_until("the agent in the container ready", lambda: _up(f"http://127.0.0.1:{port}"), timeout=90,
                           every=0.5)
            except AssertionError as exc:
                raise AssertionError(f"{exc}: {podman('logs', '--tail', '40', AGENT, check=False).stderr}") from None
            yield Running(node, pod, AGENT, port, outside, OUTSIDE, built)
        finally:
            if outside is not None:
                outside.stop()
            podman("rm", "-f", "-t", "0", AGENT, check=False)
            podman("rmi", "-f", IMAGE, check=False)
            remove_agents(http)
            for name in ("prune", "default"):
                overlay(kube_control_plane, "delete", name)
            remove_nodes(http, nodes, [NODE, OUTSIDE])


def test_the_daemonset_controller_made_the_pod_for_the_gpu_node_alone(kube_control_plane: ApiServer,
                                                                        running: Running) -> None:
    meta = running.pod["metadata"]
    assert [(ref["kind"], ref["name"], ref.get("controller")) for ref in meta["ownerReferences"]] == [
        ("DaemonSet", "topolink", True)]
    with kube_control_plane.admin() as http:
        # the controller has weighed every node once its status counts those it selects
        desired = wait_until("the DaemonSet's status", lambda: http.get(DAEMONSET).json().get("status", {})
                             .get("desiredNumberScheduled"), timeout=60)
        assert desired == 1
        assert [node_of(p) for p in agent_pods(http)] == [NODE]


def test_the_container_is_that_pod_with_a_token_bound_to_it(running: Running) -> None:
    lines = podman("inspect", "--format", "{{range .Config.Env}}{{println .}}{{end}}", running.container).stdout
    env = dict(line.split("=", 1) for line in lines.splitlines() if line)
    meta = running.pod["metadata"]
    assert (env["POD_NAME"], env["POD_UID"], env["NODE_NAME"]) == (meta["name"], meta["uid"], NODE)
    (token,) = (running.node.root / "pods" / meta["uid"]).rglob("token")
    payload = token.read_text().split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["kubernetes.io"]
    assert (claims["pod"], claims["node"]["name"]) == ({"name": meta["name"], "uid": meta["uid"]}, NODE)


def test_the_cpu_image_is_small(running: Running) -> None:
    (mb,) = [float(m) for m in re.findall(rf"image {re.escape(IMAGE)}: ([\d.]+) MB", running.built)]
    assert mb <= MAX_MB, running.built


def test_labels_and_slices_equal_the_agent_outside(kube_control_plane: ApiServer, running: Running) -> None:
    with kube_control_plane.admin() as http:
        def published(node: str) -> Any:
            """Our labels and the slices' specs, the node's own name (the NVLink domain of a lone node) as NODE."""
            found = (_ours(http.get(f"/api/v1/nodes/{node}").json()["metadata"].get("labels", {})),
                     _slice_specs(http, node))
            return json.loads(json.dumps(found).replace(json.dumps(node)[1:-1], "NODE"))
        try:
            inside = wait_until("labels from the container", lambda: published(running.node.name)[0] and
                                published(running.node.name), timeout=60, every=0.5)
        except AssertionError as exc:
            logs = podman("logs", "--tail", "40", running.container, check=False).stderr
            raise AssertionError(f"{exc}: {logs}") from None
        outside = published(running.outside_node)
    assert inside[0] and inside[1]
    # The container's agent runs its probe pass (the DaemonSet's default), the one outside none (--probe-interval 0):
    # its figures may name their profile on the Node, and nothing else of what was measured reaches a label or slice.
    profile = inside[0].pop(f"{PREFIX}probe-profile", None)
    assert profile in (None, "quick"), profile
    assert inside == outside


def test_metrics_and_probes_answer_on_the_containers_port(running: Running) -> None:
    (agent,) = running.pod["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in agent["ports"]}
    paths = {agent[probe]["httpGet"]["path"] for probe in ("startupProbe", "livenessProbe", "readinessProbe")}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert ports[agent[probe]["httpGet"]["port"]] == running.port
    for path in sorted(paths | {"/metrics"}):
        resp = httpx.get(f"http://127.0.0.1:{running.port}{path}", timeout=5)
        assert resp.status_code == 200, (path, resp.text[:500])
    assert "topolink_sink_publish_total" in httpx.get(f"http://127.0.0.1:{running.port}/metrics").text


def _status(pid: str) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}


# What the engine itself puts into every container's root, where it mounts its own files.
ENGINE_FILES = {"/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/run/.containerenv"}


def _changed(container: str) -> list[str]:
    """Paths of the container's root that differ from the image's, but for the mount points the engine made
    (volumes, the pod's /tmp, its own files) and the folders holding them."""
    mounts = podman("inspect", "--format", "{{range .Mounts}}{{.Destination}}\n{{end}}", container).stdout.split()
    made = {"/tmp", *ENGINE_FILES, *mounts, *(m.replace("/var/run/", "/run/", 1) for m in mounts)}  # a link
    made |= {str(p) for m in list(made) for p in Path(m).parents}
    return [line for line in podman("diff", container).stdout.splitlines() if line.split(" ", 1)[1] not in made]


def test_it_runs_as_65532_without_capabilities_and_writes_only_its_volumes(running: Running) -> None:
    pid = podman("inspect", "--format", "{{.State.Pid}}", running.container).stdout.strip()
    status = _status(pid)
    assert status["Uid"].split() == ["65532"] * 4 and status["Gid"].split() == ["65532"] * 4
    for caps in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(status[caps], 16) == 0, (caps, status[caps])
    assert status["NoNewPrivs"] == "1"
    assert _changed(running.container) == []
    state = running.node.root / "var" / "lib" / "topolink"
    assert (state.stat().st_uid, state.stat().st_gid, state.stat().st_mode & 0o777) == (65532, 65532, 0o700)
    # the snapshot is kept only when complete (this machine's is not); the probe pass after start writes its report
    written = wait_until("the agent's first file in its state volume", lambda: list(state.rglob("*")), timeout=180,
                         every=1)
    assert all(p.stat().st_uid == 65532 for p in written), written


def test_stopping_with_the_grace_period_ends_the_agent_cleanly(running: Running) -> None:
    spec = running.pod["spec"]
    (agent,) = spec["containers"]
    grace = int(spec["terminationGracePeriodSeconds"])
    pre_stop = int(agent["lifecycle"]["preStop"]["sleep"]["seconds"])  # the kubelet sleeps it before SIGTERM
    start = time.monotonic()
    podman("stop", "-t", str(grace - pre_stop), running.container, timeout=grace + 30)
    took = time.monotonic() - start
    code = podman("inspect", "--format", "{{.State.ExitCode}}", running.container).stdout.strip()
    assert code == "0", podman("logs", "--tail", "40", running.container).stderr
    assert took < grace - pre_stop, f"SIGTERM to exit took {took:.1f} s"


def test_the_prune_job_run_the_same_way_leaves_nothing(kube_control_plane: ApiServer, running: Running) -> None:
    running.outside.stop()
    podman("stop", "-t", "25", running.container, check=False)
    rendered = kustomize("prune")
    job = _only(rendered, "Job")["spec"]["template"]
    with kube_control_plane.admin() as http:
        _install(http, rendered)
        assert _ours(http.get(f"/api/v1/nodes/{running.node.name}").json()["metadata"]["labels"])
        ident = agent_token(http, running.node.name, account=job["spec"]["serviceAccountName"])
    pod = Pod(ident.pod, ident.pod_uid, NS, ident.token)
    (prune,) = job["spec"]["containers"]
    try:
        out = podman("run", *run_args(job["spec"], prune, running.node, pod, PRUNE), check=False,
                     timeout=float(_only(rendered, "Job")["spec"]["activeDeadlineSeconds"]))
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        assert _changed(PRUNE) == []
    finally:
        podman("rm", "-f", PRUNE, check=False)
    with kube_control_plane.admin() as http:
        for node in (running.node.name, running.outside_node):
            assert _ours(http.get(f"/api/v1/nodes/{node}").json()["metadata"].get("labels", {})) == {}
        assert [s for s in http.get(SLICES).json()["items"] if s["spec"]["driver"] == "gpu.topology"] == []

