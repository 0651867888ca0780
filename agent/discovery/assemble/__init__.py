"""Assembly: what the sources read becomes one snapshot's entities and links.

``_snapshot`` builds the snapshot from the sysfs sources' facts (``_pci``: functions, GPUs, host bridges
and NVSwitches on the bus; ``_nic``: RDMA devices and network interfaces), then ``_nvml`` merges what NVML
said (identity, NVLinks, pairs) and cross-checks it with the bus, or ``_nvml_state`` settles what NVML's
silence means given the GPUs on the bus; last, ``_crosscheck`` turns every contradiction between two
sources' readings into a problem. Pure: no reads, no clock.
Imports the sources' fact types and ``topology``; imported by ``agent.discovery._discover``.
"""

from topology._lazy import lazy_names as _lazy_names

from ._crosscheck import CHECK_OF, CHECKS, cross_check, witnessed
from ._nvml_state import NVML_ONLY, nvml_unread
from ._snapshot import assemble
from ._witness import WITNESSES, Overrule, Stage, Witness, emulated_port_above, witness, witness_markdown

_TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a start-up cost)

if _TYPE_CHECKING:
    from ._nvml import merge_nvml

__all__ = [
           "CHECKS",
           "CHECK_OF",
           "FACT_ROWS",
           "NAMES_ONLY",
           "NVML_ONLY",
           "SESSION_CALLS",
           "WITNESSES",
           "FactRow",
           "Overrule",
           "Stage",
           "Witness",
           "alone_where",
           "assemble",
           "cross_check",
           "emulated_port_above",
           "fact_table_markdown",
           "merge_nvml",
           "nvml_unread",
           "one_witness",
           "rows_calling",
           "rows_reading",
           "witness",
           "witness_markdown",
           "witnessed",
]

# The facts table documents discovery and drives the truth sweep; a pass never reads it, so it loads on first use.
_WHERE = {name: "_fact_table" for name in ("FACT_ROWS", "NAMES_ONLY", "SESSION_CALLS", "FactRow", "alone_where",
                                           "fact_table_markdown", "one_witness", "rows_calling", "rows_reading")}
# NVML's merge (its NVLinks, identities and pairs) loads where NVML gave facts to merge.
_WHERE["merge_nvml"] = "_nvml"
__getattr__, __dir__ = _lazy_names(__name__, _WHERE, __all__)
