"""Discovery sources, one per subsystem, registered in one table."""

from ._registry import Gathered, SourceError, SourceSpec, SubsystemAbsent, register, run_sources, source_table

__all__ = ["Gathered", "SourceError", "SourceSpec", "SubsystemAbsent", "register", "run_sources", "source_table"]
