"""topolink's model of one node: a frozen snapshot, its derived views and its renderers.

Pure: no I/O, no clock, nothing imported from outside the standard library.

Names load on first use (PEP 562): a command that prints a summary does not pay for the codec, and
``topolink --help`` pays for none of it.
"""

from ._lazy import lazy_names as _lazy_names

_TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a start-up cost)

if _TYPE_CHECKING:
    from .codec._json_codec import (
        MAX_DOCUMENT_BYTES,
        SCHEMA,
        SCHEMA_V1,
        dumps,
        from_dict,
        loads,
        parse_json,
        structure_hash,
        to_dict,
    )
    from .fabric._capability import LinkCapability
    from .fabric._paths import NVML_TOPOLOGY_LEVEL, PathClass, PathIndex, PathInfo, path, path_index
    from .fabric._pcie_switch import pcie_switch, pcie_switches
    from .fabric._physics import GpuFamily, family_of_device, family_of_name
    from .fabric._physics_rules import Breach, measured_breach, physics_breaches
    from .fabric._rates import nvlink_bytes_per_second, nvlink_gen_from_nvml, pcie_bytes_per_second, pcie_gen_from_gts
    from .fabric._views import (
        GdrReadiness,
        GdrVerdict,
        GpuNicClasses,
        Island,
        gdr_readiness,
        gpu_nic_classes,
        nearest_nics,
        numa_affinity,
        nvlink_islands,
    )
    from .model._carry_forward import carry_forward
    from .model._device_order import ordered_gpus, ordered_rdma_nics
    from .model._entities import (
        FabricInfo,
        FabricState,
        GdrFacts,
        Gpu,
        HostBridge,
        Link,
        LinkKind,
        MigInstance,
        Nic,
        NicPort,
        NumaNode,
        NvSwitch,
        PcieLinkState,
        PciFunction,
        PlatformInfo,
        Snapshot,
        link_id,
        per_snapshot,
    )
    from .model._errors import SchemaError, TopolinkError
    from .model._facts import NODE, Aspect, Fact, Knowledge, describe_unknown, facts_of, node_fact
    from .model._ids import (
        BadPciAddress,
        canonical_bdf,
        format_cpulist,
        host_bridge_id,
        is_bdf,
        numa_id,
        parse_cpulist,
        parse_cpumask,
    )
    from .model._measurement import Matrix, MatrixKind, Measurement, Stats
    from .model._provenance import Problem, Source, SourceOutcome, SourceStatus
    from .model._record import FrozenRecordError, Record, replace
    from .model._snapshot_limits import SNAPSHOT_LIMITS
    from .model._text_bounds import NAME_LIMIT, TEXT_LIMIT, shown, shown_text
    from .model._with_measurements import measurement_key, with_measurements
    from .placement._all_reduce import AllReduceEstimate, all_reduce_estimate
    from .placement._best_groups import PLACEMENT_SIZE_BYTES, PlacementError, best_groups
    from .placement._cost_model import CostModel, collective_estimate, model_assumptions
    from .placement._cost_types import (
        Algorithm,
        Bottleneck,
        Collective,
        CollectiveEstimate,
        EstimateInput,
        GroupChoice,
        LeftOut,
        Placement,
    )
    from .placement._fleet_report import FleetClass, FleetReport, GroupFit, NodeSummary, Outlier, fleet_report
    from .render._dot import to_dot
    from .render._no_gpu import no_gpu_reason
    from .render._summary import summary
    from .render._topo_table import (
        LEGEND,
        TopoRow,
        TopoTable,
        gpu_labels,
        matrix,
        topo_table,
    )

__all__ = [
    "LEGEND",
    "MAX_DOCUMENT_BYTES",
    "NAME_LIMIT",
    "NODE",
    "NVML_TOPOLOGY_LEVEL",
    "PLACEMENT_SIZE_BYTES",
    "SCHEMA",
    "SCHEMA_V1",
    "SNAPSHOT_LIMITS",
    "TEXT_LIMIT",
    "Algorithm",
    "AllReduceEstimate",
    "Aspect",
    "BadPciAddress",
    "Bottleneck",
    "Breach",
    "Collective",
    "CollectiveEstimate",
    "CostModel",
    "EstimateInput",
    "FabricInfo",
    "FabricState",
    "Fact",
    "FleetClass",
    "FleetReport",
    "FrozenRecordError",
    "GdrFacts",
    "GdrReadiness",
    "GdrVerdict",
    "Gpu",
    "GpuFamily",
    "GpuNicClasses",
    "GroupChoice",
    "GroupFit",
    "HostBridge",
    "Island",
    "Knowledge",
    "LeftOut",
    "Link",
    "LinkCapability",
    "LinkKind",
    "Matrix",
    "MatrixKind",
    "Measurement",
    "MigInstance",
    "Nic",
    "NicPort",
    "NodeSummary",
    "NumaNode",
    "NvSwitch",
    "Outlier",
    "PathClass",
    "PathIndex",
    "PathInfo",
    "PciFunction",
    "PcieLinkState",
    "Placement",
    "PlacementError",
    "PlatformInfo",
    "Problem",
    "Record",
    "SchemaError",
    "Snapshot",
    "Source",
    "SourceOutcome",
    "SourceStatus",
    "Stats",
    "TopoRow",
    "TopoTable",
    "TopolinkError",
    "all_reduce_estimate",
    "best_groups",
    "canonical_bdf",
    "carry_forward",
    "collective_estimate",
    "describe_unknown",
    "dumps",
    "facts_of",
    "family_of_device",
    "family_of_name",
    "fleet_report",
    "format_cpulist",
    "from_dict",
    "gdr_readiness",
    "gpu_labels",
    "gpu_nic_classes",
    "host_bridge_id",
    "is_bdf",
    "link_id",
    "loads",
    "matrix",
    "measured_breach",
    "measurement_key",
    "model_assumptions",
    "nearest_nics",
    "no_gpu_reason",
    "node_fact",
    "numa_affinity",
    "numa_id",
    "nvlink_bytes_per_second",
    "nvlink_gen_from_nvml",
    "nvlink_islands",
    "ordered_gpus",
    "ordered_rdma_nics",
    "parse_cpulist",
    "parse_cpumask",
    "parse_json",
    "path",
    "path_index",
    "pcie_bytes_per_second",
    "pcie_gen_from_gts",
    "pcie_switch",
    "pcie_switches",
    "per_snapshot",
    "physics_breaches",
    "replace",
    "shown",
    "shown_text",
    "structure_hash",
    "summary",
    "to_dict",
    "to_dot",
    "topo_table",
    "with_measurements",
]

_WHERE = {name: module for module, names in {  # name -> the subpackage's private module that defines it
    'fabric._capability': "LinkCapability",
    'model._carry_forward': "carry_forward",
    'codec._json_codec': "MAX_DOCUMENT_BYTES SCHEMA SCHEMA_V1 dumps from_dict loads parse_json structure_hash to_dict",
    'placement._cost_model': "CostModel collective_estimate model_assumptions",
    'placement._cost_types': (
        "Algorithm Bottleneck Collective CollectiveEstimate EstimateInput GroupChoice LeftOut "
        "Placement"
    ),
    'render._dot': "to_dot",
    'model._errors': "SchemaError TopolinkError",
    'placement._all_reduce': "AllReduceEstimate all_reduce_estimate",
    'model._facts': "Aspect Fact Knowledge NODE describe_unknown facts_of node_fact",
    'placement._fleet_report': "FleetClass FleetReport GroupFit NodeSummary Outlier fleet_report",
    'model._ids': (
        "BadPciAddress canonical_bdf format_cpulist host_bridge_id is_bdf numa_id parse_cpulist "
        "parse_cpumask"
    ),
    'model._snapshot_limits': "SNAPSHOT_LIMITS",
    'model._record': "FrozenRecordError Record replace",
    'model._with_measurements': "measurement_key with_measurements",
    'model._entities': (
        "FabricInfo FabricState GdrFacts Gpu HostBridge Link LinkKind MigInstance Nic NicPort NumaNode "
        "NvSwitch PciFunction PcieLinkState PlatformInfo Snapshot link_id per_snapshot"
    ),
    'model._measurement': "Matrix MatrixKind Measurement Stats",
    'fabric._paths': "NVML_TOPOLOGY_LEVEL PathClass PathIndex PathInfo path path_index",
    'fabric._physics': "GpuFamily family_of_device family_of_name",
    'fabric._physics_rules': "Breach measured_breach physics_breaches",
    'placement._best_groups': "PLACEMENT_SIZE_BYTES PlacementError best_groups",
    'model._provenance': "Problem Source SourceOutcome SourceStatus",
    'fabric._rates': "nvlink_bytes_per_second nvlink_gen_from_nvml pcie_bytes_per_second pcie_gen_from_gts",
    'render._topo_table': "LEGEND TopoRow TopoTable gpu_labels matrix topo_table",
    'model._device_order': "ordered_gpus ordered_rdma_nics",
    'render._summary': "summary",
    'render._no_gpu': "no_gpu_reason",
    'fabric._pcie_switch': "pcie_switch pcie_switches",
    'model._text_bounds': "NAME_LIMIT TEXT_LIMIT shown shown_text",
    'fabric._views': ("GdrReadiness GdrVerdict GpuNicClasses Island gdr_readiness gpu_nic_classes nearest_nics "
                      "numa_affinity nvlink_islands"),
}.items() for name in names.split()}

__getattr__, __dir__ = _lazy_names(__name__, _WHERE, __all__)
