"""What a discovery run reads from, decided once at the composition root."""

from __future__ import annotations

from dataclasses import dataclass, field

from ._fsroot import FsRoot


@dataclass(frozen=True, slots=True, kw_only=True)
class DiscoveryContext:
    """``root`` other than ``/`` is a fixture: NVML stays off unless ``nvml_library`` names the
    fixture's own (a machine profile's test NVML), so a fixture never mixes with the live machine."""

    root: FsRoot = field(default_factory=FsRoot)
    nvml_library: str | None = None
    node_name: str | None = None

    @property
    def live(self) -> bool:
        return self.root.is_live

    @property
    def nvml_allowed(self) -> bool:
        return self.live or self.nvml_library is not None
