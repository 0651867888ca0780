"""Discovery sources, one per subsystem, registered in one table."""

from . import gdr, infiniband, net, numa, nvml, pci  # noqa: F401  (importing a source module registers it)
from ._registry import Gathered, SourceError, SourceSpec, SubsystemAbsent, register, run_sources, source_table

__all__ = ["Gathered", "SourceError", "SourceSpec", "SubsystemAbsent", "register", "run_sources", "source_table"]
