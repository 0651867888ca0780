"""The image tier's kubelet (tests/image_pod.py) without podman: what it makes of the rendered pod templates and of
a pod as the server holds it, and that it refuses a field it does not apply rather than run the pod without it."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import pytest

from tests.image_pod import IMAGE, SA_DIR, Node, Pod, run_args
from tests.test_daemonset import kustomize


@functools.cache
def _rendered(overlay: str) -> list[dict[str, Any]]:
    return kustomize(overlay)


def _template(overlay: str, kind: str) -> dict[str, Any]:
    (obj,) = [d for d in _rendered(overlay) if d["kind"] == kind]
    return copy.deepcopy(dict(obj["spec"]["template"]["spec"]))


def _node(tmp_path: Path, config: dict[str, dict[str, str]]) -> Node:
    ca = tmp_path / "ca.crt"
    ca.write_text("CA")
    return Node("n1", tmp_path / "node", "https://127.0.0.1:6443", ca, config)


POD = Pod("topolink-abc", "uid-1", "topolink", "TOKEN")


def _pairs(args: list[str], flag: str) -> list[str]:
    return [args[i + 1] for i, a in enumerate(args[:-1]) if a == flag]


def test_the_agents_container_gets_every_field(tmp_path: Path) -> None:
    rendered = _rendered("default")
    config = {d["metadata"]["name"]: d["data"] for d in rendered if d["kind"] == "ConfigMap"}
    spec = _template("default", "DaemonSet")
    (agent,) = spec["containers"]
    args = run_args(spec, agent, _node(tmp_path, config), POD, "c")
    assert args[-2:] == [IMAGE, "serve"]
    assert _pairs(args, "--user") == ["65532:65532"] and _pairs(args, "--cap-drop") == ["all"]
    assert "--read-only" in args and "--read-only-tmpfs=false" in args and "no-new-privileges" in args
    env = dict(e.split("=", 1) for e in _pairs(args, "-e"))
    assert env["NODE_NAME"] == "n1" and env["POD_NAME"] == "topolink-abc" and env["POD_UID"] == "uid-1"
    (settings,) = [data for name, data in config.items() if name.startswith("topolink-agent-")]  # hash suffixed
    assert env["TOPOLINK_LABEL_PREFIX"] == settings["labelPrefix"]
    assert env["KUBERNETES_SERVICE_HOST"] == "127.0.0.1" and env["KUBERNETES_SERVICE_PORT"] == "6443"
    volumes = _pairs(args, "-v")
    assert "/sys:/host/sys:ro" in volumes and "/proc:/host/proc:ro" in volumes
    assert f"{tmp_path}/node/var/lib/topolink:/var/lib/topolink:rw" in volumes
    assert any(v.endswith(f":{SA_DIR}:ro") for v in volumes)
    assert _pairs(args, "--mount") == ["type=tmpfs,destination=/tmp,tmpfs-size=64m,tmpfs-mode=1777"]
    assert _pairs(args, "--memory") == [agent["resources"]["limits"]["memory"].replace("Gi", "g").replace("Mi", "m")]


def test_the_init_container_runs_as_root_with_chown_alone(tmp_path: Path) -> None:
    spec = _template("default", "DaemonSet")
    (init,) = spec["initContainers"]
    args = run_args(spec, init, _node(tmp_path, {}), POD, "i")
    assert _pairs(args, "--user") == ["0:65532"] and _pairs(args, "--cap-add") == ["CHOWN"]
    assert _pairs(args, "--entrypoint") == ["python"] and args[args.index(IMAGE) + 1] == "-c"


@pytest.mark.parametrize("where", ["pod", "container", "securityContext"])
def test_a_field_it_does_not_apply_is_refused(tmp_path: Path, where: str) -> None:
    spec = _template("default", "DaemonSet")
    (agent,) = spec["containers"]
    target = {"pod": spec, "container": agent, "securityContext": agent["securityContext"]}[where]
    target["someNewField"] = True
    with pytest.raises(AssertionError, match="someNewField"):
        run_args(spec, agent, _node(tmp_path, {"topolink-agent": {}}), POD, "c")


def test_the_prune_jobs_args_come_from_the_manifest(tmp_path: Path) -> None:
    spec = _template("prune", "Job")
    (prune,) = spec["containers"]
    args = run_args(spec, prune, _node(tmp_path, {}), POD, "p")  # its ConfigMap keys are optional
    assert args[args.index(IMAGE) + 1:] == prune["args"]


# What the server's defaults, the DaemonSet controller and the ServiceAccount admission add to the template
# (as a v1.36 kube-controller-manager's pod has them; tests/test_image.py runs the real one).
ACCESS = {"name": "kube-api-access-x1", "projected": {"defaultMode": 0o640, "sources": [
    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
    {"configMap": {"name": "absent", "optional": True}},
    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1",
                                                                  "fieldPath": "metadata.namespace"}}]}}]}}


def _as_the_server_holds_it() -> dict[str, Any]:
    spec = _template("default", "DaemonSet")
    spec.update(restartPolicy="Always", dnsPolicy="ClusterFirst", schedulerName="default-scheduler", nodeName="n1",
                serviceAccount="topolink", priority=1000000, preemptionPolicy="PreemptLowerPriority")
    spec["volumes"].append(ACCESS)
    for container in [*spec["initContainers"], *spec["containers"]]:
        container.update(terminationMessagePath="/dev/termination-log", terminationMessagePolicy="File",
                         imagePullPolicy="IfNotPresent")
        container["volumeMounts"].append({"name": ACCESS["name"], "readOnly": True, "mountPath": SA_DIR})
    return spec


def test_the_controllers_pod_gets_its_projected_token_volume(tmp_path: Path) -> None:
    spec = _as_the_server_holds_it()
    (agent,) = spec["containers"]
    config = {d["metadata"]["name"]: d["data"] for d in _rendered("default") if d["kind"] == "ConfigMap"} | {
        "kube-root-ca.crt": {"ca.crt": "ROOT CA"}}
    args = run_args(spec, agent, _node(tmp_path, config), POD, "c")
    (mounted,) = [v for v in _pairs(args, "-v") if v.endswith(f":{SA_DIR}:ro")]  # the volume's, no other
    where = Path(mounted.split(":")[0])
    assert {p.name: p.read_text() for p in where.iterdir()} == {"token": "TOKEN", "ca.crt": "ROOT CA",
                                                               "namespace": "topolink"}
    assert {p.stat().st_mode & 0o777 for p in where.iterdir()} == {0o640}


def test_a_pod_of_another_node_or_without_its_config_map_is_refused(tmp_path: Path) -> None:
    spec = _as_the_server_holds_it()
    (init,) = spec["initContainers"]
    with pytest.raises(AssertionError, match="ConfigMap kube-root-ca"):
        run_args(spec, init, _node(tmp_path, {}), POD, "i")
    spec["nodeName"] = "n2"
    with pytest.raises(AssertionError, match="n2"):
        run_args(spec, init, _node(tmp_path, {"kube-root-ca.crt": {"ca.crt": "CA"}}), POD, "i")
