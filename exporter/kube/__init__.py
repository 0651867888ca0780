"""Publishing to Kubernetes: node labels, DRA ResourceSlices, DeviceTaintRules and the NFD hand-off.

Each sink is desired state (pure) -> plan (pure) -> apply (thin), behind the :class:`KubeApi` port.
"""

from ._api import Kind, KubeApi, NodeView
from ._client import LightkubeApi
from ._config import KubePublishConfig, add_kube_args, config_from_args, sinks_from_config
from ._errors import Conflict, Forbidden, InvalidObject, PublishError, Unavailable
from ._label_sinks import FeatureFileSink, NodeFeatureSink, NodeLabelSink, plan_node_labels
from ._labels import LabelConfig, catalogue, desired_labels
from ._prune import PruneResult, prune
from ._reference import reference_markdown
from ._retry import Backoff
from ._slice_sink import DeviceTaintRuleSink, ResourceSliceSink, plan_slices
from ._slices import SliceConfig, build_slices, desired_devices
from ._taints import desired_rules

__all__ = [
    "Backoff",
    "Conflict",
    "DeviceTaintRuleSink",
    "FeatureFileSink",
    "Forbidden",
    "InvalidObject",
    "Kind",
    "KubeApi",
    "KubePublishConfig",
    "LabelConfig",
    "LightkubeApi",
    "NodeFeatureSink",
    "NodeLabelSink",
    "NodeView",
    "PruneResult",
    "PublishError",
    "ResourceSliceSink",
    "SliceConfig",
    "Unavailable",
    "add_kube_args",
    "build_slices",
    "catalogue",
    "config_from_args",
    "desired_devices",
    "desired_labels",
    "desired_rules",
    "plan_node_labels",
    "plan_slices",
    "prune",
    "reference_markdown",
    "sinks_from_config",
]
