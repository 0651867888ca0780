"""The Helm chart (daemonset/chart) is made from the kustomize overlays, so the two install the same objects
and a setting added to the ConfigMap ``topolink-agent`` reaches the chart's values when it is made again:

    .venv/bin/python -m tests.chart_support      # rewrites daemonset/chart/templates, values.yaml, values.schema.json

The objects common to the ``default`` and ``nfd`` overlays become templates with the release's namespace, the
image from ``image.repository``/``image.tag`` and every ConfigMap key from ``settings``; the RBAC only one of the
overlays has is kept where ``settings.labelsVia`` asks for it. The Namespace is Helm's (``--create-namespace``).
tests/test_chart.py checks that the files are current and that real Helm renders what kustomize builds.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "daemonset" / "chart"
KUBECTL = Path(sys.executable).parent / "kubectl"
NAMESPACE = "topolink"
IMAGE = "ghcr.io/topolink/topolink"
SETTINGS = "topolink-agent"  # the ConfigMap the agent and its admission policy read
# Where the RBAC of one overlay alone is kept: the settings.labelsVia value that overlay sets.
ONLY_IN = {"default": "node", "nfd": "nodefeature"}
# What each settings key means, for values.yaml (a key without a line here fails the make: document it).
SETTING_HELP = {
    "labelPrefix": "prefix of the node labels the agent publishes",
    "labelsVia": "node: labels applied on the agent's own Node; nodefeature: through an NFD NodeFeature "
                 "(NFD's master writes them); file: an NFD features.d file; none: no labels",
    "compatLabels": '"true": also nvidia.com/nvswitch.present, nvlink.version and gpu.clique (node mode only)',
    "resourceSlices": '"true": publish DRA ResourceSlices of the node\'s GPUs and links',
    "draDriver": "DRA driver name and attribute domain of the agent's ResourceSlices",
    "deviceTaintRules": '"true": a DeviceTaintRule for each degraded GPU of the NVIDIA GPU DRA driver',
    "gpuDraDriver": "that driver's name",
    "nodeCondition": '"true": the Node condition GPUTopologyDegraded (True, False, Unknown) on the node\'s status',
    "nodeTaint": '"true" (with nodeCondition): taint the Node <labelPrefix>/degraded:NoSchedule while its GPU links '
                 "are degraded",
}


IMAGE_TEMPLATE = ("{{ .Values.image.repository }}{{ if .Values.image.digest }}@{{ .Values.image.digest }}{{ else }}"
                  ":{{ .Values.image.tag | default .Chart.AppVersion }}{{ end }}")
# What the agent reads at start besides its image and arguments: the settings ConfigMap. Its checksum in the pod
# template makes a changed setting a new template, which the DaemonSet controller rolls out (kustomize gets the
# same from the ConfigMap's hash suffix).
CHECKSUM = "checksum/settings"
CHECKSUM_TEMPLATE = '{{ include (print $.Template.BasePath "/configmap-topolink-agent.yaml") . | sha256sum }}'
ROLLED = (("DaemonSet", "topolink"), ("Deployment", "topolink-controller"))  # the pods that read the settings
_HASHED = re.compile(rf"{SETTINGS}-[a-z0-9]{{10}}")


def kustomize(overlay: str | Path) -> list[dict[str, Any]]:
    where = overlay if isinstance(overlay, Path) else REPO / "daemonset" / "overlays" / overlay
    out = subprocess.run([str(KUBECTL), "kustomize", str(where)],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def unhashed(value: Any) -> Any:
    """``value`` with the settings ConfigMap's generated name (``topolink-agent-<hash>``, kustomize's
    configMapGenerator) as its plain name, which the chart uses (the chart rolls by a checksum instead)."""
    if isinstance(value, dict):
        return {k: unhashed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unhashed(v) for v in value]
    return SETTINGS if isinstance(value, str) and _HASHED.fullmatch(value) else value


def key(obj: dict[str, Any]) -> tuple[str, str]:
    return obj["kind"], obj["metadata"]["name"]


def _templated(value: Any) -> Any:
    """The object with the release's namespace and the chart's image and settings in place of kustomize's."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "namespace" and v == NAMESPACE:
                out[k] = "{{ .Release.Namespace }}"
            elif k == "image" and isinstance(v, str) and v.startswith(IMAGE + ":"):
                out[k] = IMAGE_TEMPLATE
            else:
                out[k] = _templated(v)
        return out
    if isinstance(value, list):
        return [_templated(v) for v in value]
    return value


def templates() -> tuple[dict[str, str], dict[str, str]]:
    """The chart's template files (name -> text) and the settings' defaults (the default overlay's)."""
    built = {name: {key(o): o for o in unhashed(kustomize(name)) if o["kind"] != "Namespace"} for name in ONLY_IN}
    default, nfd = built["default"], built["nfd"]
    settings = dict(default[("ConfigMap", SETTINGS)]["data"])
    files: dict[str, str] = {}
    for name, objects in built.items():
        for k, obj in objects.items():
            other = nfd if name == "default" else default
            if k in other and name == "nfd":
                continue  # common: written once, from the default overlay
            templated = _templated(obj)
            if k == ("ConfigMap", SETTINGS):
                templated["data"] = {s: f"{{{{ .Values.settings.{s} }}}}" for s in obj["data"]}
            if k in ROLLED:
                templated["spec"]["template"]["metadata"].setdefault("annotations", {})[CHECKSUM] = CHECKSUM_TEMPLATE
            text = yaml.safe_dump(templated, sort_keys=False, width=1000)
            if k not in other:
                text = f'{{{{- if eq .Values.settings.labelsVia "{ONLY_IN[name]}" }}}}\n{text}{{{{- end }}}}\n'
            files[f"{k[0].lower()}-{k[1]}.yaml"] = text
    files.update(uninstall_hook())
    files.update(dashboard())
    return files, settings


DASHBOARD = REPO / "daemonset" / "dashboard"
DASHBOARD_FILE = "files/topolink-dashboard.json"  # a copy inside the chart: Helm reads no file outside it


def dashboard() -> dict[str, str]:
    """The Grafana dashboard's ConfigMap as kustomize builds it (daemonset/dashboard), its JSON read from the
    chart's copy (``.Files.Get``: the JSON's own ``{{...}}`` legends are no template)."""
    (obj,) = kustomize(DASHBOARD)
    templated = _templated(obj)
    (name,) = obj["data"]
    templated["data"] = {name: "DASHBOARD"}
    text = yaml.safe_dump(templated, sort_keys=False, width=1000).replace(
        "DASHBOARD", f'{{{{ .Files.Get "{DASHBOARD_FILE}" | toJson }}}}')
    return {"configmap-topolink-dashboard.yaml": f"{{{{- if .Values.grafanaDashboard }}}}\n{text}{{{{- end }}}}\n"}


# The uninstall hook: the prune overlay's ServiceAccount, RBAC and Job as Helm post-delete hooks, so that
# `helm uninstall` ends with `topolink prune --all-nodes` once the DaemonSet is gone (a pre-delete hook would
# prune while the agents still run, and they publish again). The account's objects come first (weight).
HOOK = "post-delete"
HOOK_WEIGHTS = {"ServiceAccount": "-10", "ClusterRole": "-10", "ClusterRoleBinding": "-10", "Role": "-10",
                "RoleBinding": "-10", "Job": "0"}


def uninstall_hook() -> dict[str, str]:
    files = {}
    for obj in unhashed(kustomize("prune")):
        if obj["kind"] not in HOOK_WEIGHTS:
            continue  # the Namespace is Helm's; the settings ConfigMap is the release's, gone by post-delete
        templated = _templated(obj)
        templated["metadata"].setdefault("annotations", {}).update({
            "helm.sh/hook": HOOK, "helm.sh/hook-weight": HOOK_WEIGHTS[obj["kind"]],
            "helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded"})
        if obj["kind"] == "Job":  # the release's settings, as values: its ConfigMap is deleted before the hook
            for container in templated["spec"]["template"]["spec"]["containers"]:
                keys = {e["name"]: e["valueFrom"]["configMapKeyRef"]["key"] for e in container["env"]
                        if "configMapKeyRef" in e.get("valueFrom", {})}  # the others (a fieldRef) as they are
                container["env"] = [{"name": e["name"], "value": f"{{{{ .Values.settings.{keys[e['name']]} }}}}"}
                                    if e["name"] in keys else e for e in container["env"]]
        text = yaml.safe_dump(templated, sort_keys=False, width=1000)
        files[f"hook-{obj['kind'].lower()}-{obj['metadata']['name']}.yaml"] = (
            f"{{{{- if .Values.pruneOnUninstall }}}}\n{text}{{{{- end }}}}\n")
    return files


def values_text(settings: dict[str, str]) -> str:
    missing = sorted(set(settings) - set(SETTING_HELP))
    if missing:
        raise SystemExit(f"chart_support: document the new settings in SETTING_HELP: {missing}")
    lines = ["# topolink's Helm chart: the values and what each one means. Made by `python -m tests.chart_support`",
             "# from the kustomize overlays (daemonset/overlays), whose objects it installs.", "",
             "# The agent's image: build and push it first (docs/operator.md, Install).", "image:",
             "  # where the image is pushed", f"  repository: {IMAGE}",
             "  # its tag; empty: the chart's appVersion", '  tag: ""',
             "  # sha256:...: the image by the digest the registry stored; set, it wins over tag",
             '  digest: ""',
             "",
             "# true: `helm uninstall` ends with a Job (a post-delete hook, with its own ServiceAccount and the least",
             "# RBAC it needs) running `topolink prune --all-nodes`: every label, slice, taint rule and claim object",
             "# of ours goes.",
             "pruneOnUninstall: true", "",
             '# true: the Grafana dashboard, a ConfigMap labelled grafana_dashboard: "1" (for Grafana\'s sidecar)',
             "grafanaDashboard: true", "",
             f"# The ConfigMap {SETTINGS}: the agent reads each key as a TOPOLINK_* variable and the admission",
             "# policy takes it as its parameters, so one value reaches both. Strings, as a ConfigMap holds them.",
             "settings:"]
    for name, value in settings.items():
        lines += [f"  # {SETTING_HELP[name]}", f"  {name}: {json.dumps(value)}"]
    return "\n".join(lines) + "\n"


def schema(settings: dict[str, str]) -> dict[str, Any]:
    from exporter.kube._config._flags import LABELS_VIA

    def setting(name: str) -> dict[str, Any]:
        if settings[name] in ("true", "false"):
            return {"type": "string", "enum": ["true", "false"]}
        if name == "labelsVia":
            return {"type": "string", "enum": list(LABELS_VIA)}
        return {"type": "string", "minLength": 1, "pattern": "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"}

    return {"$schema": "https://json-schema.org/draft-07/schema#", "type": "object", "additionalProperties": False,
            "required": ["image", "settings"], "properties": {
                "pruneOnUninstall": {"type": "boolean"},
                "grafanaDashboard": {"type": "boolean"},
                "image": {"type": "object", "additionalProperties": False, "required": ["repository"],
                          "properties": {"repository": {"type": "string", "minLength": 1},
                                         "tag": {"type": "string"},
                                         "digest": {"type": "string", "pattern": "^(sha256:[a-f0-9]{64})?$"}}},
                "settings": {"type": "object", "additionalProperties": False, "required": sorted(settings),
                             "properties": {name: setting(name) for name in settings}}}}


def chart_files() -> dict[str, str]:
    """Every generated file of the chart, by its path below daemonset/chart."""
    files, settings = templates()
    out = {f"templates/{name}": text for name, text in files.items()}
    out["values.yaml"] = values_text(settings)
    out[DASHBOARD_FILE] = (DASHBOARD / "topolink.json").read_text()
    out["values.schema.json"] = json.dumps(schema(settings), indent=2) + "\n"
    return out


def main() -> int:
    for name in (CHART / "templates").glob("*.yaml"):
        name.unlink()
    for name, text in chart_files().items():
        path = CHART / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
