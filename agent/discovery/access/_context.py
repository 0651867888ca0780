"""What a discovery run reads from, decided once at the composition root."""

from __future__ import annotations

from topology import Record

from ._fsroot import FsRoot


class DiscoveryContext(Record):
    """``root`` other than ``/`` is a fixture: NVML stays off unless ``nvml_library`` names the
    fixture's own (a machine profile's test NVML), so a fixture never mixes with the live machine."""

    __slots__ = __match_args__ = ("root", "nvml_library", "node_name")
    root: FsRoot
    nvml_library: str | None
    node_name: str | None

    def __init__(self, *, root: FsRoot | None = None, nvml_library: str | None = None,
                 node_name: str | None = None) -> None:
        root = FsRoot() if root is None else root  # the live root: /
        self._fill(locals())

    @property
    def live(self) -> bool:
        return self.root.is_live

    @property
    def nvml_allowed(self) -> bool:
        return self.live or self.nvml_library is not None
