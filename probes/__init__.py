"""Bandwidth and latency probes: plan (pure) -> backend (cuda | cpu) -> statistics -> measurements.

Every probe runs in a child process with a wall-time and memory budget. Tests are defined the way
nvbandwidth, nccl-tests and perftest define them; a test that cannot run is waived with its reason,
never reported as a number.
"""

from .core._backend import BACKENDS, Capabilities, Device
from .core._errors import ProbeError, Waived
from .core._model import Item, Plan, ProbeOutcome, ProbeReport, Status, Target, Waiver
from .core._profiles import FULL, PROFILES, QUICK, SELFTEST, Profile, profile
from .core._specs import BUS_FACTORS, CPU_SPECS, CUDA_SPECS, ProbeSpec, specs_for
from .core._stats import summarize
from .harness._api import (
    REPORT_SCHEMA,
    SelftestLine,
    apply_report,
    choose_backend,
    report_json,
    report_to_dict,
    run_probes,
    selftest,
    snapshot_from_caps,
)
from .harness._plan import make_plan
from .harness._report import render_bandwidth_matrix, render_report

__all__ = [
    "BACKENDS",
    "BUS_FACTORS",
    "CPU_SPECS",
    "CUDA_SPECS",
    "FULL",
    "PROFILES",
    "QUICK",
    "REPORT_SCHEMA",
    "SELFTEST",
    "Capabilities",
    "Device",
    "Item",
    "Plan",
    "ProbeError",
    "ProbeOutcome",
    "ProbeReport",
    "ProbeSpec",
    "Profile",
    "SelftestLine",
    "Status",
    "Target",
    "Waived",
    "Waiver",
    "apply_report",
    "choose_backend",
    "make_plan",
    "profile",
    "render_bandwidth_matrix",
    "render_report",
    "report_json",
    "report_to_dict",
    "run_probes",
    "selftest",
    "snapshot_from_caps",
    "specs_for",
    "summarize",
]
