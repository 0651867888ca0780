"""The Kubernetes publishing flags: argparse only, so adding them to a parser costs nothing at start-up."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

LABELS_VIA = ("node", "nodefeature", "file", "none")
FEATURES_FILE = "/etc/kubernetes/node-feature-discovery/features.d/topolink"


# The settings the agent and its admission policy must agree on, one table: each flag's ``dest``, the key in
# the ConfigMap ``topolink-agent`` that the ValidatingAdmissionPolicy takes as its parameters, and the
# environment variable (``TOPOLINK_<DEST>``) the DaemonSet fills from that key, so one edit reaches both.
POLICY_SETTINGS: tuple[tuple[str, str], ...] = (
    ("label_prefix", "labelPrefix"),
    ("labels_via", "labelsVia"),
    ("compat_labels", "compatLabels"),
    ("resource_slices", "resourceSlices"),
    ("dra_driver_name", "draDriver"),
    ("device_taint_rules", "deviceTaintRules"),
    ("gpu_dra_driver", "gpuDraDriver"),
    ("node_condition", "nodeCondition"),
    ("node_taint", "nodeTaint"),
)


def env_name(dest: str) -> str:
    return "TOPOLINK_" + dest.upper()


def add_kube_args(parser: argparse.ArgumentParser, *, node_name: bool = True,
                  environ: Mapping[str, str] | None = None) -> None:
    """The publishing flags. ``node_name=False`` when the parser already has ``--node-name`` (discovery's).
    The settings of :data:`POLICY_SETTINGS` default to their ``TOPOLINK_*`` variables (the DaemonSet sets them from the
    ConfigMap its admission policy reads); a flag on the command line wins."""
    from exporter._core._kube_names import DRIVER, NAMESPACE, NODE, PREFIX
    from exporter._core._settings import PATH, SWITCH, TEXT, Choice, env_value, seconds

    g = parser.add_argument_group("Kubernetes publishing")

    def default(dest: str, rule: Any, value: object) -> Any:
        return env_value(environ, env_name(dest), rule, value)

    via, taints = Choice(*LABELS_VIA), Choice("auto", "on", "off")
    if node_name:
        g.add_argument("--node-name", type=NODE, help="this node's name (default: $NODE_NAME)")
    g.add_argument("--label-prefix", type=PREFIX, default=default("label_prefix", PREFIX, "gpu.topology"),
                   help="label prefix ($TOPOLINK_LABEL_PREFIX, default: %(default)s)")
    g.add_argument("--labels-via", choices=LABELS_VIA, default=default("labels_via", via, "node"),
                   help="node: server-side apply on the Node; nodefeature: an NFD NodeFeature; file: an NFD "
                        "features.d file ($TOPOLINK_LABELS_VIA, default: %(default)s)")
    g.add_argument("--compat-labels", action=argparse.BooleanOptionalAction,
                   default=default("compat_labels", SWITCH, False),
                   help="also nvidia.com/nvswitch.present, nvidia.com/nvlink.version, nvidia.com/gpu.clique "
                        "(node mode only; never where another component owns them; $TOPOLINK_COMPAT_LABELS)")
    g.add_argument("--resource-slices", action=argparse.BooleanOptionalAction,
                   default=default("resource_slices", SWITCH, True),
                   help="publish DRA ResourceSlices ($TOPOLINK_RESOURCE_SLICES, default: %(default)s)")
    g.add_argument("--dra-driver-name", type=DRIVER, default=default("dra_driver_name", DRIVER, "gpu.topology"),
                   help="DRA driver name and attribute domain of our slices ($TOPOLINK_DRA_DRIVER_NAME, "
                        "default: %(default)s)")
    g.add_argument("--device-taints", choices=taints.choices, default="auto",
                   help="taint our devices NoSchedule: auto = on servers >= 1.36 (default: %(default)s)")
    g.add_argument("--device-taint-rules", action=argparse.BooleanOptionalAction,
                   default=default("device_taint_rules", SWITCH, False),
                   help="a DeviceTaintRule for each degraded GPU of the NVIDIA GPU DRA driver "
                        "($TOPOLINK_DEVICE_TAINT_RULES)")
    g.add_argument("--gpu-dra-driver", type=DRIVER, default=default("gpu_dra_driver", DRIVER, "gpu.nvidia.com"),
                   help="that driver's name ($TOPOLINK_GPU_DRA_DRIVER, default: %(default)s)")
    g.add_argument("--node-condition", action=argparse.BooleanOptionalAction,
                   default=default("node_condition", SWITCH, False),
                   help="the Node condition GPUTopologyDegraded (True, False, Unknown) on this node's status "
                        "($TOPOLINK_NODE_CONDITION)")
    g.add_argument("--node-taint", action=argparse.BooleanOptionalAction,
                   default=default("node_taint", SWITCH, False),
                   help="with --node-condition: taint this Node PREFIX/degraded:NoSchedule while its GPU links are "
                        "degraded ($TOPOLINK_NODE_TAINT)")
    heartbeat = seconds(1, 3600, low_open=False)
    g.add_argument("--condition-heartbeat", type=heartbeat, metavar="SECONDS",
                   default=default("condition_heartbeat", heartbeat, 300.0),
                   help="with --node-condition: the condition is written again at least this often with nothing "
                        "changed (its lastHeartbeatTime; a stale one says the agent is gone) "
                        "($TOPOLINK_CONDITION_HEARTBEAT, default: %(default)g)")
    g.add_argument("--nfd-namespace", type=NAMESPACE,
                   default=env_value(environ, "POD_NAMESPACE", NAMESPACE, "node-feature-discovery"),
                   help="namespace of the NodeFeature (default: $POD_NAMESPACE or %(default)s)")
    g.add_argument("--features-file", type=PATH, default=PATH.parse(FEATURES_FILE), help="default: %(default)s")
    g.add_argument("--kubeconfig", type=TEXT,
                   help="kubeconfig file (default: in-cluster, then $KUBECONFIG, ~/.kube/config)")
