"""The Kubernetes publishing flags: argparse only, so adding them to a parser costs nothing at start-up."""

from __future__ import annotations

import argparse
import os

TYPE_CHECKING = False  # not typing's: importing typing costs ~5 ms of start-up; mypy reads it as True

if TYPE_CHECKING:
    from pathlib import Path

LABELS_VIA = ("node", "nodefeature", "file", "none")
FEATURES_FILE = "/etc/kubernetes/node-feature-discovery/features.d/topolink"


def path_arg(value: str) -> Path:
    """argparse ``type`` for paths; string defaults go through it too. pathlib (with fnmatch and urllib)
    costs about 10 ms, which ``topolink --help`` must not pay."""
    from pathlib import Path

    return Path(value)


def add_kube_args(parser: argparse.ArgumentParser, *, node_name: bool = True) -> None:
    """The publishing flags. ``node_name=False`` when the parser already has ``--node-name`` (discovery's)."""
    g = parser.add_argument_group("Kubernetes publishing")
    if node_name:
        g.add_argument("--node-name", help="this node's name (default: $NODE_NAME)")
    g.add_argument("--label-prefix", default="gpu.topology", help="label prefix (default: %(default)s)")
    g.add_argument("--labels-via", choices=LABELS_VIA, default="node",
                   help="node: server-side apply on the Node; nodefeature: an NFD NodeFeature; file: an NFD "
                        "features.d file (default: %(default)s)")
    g.add_argument("--compat-labels", action="store_true",
                   help="also nvidia.com/nvswitch.present, nvidia.com/nvlink.version, nvidia.com/gpu.clique "
                        "(node mode only; never where another component owns them)")
    g.add_argument("--no-resource-slices", dest="resource_slices", action="store_false",
                   help="do not publish DRA ResourceSlices")
    g.add_argument("--dra-driver-name", default="gpu.topology",
                   help="DRA driver name and attribute domain of our slices (default: %(default)s)")
    g.add_argument("--device-taints", choices=("auto", "on", "off"), default="auto",
                   help="taint our devices NoSchedule: auto = on servers >= 1.36 (default: %(default)s)")
    g.add_argument("--device-taint-rules", action="store_true",
                   help="a DeviceTaintRule for each degraded GPU of the NVIDIA GPU DRA driver")
    g.add_argument("--gpu-dra-driver", default="gpu.nvidia.com", help="that driver's name (default: %(default)s)")
    g.add_argument("--nfd-namespace", default=os.environ.get("POD_NAMESPACE", "node-feature-discovery"),
                   help="namespace of the NodeFeature (default: $POD_NAMESPACE or %(default)s)")
    g.add_argument("--features-file", type=path_arg, default=FEATURES_FILE, help="default: %(default)s")
    g.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, then $KUBECONFIG, ~/.kube/config)")
