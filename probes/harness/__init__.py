"""The harness: plans which tests run where (pure), runs a pass's items in one child process with a
wall-time and memory budget per item (killed and reported when it overruns, hangs or dies; the next item
gets a fresh child), warms up, times and verifies through the backend seam, turns timings into
measurements, renders the report, and offers the public entry points (run, self-test, join the results
to a snapshot).

Imports: ``probes.core`` and ``topology``. It names a backend only as a string for the registry, so it
imports neither ``probes.cpu`` nor ``probes.cuda``; the child process loads the one it is asked for.
Imported by: ``probes`` (the public names) and the node agent's probe loop (``ProbeProcess``,
``assemble``).
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from topology._lazy import lazy_names as _lazy_names

if _TYPE_CHECKING:
    from ._api import (
        READABLE_REPORT_SCHEMAS,
        REPORT_SCHEMA,
        SelftestLine,
        apply_report,
        report_json,
        report_to_dict,
        run_probes,
        selftest,
        snapshot_from_caps,
    )
    from ._plan import make_plan
    from ._process import ProbeProcess, ask_capabilities, run_items
    from ._report import render_bandwidth_matrix, render_report
    from ._runner import assemble

__all__ = [
    "READABLE_REPORT_SCHEMAS",
    "REPORT_SCHEMA",
    "ProbeProcess",
    "SelftestLine",
    "apply_report",
    "ask_capabilities",
    "assemble",
    "make_plan",
    "render_bandwidth_matrix",
    "render_report",
    "report_json",
    "report_to_dict",
    "run_items",
    "run_probes",
    "selftest",
    "snapshot_from_caps",
]

_WHERE = {
    'READABLE_REPORT_SCHEMAS': '_api',
    'REPORT_SCHEMA': '_api',
    'SelftestLine': '_api',
    'apply_report': '_api',
    'report_json': '_api',
    'report_to_dict': '_api',
    'run_probes': '_api',
    'selftest': '_api',
    'snapshot_from_caps': '_api',
    'make_plan': '_plan',
    'ProbeProcess': '_process',
    'ask_capabilities': '_process',
    'run_items': '_process',
    'render_bandwidth_matrix': '_report',
    'render_report': '_report',
    'assemble': '_runner',
}


__getattr__, __dir__ = _lazy_names(__name__, _WHERE, __all__)
