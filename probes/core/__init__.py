"""The words every room of ``probes`` shares: the records of a plan and its results, the errors, the probe
definitions (specs), the profiles, the statistics, and the seam between the harness and a backend (what a
backend can do, the Backend/Session/Workload protocols, the registry that loads a backend by name). Also
the two facts about the machine that plans and backends both consult: GPU idleness and GPUDirect readiness.

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
from ._errors import ProbeError, Waived
from ._gdr import GDR_TEST
from ._idle import read_busy
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
from ._specs import (
    BUS_FACTORS,
    CPU_SPECS,
    CUDA_SPECS,
    HOST,
    ProbeSpec,
    Subjects,
    all_reduce_bytes,
    host_nodes,
    rotation_offset,
    spec,
    specs_for,
)
from ._stats import summarize

__all__ = [
    "BACKENDS",
    "BUS_FACTORS",
    "CPU_SPECS",
    "CUDA_SPECS",
    "FULL",
    "GDR_TEST",
    "HOST",
    "PROFILES",
    "QUICK",
    "SELFTEST",
    "Backend",
    "Capabilities",
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
    "host_nodes",
    "item_from_dict",
    "item_to_dict",
    "load_backend",
    "profile",
    "raw_from_dict",
    "raw_to_dict",
    "read_busy",
    "rotation_offset",
    "spec",
    "specs_for",
    "summarize",
]
