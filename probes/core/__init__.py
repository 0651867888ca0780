"""The words every room of ``probes`` shares: the records of a plan and its results, the errors, the probe
definitions (specs and the catalogue of tests), nccl-tests' arithmetic for the collectives, the profiles,
the statistics, and the seam between the harness and a backend (what a backend can do, the
Backend/Session/Workload protocols, the registry that loads a backend by name). Also the two facts about
the machine that plans and backends both consult: GPU idleness and GPUDirect readiness.

Imports: ``topology`` and the standard library only (``pynvml`` lazily, in :func:`read_busy`).
Imported by: every other room (``harness``, ``cpu``, ``cuda``, ``host``) and ``probes`` itself.
"""

from ._backend import (
    BACKENDS,
    Backend,
    Capabilities,
    Device,
    Pairs,
    Session,
    Workload,
    caps_from_dict,
    caps_to_dict,
    load_backend,
)
from ._catalogue import CPU_SPECS, CUDA_SPECS, SM_TESTS, spec, specs_for
from ._collectives import (
    BUS_FACTORS,
    COLLECTIVES,
    FLOAT_BYTES,
    IN_PLACE,
    OUT_OF_PLACE,
    Counts,
    Segment,
    all_reduce_bytes,
    checked,
    counts,
    element_values,
    modes,
    moved,
    received_segments,
    rotation_offset,
    sent_segment,
)
from ._errors import ProbeError, Waived
from ._gdr import GDR_TEST
from ._idle import ours, read_busy
from ._model import (
    Item,
    Kind,
    Plan,
    ProbeOutcome,
    ProbeReport,
    RawResult,
    RawRow,
    Status,
    Target,
    Waiver,
    item_from_dict,
    item_to_dict,
    raw_from_dict,
    raw_to_dict,
)
from ._profiles import FULL, PROFILES, QUICK, SELFTEST, GiB, MiB, Profile, profile
from ._specs import HOST, ProbeSpec, Subjects, host_nodes
from ._stats import summarize

__all__ = [
    "BACKENDS",
    "BUS_FACTORS",
    "COLLECTIVES",
    "CPU_SPECS",
    "CUDA_SPECS",
    "FLOAT_BYTES",
    "FULL",
    "GDR_TEST",
    "HOST",
    "IN_PLACE",
    "OUT_OF_PLACE",
    "PROFILES",
    "QUICK",
    "SELFTEST",
    "SM_TESTS",
    "Backend",
    "Capabilities",
    "Counts",
    "Device",
    "GiB",
    "Item",
    "Kind",
    "MiB",
    "Pairs",
    "Plan",
    "ProbeError",
    "ProbeOutcome",
    "ProbeReport",
    "ProbeSpec",
    "Profile",
    "RawResult",
    "RawRow",
    "Segment",
    "Session",
    "Status",
    "Subjects",
    "Target",
    "Waived",
    "Waiver",
    "Workload",
    "all_reduce_bytes",
    "caps_from_dict",
    "caps_to_dict",
    "checked",
    "counts",
    "element_values",
    "host_nodes",
    "item_from_dict",
    "item_to_dict",
    "load_backend",
    "modes",
    "moved",
    "ours",
    "profile",
    "raw_from_dict",
    "raw_to_dict",
    "read_busy",
    "received_segments",
    "rotation_offset",
    "sent_segment",
    "spec",
    "specs_for",
    "summarize",
]
