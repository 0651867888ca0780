"""Publishing to Kubernetes: node labels, DRA ResourceSlices, DeviceTaintRules and the NFD hand-off.

Each sink is desired state (pure) -> plan (pure) -> apply (thin), behind the :class:`KubeApi` port; the fleet
is read back for ``topolink cluster`` (``read_cluster``) in pages.
"""

from topology._lazy import lazy_names as _lazy_names

_TYPE_CHECKING = False  # not typing's: importing typing costs ~5 ms of start-up; mypy reads the block

if _TYPE_CHECKING:
    from ._api import Kind, KubeApi, NodeView
    from ._client import LightkubeApi
    from ._cluster import ClusterRead, read_cluster
    from ._cluster_text import cluster_document, cluster_table
    from ._config import KubePublishConfig, config_from_args, policy_params, sinks_from_config
    from ._errors import BadConfig, Conflict, Expired, Forbidden, InvalidObject, PublishError, Unavailable
    from ._flags import POLICY_SETTINGS, add_kube_args
    from ._label_sinks import FeatureFileSink, NodeFeatureSink, NodeLabelSink, plan_node_labels
    from ._labels import LabelConfig, catalogue, desired_labels
    from ._prune import PruneResult, prune
    from ._rbac import PERMISSIONS, Permission, policy_rules
    from ._reference import reference_markdown
    from ._retry import Backoff
    from ._slice_sink import ResourceSliceSink, plan_slices
    from ._slices import SliceConfig, build_slices, desired_devices
    from ._taint_sink import DeviceTaintRuleSink
    from ._taints import desired_rules

__all__ = [
    "PERMISSIONS",
    "POLICY_SETTINGS",
    "Backoff",
    "BadConfig",
    "ClusterRead",
    "Conflict",
    "DeviceTaintRuleSink",
    "Expired",
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
    "Permission",
    "PruneResult",
    "PublishError",
    "ResourceSliceSink",
    "SliceConfig",
    "Unavailable",
    "add_kube_args",
    "build_slices",
    "catalogue",
    "cluster_document",
    "cluster_table",
    "config_from_args",
    "desired_devices",
    "desired_labels",
    "desired_rules",
    "plan_node_labels",
    "plan_slices",
    "policy_params",
    "policy_rules",
    "prune",
    "read_cluster",
    "reference_markdown",
    "sinks_from_config",
]

# Names load on first use, so the serve command's flags cost nothing until serve runs.
_WHERE = {
    'Backoff': '_retry',
    'BadConfig': '_errors',
    'ClusterRead': '_cluster',
    'cluster_document': '_cluster_text',
    'cluster_table': '_cluster_text',
    'read_cluster': '_cluster',
    'Conflict': '_errors',
    'DeviceTaintRuleSink': '_taint_sink',
    'Expired': '_errors',
    'FeatureFileSink': '_label_sinks',
    'Forbidden': '_errors',
    'InvalidObject': '_errors',
    'Kind': '_api',
    'KubeApi': '_api',
    'KubePublishConfig': '_config',
    'LabelConfig': '_labels',
    'LightkubeApi': '_client',
    'NodeFeatureSink': '_label_sinks',
    'NodeLabelSink': '_label_sinks',
    'NodeView': '_api',
    'PERMISSIONS': '_rbac',
    'POLICY_SETTINGS': '_flags',
    'Permission': '_rbac',
    'PruneResult': '_prune',
    'PublishError': '_errors',
    'ResourceSliceSink': '_slice_sink',
    'SliceConfig': '_slices',
    'Unavailable': '_errors',
    'add_kube_args': '_flags',
    'build_slices': '_slices',
    'catalogue': '_labels',
    'config_from_args': '_config',
    'desired_devices': '_slices',
    'desired_labels': '_labels',
    'desired_rules': '_taints',
    'plan_node_labels': '_label_sinks',
    'plan_slices': '_slice_sink',
    'policy_params': '_config',
    'policy_rules': '_rbac',
    'prune': '_prune',
    'reference_markdown': '_reference',
    'sinks_from_config': '_config',
}


__getattr__, __dir__ = _lazy_names(__name__, _WHERE, __all__)
