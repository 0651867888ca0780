"""NVML behind one narrow port: exactly the calls discovery makes, through nvidia-ml-py.

``pynvml`` is imported inside functions (driverless discovery never loads it) and its errors are
translated here, once, into :class:`NvmlError` kinds chained ``from`` the original. Every call through
the port is counted.
A specific library is loaded as :mod:`._nvml_library` says.
"""

from __future__ import annotations

import sys

from topology import Record

from . import _record
from ._nvml_errors import NvmlError
from ._nvml_kinds import KINDS
from ._nvml_platform import PlatformCalls

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (a start-up cost) for it

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NewType, TypeVar

    Handle = NewType("Handle", object)
    T = TypeVar("T")
else:
    Handle = object  # what NVML hands back for a device, opaque (a NewType to type checkers)

CPU_SET_WORDS = 64  # 4096 CPUs, 64 per word
NODE_SET_WORDS = 16  # 1024 NUMA nodes
_AFFINITY_SCOPE_NODE = 0
_ARGUMENT_VERSION_MISMATCH = 25
_FABRIC_V3, _FABRIC_V2 = 0x03000028, 0x02000024

class RawFabric(Record):
    """``nvmlGpuFabricInfo`` fields as NVML wrote them."""

    __slots__ = __match_args__ = ("state", "status", "clique_id", "cluster_uuid", "health_mask")
    state: int
    status: int
    clique_id: int
    cluster_uuid: bytes
    health_mask: int  # v2 and v3 both carry it; 0: every field NOT_SUPPORTED

    def __init__(self, *, state: int, status: int, clique_id: int, cluster_uuid: bytes, health_mask: int = 0) -> None:
        self._fill(locals())


class RawField(Record):
    """One field value as ``nvmlDeviceGetFieldValues`` returned it."""

    __slots__ = __match_args__ = ("field_id", "code", "value")
    field_id: int
    code: int  # the per-field nvmlReturn_t
    value: int

    def __init__(self, *, field_id: int, code: int, value: int) -> None:
        self._fill(locals())


class NvmlPort(PlatformCalls):
    """The calls discovery makes, on an initialised NVML. Use :func:`open_nvml` (``._nvml_open``); ``close`` shuts
    down."""

    def __init__(self, pynvml: Any) -> None:
        self._nv = pynvml
        self.calls = 0
        self.max_links = int(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18))

    def _call(self, name: str, fn: Callable[..., T], *args: Any) -> T:
        self.calls += 1
        if _record.ACTIVE:
            _record.call_made(name)
        try:
            return fn(*args)
        except self._nv.NVMLError as exc:
            value = getattr(exc, "value", None)
            code = value if isinstance(value, int) else None
            kind = KINDS.get(code, NvmlError) if code is not None else NvmlError
            raise kind(name, code) from exc
        except UnicodeDecodeError as exc:  # pynvml decodes a string answer: bytes that are no text
            raise NvmlError(name, None, f"the answer is no UTF-8 text ({exc.object[:16]!r})") from exc

    def _text(self, name: str, fn: Callable[..., Any], *args: Any) -> str:  # an empty string is no answer
        text = str(self._call(name, fn, *args))
        if not text.strip():
            raise NvmlError(name, None, "an empty string")
        return text

    # -- system ------------------------------------------------------------------------------------
    def init(self) -> None:
        """``nvmlInit``: what :func:`open_nvml` calls first on a new port."""
        self._call("nvmlInitWithFlags", self._nv.nvmlInit)

    def close(self) -> None:
        self._call("nvmlShutdown", self._nv.nvmlShutdown)

    def driver_version(self) -> str:
        return self._text("nvmlSystemGetDriverVersion", self._nv.nvmlSystemGetDriverVersion)

    def nvml_version(self) -> str:
        return self._text("nvmlSystemGetNVMLVersion", self._nv.nvmlSystemGetNVMLVersion)

    def cuda_driver_version(self) -> int:
        return int(self._call("nvmlSystemGetCudaDriverVersion", self._nv.nvmlSystemGetCudaDriverVersion))

    def device_count(self) -> int:
        return int(self._call("nvmlDeviceGetCount_v2", self._nv.nvmlDeviceGetCount))

    def handle(self, index: int) -> Handle:
        handle: Handle = self._call("nvmlDeviceGetHandleByIndex_v2", self._nv.nvmlDeviceGetHandleByIndex, index)
        return handle

    # -- one device --------------------------------------------------------------------------------
    def index(self, h: Handle) -> int:
        return int(self._call("nvmlDeviceGetIndex", self._nv.nvmlDeviceGetIndex, h))

    def uuid(self, h: Handle) -> str:
        return self._text("nvmlDeviceGetUUID", self._nv.nvmlDeviceGetUUID, h)

    def name(self, h: Handle) -> str:
        return self._text("nvmlDeviceGetName", self._nv.nvmlDeviceGetName, h)

    def memory_total(self, h: Handle) -> int:
        return int(self._call("nvmlDeviceGetMemoryInfo", self._nv.nvmlDeviceGetMemoryInfo, h).total)

    def minor(self, h: Handle) -> int:
        return int(self._call("nvmlDeviceGetMinorNumber", self._nv.nvmlDeviceGetMinorNumber, h))

    def pci(self, h: Handle) -> tuple[str, int]:
        """(bus id as NVML spells it, ``pciDeviceId`` = device << 16 | vendor)."""
        info = self._call("nvmlDeviceGetPciInfo_v3", self._nv.nvmlDeviceGetPciInfo_v3, h)
        bus_id = info.busId  # pynvml's structure decodes on every attribute access: once
        return (bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id)), int(info.pciDeviceId)

    def numa_node_id(self, h: Handle) -> int:
        return int(self._call("nvmlDeviceGetNumaNodeId", self._nv.nvmlDeviceGetNumaNodeId, h))

    def cpu_affinity(self, h: Handle) -> tuple[int, ...]:
        words = self._call("nvmlDeviceGetCpuAffinity", self._nv.nvmlDeviceGetCpuAffinity, h, CPU_SET_WORDS)
        return _bits(words)

    def memory_affinity(self, h: Handle) -> tuple[int, ...]:
        words = self._call("nvmlDeviceGetMemoryAffinity", self._nv.nvmlDeviceGetMemoryAffinity, h,
                           NODE_SET_WORDS, _AFFINITY_SCOPE_NODE)
        return _bits(words)

    def pcie_current_gen(self, h: Handle) -> int:
        return int(self._call("nvmlDeviceGetCurrPcieLinkGeneration", self._nv.nvmlDeviceGetCurrPcieLinkGeneration, h))

    def pcie_current_width(self, h: Handle) -> int:
        return int(self._call("nvmlDeviceGetCurrPcieLinkWidth", self._nv.nvmlDeviceGetCurrPcieLinkWidth, h))

    def pcie_max_gen(self, h: Handle) -> int:
        return int(self._call("nvmlDeviceGetMaxPcieLinkGeneration", self._nv.nvmlDeviceGetMaxPcieLinkGeneration, h))

    def pcie_max_width(self, h: Handle) -> int:
        return int(self._call("nvmlDeviceGetMaxPcieLinkWidth", self._nv.nvmlDeviceGetMaxPcieLinkWidth, h))

    def compute_capability(self, h: Handle) -> tuple[int, int]:
        major, minor = self._call("nvmlDeviceGetCudaComputeCapability", self._nv.nvmlDeviceGetCudaComputeCapability, h)
        return int(major), int(minor)

    def architecture(self, h: Handle) -> int:
        return int(self._call("nvmlDeviceGetArchitecture", self._nv.nvmlDeviceGetArchitecture, h))

    def fabric(self, h: Handle) -> RawFabric:
        """``nvmlDeviceGetGpuFabricInfoV`` with the v3 struct, or v2 where the driver predates v3."""
        import ctypes  # loaded with pynvml already

        nv = self._nv
        v3 = getattr(nv, "c_nvmlGpuFabricInfo_v3_t", None)
        candidates = ([v3] if v3 is not None else []) + [nv.c_nvmlGpuFabricInfo_v2_t]
        for i, struct in enumerate(candidates):
            info = struct()
            try:
                self._call("nvmlDeviceGetGpuFabricInfoV", nv.nvmlDeviceGetGpuFabricInfoV, h, ctypes.byref(info))
            except NvmlError as exc:
                if exc.code == _ARGUMENT_VERSION_MISMATCH and i + 1 < len(candidates):
                    continue
                raise
            return RawFabric(state=int(info.state) & 0xFF, status=int(info.status), clique_id=int(info.cliqueId),
                             cluster_uuid=bytes(info.clusterUuid), health_mask=int(info.healthMask))
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def field_values(self, h: Handle, field_ids: tuple[int, ...]) -> tuple[RawField, ...]:
        values = self._call("nvmlDeviceGetFieldValues", self._nv.nvmlDeviceGetFieldValues, h, list(field_ids))
        return tuple(RawField(field_id=int(v.fieldId), code=int(v.nvmlReturn), value=int(v.value.uiVal))
                     for v in values)

    # -- MIG ---------------------------------------------------------------------------------------
    def mig_mode(self, h: Handle) -> tuple[int, int]:
        current, pending = self._call("nvmlDeviceGetMigMode", self._nv.nvmlDeviceGetMigMode, h)
        return int(current), int(pending)

    def max_mig_devices(self, h: Handle) -> int:
        return int(self._call("nvmlDeviceGetMaxMigDeviceCount", self._nv.nvmlDeviceGetMaxMigDeviceCount, h))

    def mig_device(self, h: Handle, slot: int) -> Handle:
        handle: Handle = self._call("nvmlDeviceGetMigDeviceHandleByIndex",
                                    self._nv.nvmlDeviceGetMigDeviceHandleByIndex, h, slot)
        return handle

    def gpu_instance_id(self, h: Handle) -> int:
        return int(self._call("nvmlDeviceGetGpuInstanceId", self._nv.nvmlDeviceGetGpuInstanceId, h))

    def compute_instance_id(self, h: Handle) -> int:
        return int(self._call("nvmlDeviceGetComputeInstanceId", self._nv.nvmlDeviceGetComputeInstanceId, h))

    # -- NVLink ------------------------------------------------------------------------------------
    def nvlink_active(self, h: Handle, link: int) -> bool:
        return bool(self._call("nvmlDeviceGetNvLinkState", self._nv.nvmlDeviceGetNvLinkState, h, link))

    def nvlink_version(self, h: Handle, link: int) -> int:
        return int(self._call("nvmlDeviceGetNvLinkVersion", self._nv.nvmlDeviceGetNvLinkVersion, h, link))

    def nvlink_remote_type(self, h: Handle, link: int) -> int:
        return int(self._call("nvmlDeviceGetNvLinkRemoteDeviceType", self._nv.nvmlDeviceGetNvLinkRemoteDeviceType,
                              h, link))

    def nvlink_remote_bus_id(self, h: Handle, link: int) -> str:
        bus_id = self._call("nvmlDeviceGetNvLinkRemotePciInfo_v2", self._nv.nvmlDeviceGetNvLinkRemotePciInfo, h,
                            link).busId
        return bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id)

    # -- pairs -------------------------------------------------------------------------------------
    def common_ancestor(self, a: Handle, b: Handle) -> int:
        return int(self._call("nvmlDeviceGetTopologyCommonAncestor", self._nv.nvmlDeviceGetTopologyCommonAncestor,
                              a, b))

    def p2p_status(self, a: Handle, b: Handle, caps_index: int) -> int:
        # An int, never pynvml's NVML_P2P_CAPS_INDEX_READ: that constant is the tuple (0,).
        return int(self._call("nvmlDeviceGetP2PStatus", self._nv.nvmlDeviceGetP2PStatus, a, b, int(caps_index)))


def _bits(words: Any) -> tuple[int, ...]:
    """Set bits of a mask of 64-bit words, lowest first: the words as one integer, read off its binary
    digits (a 4096-CPU mask is 64 words, nearly all zero, and a loop per word or per bit is slow)."""
    import ctypes  # loaded with pynvml already

    if isinstance(words, ctypes.Array) and ctypes.sizeof(words._type_) == 8 and sys.byteorder == "little":
        value = int.from_bytes(bytes(words), "little")  # what pynvml returns: c_ulonglong words in memory
    else:
        value = 0
        for i, word in enumerate(words):
            value |= (int(word) & _WORD) << (64 * i)
    return tuple([i for i, digit in enumerate(bin(value)[:1:-1]) if digit == "1"])


_WORD = 0xFFFFFFFFFFFFFFFF
