"""topolink's model of one node: a frozen snapshot, its derived views and its renderers.

Pure: no I/O, no clock, nothing imported from outside the standard library.

Names load on first use (PEP 562): a command that prints a summary does not pay for the codec, and
``topolink --help`` pays for none of it.
"""

from ._lazy import lazy_names as _lazy_names

_TYPE_CHECKING = False  # not typing's: importing typing costs ~5 ms of start-up; mypy reads the block

if _TYPE_CHECKING:
    from ._capability import LinkCapability
    from ._carry import carry_forward
    from ._codec import (
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
    from ._cost import CostModel, collective_estimate, model_assumptions
    from ._costtypes import (
        Algorithm,
        Bottleneck,
        Collective,
        CollectiveEstimate,
        EstimateInput,
        GroupChoice,
        LeftOut,
        Placement,
    )
    from ._dot import to_dot
    from ._errors import SchemaError, TopolinkError
    from ._estimate import AllReduceEstimate, all_reduce_estimate
    from ._facts import NODE, Aspect, Fact, Knowledge, describe_unknown, facts_of, node_fact
    from ._fleet import FleetClass, FleetReport, GroupFit, NodeSummary, Outlier, fleet_report
    from ._ids import (
        BadPciAddress,
        canonical_bdf,
        format_cpulist,
        host_bridge_id,
        is_bdf,
        numa_id,
        parse_cpulist,
        parse_cpumask,
    )
    from ._limits import SNAPSHOT_LIMITS
    from ._measure import measurement_key, with_measurements
    from ._model import (
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
    )
    from ._numbers import Matrix, MatrixKind, Measurement, Stats
    from ._paths import NVML_TOPOLOGY_LEVEL, PathClass, PathIndex, PathInfo, path
    from ._placement import PLACEMENT_SIZE_BYTES, PlacementError, best_groups
    from ._provenance import Problem, Source, SourceOutcome, SourceStatus
    from ._rates import nvlink_bytes_per_second, nvlink_gen_from_nvml, pcie_bytes_per_second, pcie_gen_from_gts
    from ._render import (
        LEGEND,
        TopoRow,
        TopoTable,
        gpu_labels,
        matrix,
        ordered_gpus,
        ordered_rdma_nics,
        topo_table,
    )
    from ._summary import no_gpu_reason, summary
    from ._switch import pcie_switch
    from ._text import NAME_LIMIT, TEXT_LIMIT, shown, shown_text
    from ._views import GdrReadiness, GdrVerdict, Island, gdr_readiness, nearest_nics, numa_affinity, nvlink_islands

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
    "Collective",
    "CollectiveEstimate",
    "CostModel",
    "EstimateInput",
    "FabricInfo",
    "FabricState",
    "Fact",
    "FleetClass",
    "FleetReport",
    "GdrFacts",
    "GdrReadiness",
    "GdrVerdict",
    "Gpu",
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
    "fleet_report",
    "format_cpulist",
    "from_dict",
    "gdr_readiness",
    "gpu_labels",
    "host_bridge_id",
    "is_bdf",
    "link_id",
    "loads",
    "matrix",
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
    "pcie_bytes_per_second",
    "pcie_gen_from_gts",
    "pcie_switch",
    "shown",
    "shown_text",
    "structure_hash",
    "summary",
    "to_dict",
    "to_dot",
    "topo_table",
    "with_measurements",
]

_WHERE = {name: module for module, names in {  # name -> the private module that defines it
    '_capability': "LinkCapability",
    '_carry': "carry_forward",
    '_codec': "MAX_DOCUMENT_BYTES SCHEMA SCHEMA_V1 dumps from_dict loads parse_json structure_hash to_dict",
    '_cost': "CostModel collective_estimate model_assumptions",
    '_costtypes': (
        "Algorithm Bottleneck Collective CollectiveEstimate EstimateInput GroupChoice LeftOut "
        "Placement"
    ),
    '_dot': "to_dot",
    '_errors': "SchemaError TopolinkError",
    '_estimate': "AllReduceEstimate all_reduce_estimate",
    '_facts': "Aspect Fact Knowledge NODE describe_unknown facts_of node_fact",
    '_fleet': "FleetClass FleetReport GroupFit NodeSummary Outlier fleet_report",
    '_ids': (
        "BadPciAddress canonical_bdf format_cpulist host_bridge_id is_bdf numa_id parse_cpulist "
        "parse_cpumask"
    ),
    '_limits': "SNAPSHOT_LIMITS",
    '_measure': "measurement_key with_measurements",
    '_model': (
        "FabricInfo FabricState GdrFacts Gpu HostBridge Link LinkKind MigInstance Nic NicPort NumaNode "
        "NvSwitch PciFunction PcieLinkState PlatformInfo Snapshot link_id"
    ),
    '_numbers': "Matrix MatrixKind Measurement Stats",
    '_paths': "NVML_TOPOLOGY_LEVEL PathClass PathIndex PathInfo path",
    '_placement': "PLACEMENT_SIZE_BYTES PlacementError best_groups",
    '_provenance': "Problem Source SourceOutcome SourceStatus",
    '_rates': "nvlink_bytes_per_second nvlink_gen_from_nvml pcie_bytes_per_second pcie_gen_from_gts",
    '_render': "LEGEND TopoRow TopoTable gpu_labels matrix ordered_gpus ordered_rdma_nics topo_table",
    '_summary': "no_gpu_reason summary",
    '_switch': "pcie_switch",
    '_text': "NAME_LIMIT TEXT_LIMIT shown shown_text",
    '_views': "GdrReadiness GdrVerdict Island gdr_readiness nearest_nics numa_affinity nvlink_islands",
}.items() for name in names.split()}

__getattr__, __dir__ = _lazy_names(__name__, _WHERE, __all__)
