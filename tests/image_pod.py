"""The kubelet's part for the ``image`` tier: the image built as scripts/image.sh builds it, and one pod run with
podman, every field of its spec applied, named with why it needs nothing from a kubelet, or refused when this
module does not know it (so that a field added to the manifests, or one the API server or a controller adds, is
either run here or fails the tier, never silently skipped). The pod is the one the DaemonSet controller made
(with what the API server's defaults and admission added), or a pod template of a rendered manifest.

What stands in for the node:
- hostPath ``/sys`` and ``/proc`` are this machine's own; every other hostPath lives below ``Node.root``, made
  as the kubelet makes it (``DirectoryOrCreate``: root-owned, 0755).
- the ServiceAccount token is a TokenRequest bound to the pod (with the node-name claim). A ``projected``
  volume (the ``kube-api-access-*`` one the ServiceAccount admission adds) is written as the kubelet writes it:
  the token, the ConfigMaps' items (read from the API server), the downward API's fields, with its
  ``defaultMode``, mounted where the pod says. A template the server never admitted has no such volume: it gets
  the same three files (token, the server's CA, the namespace) at ``/var/run/secrets/kubernetes.io/serviceaccount``.
  ``KUBERNETES_SERVICE_HOST`` and ``_PORT`` name the API server, as the kubelet sets them.
- the pod's network namespace is the host's: the API server of the tier listens on loopback only, and its
  certificate names 127.0.0.1; the container's port is then reached on 127.0.0.1.
- ``runtimeClassName: nvidia``: what the NVIDIA container runtime (or a CDI spec) adds to the container, which
  is the driver's ``libnvidia-ml.so.1`` bind-mounted read-only into the image's library directory. Here the
  library is the test NVML (tests/fakenvml), with its profile mounted beside it.
- ``nodeName`` must be this node. Scheduling (affinity, tolerations, priority) and resource requests are the
  scheduler's; the memory limit is applied. ``NEEDS_NOTHING`` and ``CONTAINER_NEEDS_NOTHING`` name
  every other field with why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CONTAINERS_CONF = REPO / "daemonset" / "image" / "containers.conf"
BASE = "localhost/topolink-base:bookworm"
IMAGE = f"localhost/topolink:image-tier-{os.getpid()}"  # one per run, removed after it
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
NVML_IN_CONTAINER = "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"
PROFILE_IN_CONTAINER = "/etc/topolink-test-nvml/profile.txt"
SKIP = ("image tier skipped: it needs podman, runc and mmdebstrap as root (apt-get install podman runc "
        "mmdebstrap; .ci/run installs them)")

# The fields this kubelet applies; any other, but those the two NEEDS_NOTHING tables name, fails the tier.
POD_FIELDS = {"serviceAccountName", "securityContext", "initContainers", "containers", "volumes",
              "terminationGracePeriodSeconds", "enableServiceLinks", "runtimeClassName", "nodeName",
              "automountServiceAccountToken"}
CONTAINER_FIELDS = {"name", "image", "command", "args", "env", "ports", "startupProbe", "livenessProbe",
                    "readinessProbe", "lifecycle", "resources", "securityContext", "volumeMounts"}
_STATUS_ONLY = "where the kubelet reads a message for the pod's status after an exit: no status is reported here"
# The fields of a pod and of a container (the server's defaults, the controllers' and the admission's additions
# among them) that ask nothing of this kubelet, and why.
NEEDS_NOTHING = {
    "affinity": "the scheduler's (the DaemonSet controller pins its pod to one node with matchFields)",
    "nodeSelector": "the scheduler's",
    "tolerations": "the scheduler's and the taint manager's (the DaemonSet controller adds the node conditions')",
    "priorityClassName": "the priority admission resolves it into priority",
    "priority": "the scheduler's and the eviction order's",
    "preemptionPolicy": "the scheduler's",
    "schedulerName": "names the scheduler that binds the pod",
    "serviceAccount": "the deprecated copy of serviceAccountName the server keeps",
    "restartPolicy": "a kubelet restarts a container that exits; here an exit fails the tier instead",
    "dnsPolicy": "there is no cluster DNS here; the agent reaches the API server by its address",
}
CONTAINER_NEEDS_NOTHING = {
    "terminationMessagePath": _STATUS_ONLY,
    "terminationMessagePolicy": _STATUS_ONLY,
    "imagePullPolicy": "the image is the one built here, in podman's storage: nothing is pulled",
}
SECURITY_FIELDS = {"runAsNonRoot", "runAsUser", "runAsGroup", "seccompProfile", "allowPrivilegeEscalation",
                   "readOnlyRootFilesystem", "capabilities"}


def skip_reason() -> str | None:
    if shutil.which("podman") is None or os.geteuid() != 0:
        return SKIP
    if shutil.which("mmdebstrap") is None and podman("image", "exists", BASE, check=False).returncode != 0:
        return SKIP
    return None


def podman(*args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}
    out = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, env=env, check=False)
    if check and out.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} failed ({out.returncode}): {out.stderr[-3000:]}")
    return out


def build(python: str) -> str:
    """The base once per machine (it stays in podman's storage, outside the repository), then the image;
    returns what scripts/image.sh printed."""
    env = {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF), "ENGINE": "podman", "PYTHON": python}
    printed = ""
    steps = [["build", "--base", BASE, "--tag", IMAGE]]
    if podman("image", "exists", BASE, check=False).returncode != 0:
        steps.insert(0, ["base", "--tag", BASE])
    for step in steps:
        out = subprocess.run([str(REPO / "scripts" / "image.sh"), *step], capture_output=True, text=True,
                             timeout=600, env=env, check=False)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
        printed += out.stdout
    return printed


@dataclass
class Node:
    """What the kubelet of one node hands a pod."""

    name: str
    root: Path
    server: str  # https://HOST:PORT of the API server
    ca: Path
    config_maps: dict[str, dict[str, str]]
    runtime: list[str] = field(default_factory=list)  # what the runtime class adds (podman arguments)


@dataclass(frozen=True)
class Pod:
    name: str
    uid: str
    namespace: str
    token: str


def _merged(pod_spec: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
    ctx = {**pod_spec.get("securityContext", {}), **container.get("securityContext", {})}
    unknown = set(ctx) - SECURITY_FIELDS
    assert not unknown, f"securityContext fields this kubelet does not apply: {sorted(unknown)}"
    return ctx


def _memory(quantity: str) -> str:
    units = {"Ki": "k", "Mi": "m", "Gi": "g"}
    return next((quantity[:-2] + u for s, u in units.items() if quantity.endswith(s)), quantity)


def _fields(node: Node, pod: Pod) -> dict[str, str]:
    """The downward API's fields this kubelet hands a pod."""
    return {"spec.nodeName": node.name, "metadata.name": pod.name, "metadata.uid": pod.uid,
            "metadata.namespace": pod.namespace}


def _env(container: dict[str, Any], node: Node, pod: Pod) -> list[str]:
    fields = _fields(node, pod)
    host, _, port = node.server.removeprefix("https://").rpartition(":")
    args = ["-e", f"KUBERNETES_SERVICE_HOST={host}", "-e", f"KUBERNETES_SERVICE_PORT={port}"]
    for var in container.get("env", []):
        source = var.get("valueFrom")
        if source is None:
            value: str | None = var["value"]
        elif "fieldRef" in source:
            value = fields[source["fieldRef"]["fieldPath"]]
        else:
            ref = source["configMapKeyRef"]
            value = node.config_maps.get(ref["name"], {}).get(ref["key"])
            assert value is not None or ref.get("optional"), f"ConfigMap {ref['name']} has no key {ref['key']}"
        if value is not None:
            args += ["-e", f"{var['name']}={value}"]
    return args


def _volumes(pod_spec: dict[str, Any], container: dict[str, Any], node: Node, pod: Pod) -> list[str]:
    volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
    args: list[str] = []
    for mount in container.get("volumeMounts", []):
        vol = volumes[mount["name"]]
        ro = mount.get("readOnly", False)
        if "hostPath" in vol:
            path = vol["hostPath"]["path"]
            if path in ("/sys", "/proc"):
                source = Path(path)
            else:
                source = node.root / path.lstrip("/")
                if vol["hostPath"].get("type") == "DirectoryOrCreate" and not source.exists():
                    source.mkdir(parents=True, mode=0o755)
            assert source.is_dir(), f"hostPath {path} is not a directory"
            args += ["-v", f"{source}:{mount['mountPath']}:{'ro' if ro else 'rw'}"]
        elif "emptyDir" in vol:
            size = vol["emptyDir"].get("sizeLimit", "64Mi")
            assert vol["emptyDir"].get("medium") == "Memory", "only memory-backed emptyDirs are run here"
            args += ["--mount", f"type=tmpfs,destination={mount['mountPath']},tmpfs-size={_memory(size)},"
                                f"tmpfs-mode=1777"]
        elif "projected" in vol:
            args += ["-v", f"{_projected(vol, node, pod)}:{mount['mountPath']}:{'ro' if ro else 'rw'}"]
        else:
            raise AssertionError(f"volume kind this kubelet does not mount: {sorted(vol)}")
    return args


def _projected(vol: dict[str, Any], node: Node, pod: Pod) -> Path:
    """A projected volume's files, each source's, with its mode, as the kubelet writes them."""
    files: dict[str, str] = {}
    for source in vol["projected"]["sources"]:
        ((kind, src),) = source.items()
        if kind == "serviceAccountToken":
            assert not src.get("audience"), f"a token for audience {src['audience']}: this kubelet has the API server's"
            files[src["path"]] = pod.token
        elif kind == "configMap":
            data = node.config_maps.get(src["name"])
            assert data is not None or src.get("optional"), f"ConfigMap {src['name']} of {vol['name']} is not there"
            items = src.get("items") or [{"key": k, "path": k} for k in data or {}]
            assert all(set(i) <= {"key", "path"} for i in items), f"item fields this kubelet does not apply: {items}"
            files |= {i["path"]: (data or {})[i["key"]] for i in items}
        elif kind == "downwardAPI":
            files |= {i["path"]: _fields(node, pod)[i["fieldRef"]["fieldPath"]] for i in src["items"]}
        else:
            raise AssertionError(f"projected source this kubelet does not write: {kind}")
    where = node.root / "pods" / pod.uid / "volumes" / vol["name"]
    where.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (where / name).write_text(text)
        (where / name).chmod(vol["projected"].get("defaultMode", 0o644))
    return where


def _token_dir(node: Node, pod: Pod) -> Path:
    where = node.root / "pods" / pod.uid / "serviceaccount"
    where.mkdir(parents=True, exist_ok=True)
    for name, text in (("token", pod.token), ("ca.crt", node.ca.read_text()), ("namespace", pod.namespace)):
        (where / name).write_text(text)
        (where / name).chmod(0o644)  # the projected volume's defaultMode
    return where


def run_args(pod_spec: dict[str, Any], container: dict[str, Any], node: Node, pod: Pod, name: str) -> list[str]:
    """``podman run`` arguments that apply every field of ``container`` of ``pod_spec``."""
    unknown = ((set(pod_spec) - POD_FIELDS - set(NEEDS_NOTHING))
               | (set(container) - CONTAINER_FIELDS - set(CONTAINER_NEEDS_NOTHING)))
    assert not unknown, f"pod fields this kubelet does not apply: {sorted(unknown)}"
    assert pod_spec.get("nodeName", node.name) == node.name, f"a pod of node {pod_spec['nodeName']}, not {node.name}"
    ctx = _merged(pod_spec, container)
    user, group = ctx.get("runAsUser", 0), ctx.get("runAsGroup", 0)
    if ctx.get("runAsNonRoot"):
        assert user != 0, "runAsNonRoot with user 0: the kubelet refuses to start it"
    assert ctx.get("seccompProfile", {}).get("type", "RuntimeDefault") == "RuntimeDefault"
    args = ["--name", name, "--network", "host", "--user", f"{user}:{group}", "--cap-drop", "all"]
    args += [a for cap in ctx.get("capabilities", {}).get("add", []) for a in ("--cap-add", cap)]
    assert ctx.get("capabilities", {}).get("drop") == ["ALL"], "every container drops every capability"
    if ctx.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    if ctx.get("readOnlyRootFilesystem"):
        args += ["--read-only", "--read-only-tmpfs=false"]  # no tmpfs of podman's own: the pod's volumes only
    limit = container.get("resources", {}).get("limits", {}).get("memory")
    if limit:
        args += ["--memory", _memory(limit)]
    args += _env(container, node, pod) + _volumes(pod_spec, container, node, pod)
    admitted = any(m["mountPath"] == SA_DIR for m in container.get("volumeMounts", []))  # a projected volume
    if pod_spec.get("automountServiceAccountToken", True) and not admitted:
        args += ["-v", f"{_token_dir(node, pod)}:{SA_DIR}:ro"]
    if pod_spec.get("runtimeClassName"):
        args += node.runtime
    command = container.get("command")
    if command:
        args += ["--entrypoint", command[0]]
    return [*args, IMAGE, *(command or [])[1:], *container.get("args", [])]
