"""``nvmlDeviceGetPlatformInfo`` (GB200/GB300 trays): the rack's chassis serial, the slot, tray, host and
module of a GPU, as NVML writes them (struct version 2; version 1 had a rack GUID where v2 has the serial)."""

from __future__ import annotations

from topology import Record

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (a start-up cost) for it

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    T = TypeVar("T")


class RawPlatform(Record):
    """``nvmlPlatformInfo_t`` as NVML wrote it."""

    __slots__ = __match_args__ = ("chassis_serial", "slot", "tray", "host_id", "peer_type", "module_id")
    chassis_serial: str  # up to 16 characters; empty where NVML wrote none
    slot: int
    tray: int
    host_id: int
    peer_type: int
    module_id: int

    def __init__(self, *, chassis_serial: str, slot: int, tray: int, host_id: int, peer_type: int,
                 module_id: int) -> None:
        self._fill(locals())


class PlatformCalls:
    """The platform call, mixed into :class:`~._nvml_port.NvmlPort` (its ``_nv`` and ``_call``)."""

    _nv: Any

    def _call(self, name: str, fn: Callable[..., T], *args: Any) -> T:
        raise NotImplementedError

    def platform(self, h: object) -> RawPlatform:
        import ctypes  # loaded with pynvml already

        info = self._nv.c_nvmlPlatformInfo_v2_t()
        self._call("nvmlDeviceGetPlatformInfo", self._nv.nvmlDeviceGetPlatformInfo, h, ctypes.byref(info))
        return RawPlatform(chassis_serial=_text(info.chassisSerialNumber), slot=_byte(info.slotNumber),
                           tray=_byte(info.trayIndex), host_id=_byte(info.hostId), peer_type=_byte(info.peerType),
                           module_id=_byte(info.moduleId))


# ctypes hands c_char fields over as bytes (cut at the first NUL), nvidia-ml-py's structures as str
def _text(value: object) -> str:
    text = value.decode("ascii", "replace") if isinstance(value, bytes) else str(value)
    return text.split("\0", 1)[0].strip()


def _byte(value: bytes | str | int) -> int:
    if isinstance(value, bytes | str):
        return ord(value[:1]) if value else 0
    return value
