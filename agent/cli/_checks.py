"""Doctor's node check and the preflight ``serve`` runs with doctor's checks: shared by both commands, so that
what serve warns about at start is what ``topolink doctor`` reports, checked by the same code."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from exporter.kube import KubePublishConfig
    from exporter.kube._config._doctor import Finding


def driver(library: str | None) -> Finding:
    from agent.discovery.access import NvmlError, open_nvml
    from exporter.kube._config._doctor import Finding

    check = "NVIDIA driver (NVML)"
    try:
        port = open_nvml(library)
    except NvmlError as exc:
        return Finding(check, False, str(exc), "install the NVIDIA driver on the node; in a pod, runtimeClassName "
                       "nvidia and NVIDIA_VISIBLE_DEVICES=all inject it (docs/operator.md, How the DaemonSet reads "
                       "the node); without it the agent discovers from sysfs alone")
    try:
        count = port.device_count()
    finally:
        port.close()
    return Finding(check, True, f"{count} GPU(s)")


def preflight(cfg: KubePublishConfig, nvml_library: str | None, *, node: bool) -> list[Finding]:
    """What ``serve`` checks as it starts, with doctor's own checks: the driver (``node``: discovery reads this
    machine), and for the Kubernetes sinks ``cfg`` asks for (none: no request) the NodeFeature CRD and their
    permissions, one request each. The RuntimeClass is left out: a running agent's pod was started with its
    own, and serve does not know its name. Only what is missing is returned; an unreachable server is one."""
    from exporter.kube._config._doctor import Finding

    findings = [driver(nvml_library)] if node else []
    if cfg.needs_api:  # the client and the checks only with a sink on: they are megabytes resident
        from exporter.kube import LightkubeApi, PublishError
        from exporter.kube._config._doctor import node_feature_crd, permissions

        try:
            api = LightkubeApi.connect(kubeconfig=cfg.kubeconfig)
            findings += [*node_feature_crd(api, cfg), *permissions(api, cfg)]
        except PublishError as exc:
            findings.append(Finding("Kubernetes API", False, f"the checks could not run: {exc}",
                                    "see the publish lines that follow; topolink doctor names what is missing"))
    return [f for f in findings if not f.ok]
