"""Publishing to Kubernetes: node labels, DRA ResourceSlices, DeviceTaintRules and the NFD hand-off.

Each sink is desired state (pure) -> plan (pure) -> apply (thin), behind the :class:`KubeApi` port; the fleet
is read back for ``topolink cluster`` (``read_cluster``) in pages.

Layers, each importing only those below it, private behind the names here: ``_config`` (flags, configuration
and the sink factory, prune, the RBAC and reference tables) above ``_sinks`` (label, slice and taint appliers,
the slice watch and cache), ``_client`` (lightkube and the watch stream) and ``_fleet`` (the fleet read and
its text), which never import each other, above ``_desired`` (labels, slices, taints and naming rules, pure),
above ``_api`` (the ``KubeApi`` port, its errors, the retry rule). import-linter checks the order
(pyproject.toml).

Imports: ``exporter._core`` (the sink protocol, file I/O, the health rule), ``topology``.
``_controller`` (the fleet controller: leader election, informers, the sync of what ``_fleet._wanted`` wants)
sits between ``_config`` and the layer it composes.

Imported by: ``agent`` (``serve``, ``prune``, ``cluster``, ``controller``), through the names below.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from topology._lazy import lazy_names as _lazy_names

if _TYPE_CHECKING:
    from ._api._api import Kind, KubeApi, NodeView
    from ._api._errors import BadConfig, Conflict, Expired, Forbidden, InvalidObject, PublishError, Unavailable
    from ._api._retry import Backoff
    from ._client._client import LightkubeApi
    from ._client._node_status import LightkubeNodeApi
    from ._config._config import KubePublishConfig, config_from_args, policy_params, sinks_from_config
    from ._config._flags import POLICY_SETTINGS, add_kube_args
    from ._config._prune import PruneResult, prune
    from ._config._rbac import PERMISSIONS, Permission, policy_rules
    from ._config._reference import reference_markdown
    from ._controller._controller import Controller, ControllerConfig
    from ._controller._lease import LeaseTimes
    from ._desired._claims import ClaimClass, ClaimConfig, ClaimPlan, claim_plan, node_class
    from ._desired._labels import LabelConfig, catalogue, desired_labels
    from ._desired._node_condition import CONDITION, verdict
    from ._desired._slices import SliceConfig, build_slices, desired_devices
    from ._desired._taints import desired_rules
    from ._fleet._claims_read import ClaimRead, read_claim_classes
    from ._fleet._claims_text import claim_classes_document, claim_classes_table
    from ._fleet._cluster import ClusterRead, read_cluster
    from ._fleet._cluster_text import cluster_document, cluster_table
    from ._fleet._saved import MAX_SAVED_BYTES, SavedApi, read_saved
    from ._fleet._schedulers_text import EMITS, emit_text, read_node_labels
    from ._fleet._slurm import NoBlocks
    from ._fleet._wanted import PARTS, Parts, Wanted, kind_of, wanted
    from ._sinks._label_sinks import FeatureFileSink, NodeFeatureSink, NodeLabelSink, plan_node_labels
    from ._sinks._node_condition_sink import NodeConditionSink
    from ._sinks._slice_sink import ResourceSliceSink, plan_slices
    from ._sinks._taint_sink import DeviceTaintRuleSink

__all__ = [
    "CONDITION",
    "EMITS",
    "MAX_SAVED_BYTES",
    "PARTS",
    "PERMISSIONS",
    "POLICY_SETTINGS",
    "Backoff",
    "BadConfig",
    "ClaimClass",
    "ClaimConfig",
    "ClaimPlan",
    "ClaimRead",
    "ClusterRead",
    "Conflict",
    "Controller",
    "ControllerConfig",
    "DeviceTaintRuleSink",
    "Expired",
    "FeatureFileSink",
    "Forbidden",
    "InvalidObject",
    "Kind",
    "KubeApi",
    "KubePublishConfig",
    "LabelConfig",
    "LeaseTimes",
    "LightkubeApi",
    "LightkubeNodeApi",
    "NoBlocks",
    "NodeConditionSink",
    "NodeFeatureSink",
    "NodeLabelSink",
    "NodeView",
    "Parts",
    "Permission",
    "PruneResult",
    "PublishError",
    "ResourceSliceSink",
    "SavedApi",
    "SliceConfig",
    "Unavailable",
    "Wanted",
    "add_kube_args",
    "build_slices",
    "catalogue",
    "claim_classes_document",
    "claim_classes_table",
    "claim_plan",
    "cluster_document",
    "cluster_table",
    "config_from_args",
    "desired_devices",
    "desired_labels",
    "desired_rules",
    "emit_text",
    "kind_of",
    "node_class",
    "plan_node_labels",
    "plan_slices",
    "policy_params",
    "policy_rules",
    "prune",
    "read_claim_classes",
    "read_cluster",
    "read_node_labels",
    "read_saved",
    "reference_markdown",
    "sinks_from_config",
    "verdict",
    "wanted",
]

# Names load on first use, so the serve command's flags cost nothing until serve runs.
_WHERE = {
    'Controller': '_controller._controller',
    'ControllerConfig': '_controller._controller',
    'LeaseTimes': '_controller._lease',
    'PARTS': '_fleet._wanted',
    'Parts': '_fleet._wanted',
    'Wanted': '_fleet._wanted',
    'kind_of': '_fleet._wanted',
    'wanted': '_fleet._wanted',
    'Backoff': '_api._retry',
    'BadConfig': '_api._errors',
    'ClaimClass': '_desired._claims',
    'ClaimConfig': '_desired._claims',
    'ClaimPlan': '_desired._claims',
    'ClaimRead': '_fleet._claims_read',
    'SavedApi': '_fleet._saved',
    'claim_classes_document': '_fleet._claims_text',
    'claim_classes_table': '_fleet._claims_text',
    'claim_plan': '_desired._claims',
    'node_class': '_desired._claims',
    'read_claim_classes': '_fleet._claims_read',
    'ClusterRead': '_fleet._cluster',
    'cluster_document': '_fleet._cluster_text',
    'cluster_table': '_fleet._cluster_text',
    'read_cluster': '_fleet._cluster',
    'read_saved': '_fleet._saved',
    'MAX_SAVED_BYTES': '_fleet._saved',
    'EMITS': '_fleet._schedulers_text',
    'emit_text': '_fleet._schedulers_text',
    'read_node_labels': '_fleet._schedulers_text',
    'NoBlocks': '_fleet._slurm',
    'Conflict': '_api._errors',
    'DeviceTaintRuleSink': '_sinks._taint_sink',
    'Expired': '_api._errors',
    'FeatureFileSink': '_sinks._label_sinks',
    'Forbidden': '_api._errors',
    'InvalidObject': '_api._errors',
    'Kind': '_api._api',
    'KubeApi': '_api._api',
    'KubePublishConfig': '_config._config',
    'LabelConfig': '_desired._labels',
    'LightkubeApi': '_client._client',
    'LightkubeNodeApi': '_client._node_status',
    'NodeConditionSink': '_sinks._node_condition_sink',
    'CONDITION': '_desired._node_condition',
    'verdict': '_desired._node_condition',
    'NodeFeatureSink': '_sinks._label_sinks',
    'NodeLabelSink': '_sinks._label_sinks',
    'NodeView': '_api._api',
    'PERMISSIONS': '_config._rbac',
    'POLICY_SETTINGS': '_config._flags',
    'Permission': '_config._rbac',
    'PruneResult': '_config._prune',
    'PublishError': '_api._errors',
    'ResourceSliceSink': '_sinks._slice_sink',
    'SliceConfig': '_desired._slices',
    'Unavailable': '_api._errors',
    'add_kube_args': '_config._flags',
    'build_slices': '_desired._slices',
    'catalogue': '_desired._labels',
    'config_from_args': '_config._config',
    'desired_devices': '_desired._slices',
    'desired_labels': '_desired._labels',
    'desired_rules': '_desired._taints',
    'plan_node_labels': '_sinks._label_sinks',
    'plan_slices': '_sinks._slice_sink',
    'policy_params': '_config._config',
    'policy_rules': '_config._rbac',
    'prune': '_config._prune',
    'reference_markdown': '_config._reference',
    'sinks_from_config': '_config._config',
}


__getattr__, __dir__ = _lazy_names(__name__, _WHERE, __all__)
