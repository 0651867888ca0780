"""The kubelet's part for the ``image`` tier: the image built as scripts/image.sh builds it, and one pod template
of a rendered manifest run with podman, every field of it applied, or refused when this module does not know it
(so that a field added to the manifests is either run here or fails the tier, never silently skipped).

What stands in for the node:
- hostPath ``/sys`` and ``/proc`` are this machine's own; every other hostPath lives below ``Node.root``, made
  as the kubelet makes it (``DirectoryOrCreate``: root-owned, 0755).
- the ServiceAccount token is a TokenRequest bound to the pod (with the node-name claim), mounted read-only at
  ``/var/run/secrets/kubernetes.io/serviceaccount`` beside the server's CA and the namespace, with
  ``KUBERNETES_SERVICE_HOST`` and ``_PORT`` naming the API server, as the kubelet mounts and sets them.
- the pod's network namespace is the host's: the API server of the tier listens on loopback only, and its
  certificate names 127.0.0.1; the container's port is then reached on 127.0.0.1.
- ``runtimeClassName: nvidia``: what the NVIDIA container runtime (or a CDI spec) adds to the container, which
  is the driver's ``libnvidia-ml.so.1`` bind-mounted read-only into the image's library directory. Here the
  library is the test NVML (tests/fakenvml), with its profile mounted beside it.
- scheduling (affinity, tolerations, priority) and resource requests are the scheduler's; the memory limit
  is applied.
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

# The fields this kubelet applies; any other fails the tier. The scheduler's fields are read by no kubelet.
POD_FIELDS = {"serviceAccountName", "securityContext", "initContainers", "containers", "volumes",
              "terminationGracePeriodSeconds", "enableServiceLinks", "restartPolicy", "runtimeClassName"}
SCHEDULER_FIELDS = {"affinity", "tolerations", "priorityClassName", "nodeSelector"}
CONTAINER_FIELDS = {"name", "image", "command", "args", "env", "ports", "startupProbe", "livenessProbe",
                    "readinessProbe", "lifecycle", "resources", "securityContext", "volumeMounts"}
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


def _env(container: dict[str, Any], node: Node, pod: Pod) -> list[str]:
    fields = {"spec.nodeName": node.name, "metadata.name": pod.name, "metadata.uid": pod.uid,
              "metadata.namespace": pod.namespace}
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


def _volumes(pod_spec: dict[str, Any], container: dict[str, Any], node: Node) -> list[str]:
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
        else:
            raise AssertionError(f"volume kind this kubelet does not mount: {sorted(vol)}")
    return args


def _token_dir(node: Node, pod: Pod) -> Path:
    where = node.root / "pods" / pod.uid / "serviceaccount"
    where.mkdir(parents=True, exist_ok=True)
    for name, text in (("token", pod.token), ("ca.crt", node.ca.read_text()), ("namespace", pod.namespace)):
        (where / name).write_text(text)
        (where / name).chmod(0o644)  # the projected volume's defaultMode
    return where


def run_args(pod_spec: dict[str, Any], container: dict[str, Any], node: Node, pod: Pod, name: str) -> list[str]:
    """``podman run`` arguments that apply every field of ``container`` of ``pod_spec``."""
    unknown = (set(pod_spec) - POD_FIELDS - SCHEDULER_FIELDS) | (set(container) - CONTAINER_FIELDS)
    assert not unknown, f"pod template fields this kubelet does not apply: {sorted(unknown)}"
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
    args += _env(container, node, pod) + _volumes(pod_spec, container, node)
    if pod_spec.get("automountServiceAccountToken", True):
        args += ["-v", f"{_token_dir(node, pod)}:{SA_DIR}:ro"]
    if pod_spec.get("runtimeClassName"):
        args += node.runtime
    command = container.get("command")
    if command:
        args += ["--entrypoint", command[0]]
    return [*args, IMAGE, *(command or [])[1:], *container.get("args", [])]
