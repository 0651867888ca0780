"""Package names that load on first use (PEP 562), so importing a package costs only what is used."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from importlib import import_module

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a start-up cost)

if TYPE_CHECKING:
    from typing import Any


def lazy_names(package: str, where: Mapping[str, str],
               public: Sequence[str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: a name in ``where`` is imported from that private
    module the first time it is asked for, then kept as a plain attribute of the package."""

    def getattr_(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def dir_() -> list[str]:
        return sorted(public)

    return getattr_, dir_
