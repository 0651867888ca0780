"""Configuration of the Kubernetes sinks, its command-line flags, and the factory the serve loop calls."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .._desired._names import check_driver, check_prefix

if TYPE_CHECKING:
    from ..._core._sink import Sink
    from .._api._api import KubeApi
    from .._desired._labels import LabelConfig

from ._flags import FEATURES_FILE, LABELS_VIA, POLICY_SETTINGS, add_kube_args

DEFAULT_FEATURES_FILE = Path(FEATURES_FILE)

__all__ = ["DEFAULT_FEATURES_FILE", "LABELS_VIA", "KubePublishConfig", "add_kube_args", "config_from_args",
           "connect", "policy_params", "sinks_from_config"]


@dataclass(frozen=True, slots=True, kw_only=True)
class KubePublishConfig:
    node: str | None = None  # default: $NODE_NAME (the Downward API's spec.nodeName)
    prefix: str = "gpu.topology"
    labels_via: str = "node"
    compat_labels: bool = False
    resource_slices: bool = True
    driver: str = "gpu.topology"
    device_taints: bool | None = None  # None: where the server turns DRADeviceTaints on by default (1.36+)
    device_taint_rules: bool = False
    gpu_driver: str = "gpu.nvidia.com"
    node_condition: bool = False
    node_taint: bool = False  # only with node_condition
    condition_heartbeat_s: float = 300.0  # the condition written again at least this often, nothing changed
    nfd_namespace: str = "node-feature-discovery"
    features_file: Path = DEFAULT_FEATURES_FILE
    kubeconfig: str | None = None
    owner_pod: Mapping[str, str] = field(default_factory=dict)  # {"name": ..., "uid": ...} for the NodeFeature

    def __post_init__(self) -> None:
        if self.labels_via not in LABELS_VIA:
            raise ValueError(f"--labels-via must be one of {', '.join(LABELS_VIA)}, not {self.labels_via!r}")
        check_prefix(self.prefix)  # the rules of LabelConfig and SliceConfig, without loading what builds labels
        check_driver(self.driver)
        if self.node_taint and not self.node_condition:
            raise ValueError("--node-taint needs --node-condition: the taint follows the condition's verdict")

    @property
    def labels(self) -> LabelConfig:
        from .._desired._labels import LabelConfig

        return LabelConfig(prefix=self.prefix, compat=self.compat_labels)

    def node_name(self, env: Mapping[str, str] = os.environ) -> str:
        node = self.node or env.get("NODE_NAME")
        if not node:
            raise ValueError("no node name: pass --node-name or set $NODE_NAME (fieldRef spec.nodeName)")
        return node

    @property
    def needs_api(self) -> bool:
        return (self.labels_via in ("node", "nodefeature") or self.resource_slices or self.device_taint_rules
                or self.node_condition)


def config_from_args(args: argparse.Namespace, env: Mapping[str, str] = os.environ) -> KubePublishConfig:
    pod = {"name": env["POD_NAME"], "uid": env["POD_UID"]} if env.get("POD_NAME") and env.get("POD_UID") else {}
    return KubePublishConfig(
        node=args.node_name, prefix=args.label_prefix, labels_via=args.labels_via, compat_labels=args.compat_labels,
        resource_slices=args.resource_slices, driver=args.dra_driver_name,
        device_taints={"auto": None, "on": True, "off": False}[args.device_taints],
        device_taint_rules=args.device_taint_rules, gpu_driver=args.gpu_dra_driver,
        node_condition=args.node_condition, node_taint=args.node_taint,
        condition_heartbeat_s=args.condition_heartbeat, nfd_namespace=args.nfd_namespace,
        features_file=args.features_file, kubeconfig=args.kubeconfig,
        owner_pod=pod)


def policy_params(cfg: KubePublishConfig) -> dict[str, str]:
    """The data of the ConfigMap ``topolink-agent`` for ``cfg``: what the DaemonSet hands the agent (as
    ``TOPOLINK_*`` variables) and what the admission policy reads, keyed as ``POLICY_SETTINGS`` says."""
    values: dict[str, str | bool] = {
        "label_prefix": cfg.prefix, "labels_via": cfg.labels_via, "compat_labels": cfg.compat_labels,
        "resource_slices": cfg.resource_slices, "dra_driver_name": cfg.driver,
        "device_taint_rules": cfg.device_taint_rules, "gpu_dra_driver": cfg.gpu_driver,
        "node_condition": cfg.node_condition, "node_taint": cfg.node_taint}
    return {key: str(values[dest]).lower() if isinstance(values[dest], bool) else str(values[dest])
            for dest, key in POLICY_SETTINGS}


def connect(cfg: KubePublishConfig) -> KubeApi:
    from .._client._node_status import LightkubeNodeApi

    return LightkubeNodeApi.connect(kubeconfig=cfg.kubeconfig)


def sinks_from_config(cfg: KubePublishConfig, api: KubeApi | None = None) -> list[Sink]:
    """The sinks ``cfg`` asks for, sharing one client (made here unless given)."""
    from .._desired._slices import SliceConfig
    from .._sinks._label_sinks import FeatureFileSink, NodeFeatureSink, NodeLabelSink
    from .._sinks._slice_sink import ResourceSliceSink
    from .._sinks._taint_sink import DeviceTaintRuleSink

    node = cfg.node_name()
    if api is None and cfg.needs_api:
        api = connect(cfg)
    sinks: list[Sink] = []
    if cfg.labels_via == "file":
        sinks.append(FeatureFileSink(cfg.features_file, cfg.labels))
    if api is None:
        return sinks
    if cfg.labels_via == "node":
        sinks.append(NodeLabelSink(api, node, cfg.labels))
    elif cfg.labels_via == "nodefeature":
        owners = [{"apiVersion": "v1", "kind": "Pod", "name": cfg.owner_pod["name"], "uid": cfg.owner_pod["uid"]}
                  ] if cfg.owner_pod else []
        sinks.append(NodeFeatureSink(api, node, cfg.nfd_namespace, cfg.labels, owners))
    if cfg.resource_slices:
        sinks.append(ResourceSliceSink(api, node, SliceConfig(driver=cfg.driver), taints=cfg.device_taints))
    if cfg.device_taint_rules:
        sinks.append(DeviceTaintRuleSink(api, node, cfg.prefix, cfg.gpu_driver))
    if cfg.node_condition:
        from .._sinks._node_condition_sink import NodeConditionSink, NodeStatusApi

        if not isinstance(api, NodeStatusApi):
            raise ValueError("--node-condition needs a client with the Node status calls")
        sinks.append(NodeConditionSink(api, node, cfg.prefix, taint=cfg.node_taint,
                                       heartbeat_s=cfg.condition_heartbeat_s))
    return sinks
