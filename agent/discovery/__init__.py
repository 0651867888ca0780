"""Discovery: the sources read the machine, the assembly builds one ``topology.Snapshot`` from what they read.

Layers, each importing only those below it:
  ``_discover``  one pass: run the enabled sources, assemble, merge NVML, settle each source's status
  ``assemble``   facts -> entities and links (identity, PCIe tree, NICs, NVLinks, cross-checks)
  ``sources``    one per subsystem (pci, numa, nvml, infiniband, net, gdr), registered in one table
  ``access``     the file system below a movable root, NVML behind a narrow port, the discovery context
Imports ``topology``; imported by the command line and the serve loop. Names load on first use, so the
command line's ``--help`` (which reads the source table's flags) loads no source.
"""

from importlib import import_module

_TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a start-up cost)

if _TYPE_CHECKING:
    from ._discover import discover, settle
    from .access import DiscoveryContext, FsRoot
    from .sources import run_sources, source_table
    from .sources._catalog import SOURCE_FLAGS

__all__ = ["SOURCE_FLAGS", "DiscoveryContext", "FsRoot", "discover", "run_sources", "settle", "source_table"]

# Not topology's lazy_names helper: --help imports this package for the source flags and must not load the model.
_WHERE = {"discover": "_discover", "settle": "_discover", "DiscoveryContext": "access", "FsRoot": "access",
          "run_sources": "sources", "source_table": "sources", "SOURCE_FLAGS": "sources._catalog"}


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
