"""The cpu backend: copies between host buffers bound to NUMA nodes, and the collectives over gloo across
processes. It runs the same plan, runner, statistics and results as the cuda backend, and runs in CI."""

from __future__ import annotations

import importlib.util
import platform
from typing import TYPE_CHECKING

from ..core import CPU_SPECS, Capabilities, Item, Kind, Pairs, Session, Waived, spec
from ..host import libnuma
from ._copy import CopySession

if TYPE_CHECKING:
    from ._gloo import GlooGroup

_COLLECTIVES = tuple(s.name for s in CPU_SPECS if s.kind is Kind.COLLECTIVE)


def _torch_version() -> str | None:
    if importlib.util.find_spec("torch") is None:
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return "unknown"


class CpuBackend:
    name = "cpu"
    simulated = ""

    def __init__(self) -> None:
        self._groups: dict[tuple[tuple[int, ...], ...], GlooGroup] = {}

    def versions(self) -> Pairs:
        out = [("python", platform.python_version()), ("libc", "-".join(platform.libc_ver())),
               ("libnuma", "yes" if libnuma() is not None else "no (mbind system call)")]
        torch = _torch_version()
        if torch:
            out.append(("torch", torch))
        return tuple(out)

    def capabilities(self) -> Capabilities:
        unavailable: list[tuple[str, str]] = []
        if _torch_version() is None:
            why = ("torch is not installed (its CPU build: pip install torch --index-url "
                   "https://download.pytorch.org/whl/cpu): gloo needs torch.distributed")
            unavailable += [(t, why) for t in _COLLECTIVES]
        return Capabilities(backend=self.name, tests=tuple(s.name for s in CPU_SPECS),
                            unavailable=tuple(unavailable), versions=self.versions())

    def open(self, item: Item) -> Session:
        if item.test in ("host_memcpy", "host_bidirectional_memcpy"):
            return CopySession(item)
        if item.test in _COLLECTIVES:
            from ._gloo import GlooGroup, GlooSession  # torch is optional

            placement = tuple(t.cpus for t in item.targets)
            group = self._groups.pop(placement, None)
            if group is None or not group.alive:
                if group is not None:
                    group.close()
                group = GlooGroup(placement)  # raises Waived without torch or gloo
            self._groups[placement] = group
            return GlooSession(item, group, spec("cpu", item.test).channels)
        raise Waived(f"the cpu backend has no test {item.test!r}")

    def close(self) -> None:
        for group in self._groups.values():
            group.close()
        self._groups.clear()
