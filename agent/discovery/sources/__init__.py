"""Discovery sources, one per subsystem, registered in one table.

The table's names, defaults and help are also in ``_catalog``, so ``--help`` lists the ``--source.X``
flags without importing a source; the source modules (each registers itself) load on first use of the table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from importlib import import_module

from ._catalog import SOURCE_NAMES

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a start-up cost)

if TYPE_CHECKING:
    from typing import Any

    from ..access import DiscoveryContext
    from ._registry import Gathered, SourceError, SourceSpec, SubsystemAbsent, register

__all__ = ["Gathered", "SourceError", "SourceSpec", "SubsystemAbsent", "register", "run_sources", "source_table"]
_FROM_REGISTRY = frozenset({"Gathered", "SourceError", "SourceSpec", "SubsystemAbsent", "register"})


def _load_sources() -> None:
    for name in SOURCE_NAMES:
        import_module(f"{__name__}.{name}")  # importing a source module registers it


def source_table() -> Mapping[str, SourceSpec]:
    _load_sources()
    from ._registry import source_table as table

    return table()


def run_sources(ctx: DiscoveryContext, enabled: Iterable[str]) -> Gathered:
    _load_sources()
    from ._registry import run_sources as run

    return run(ctx, enabled)


def __getattr__(name: str) -> Any:
    if name in _FROM_REGISTRY:
        from . import _registry

        return getattr(_registry, name)
    if name in SOURCE_NAMES:
        return import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
