"""The cuda backend: CuPy runtime calls, CUDA events, RawKernel latch and pointer chase, NCCL in one
process. Importing this module needs no GPU and no CuPy: everything CUDA is loaded inside functions,
in the probe's child process."""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
from pathlib import Path
from typing import Any

from topology import BadPciAddress, canonical_bdf

from ..core._backend import Capabilities, Device, Pairs, Session
from ..core._errors import ProbeError, Waived
from ..core._gdr import TEST as GDR_TEST
from ..core._gdr import find_perftest, perftest_unavailable
from ..core._idle import read_busy
from ..core._model import Item, Kind
from ..core._specs import CUDA_SPECS
from ._legs import KERNEL_NAMES, KERNELS

ERROR_MEMORY_ALLOCATION = 2  # cudaErrorMemoryAllocation
ERROR_PEER_ACCESS_ALREADY_ENABLED = 704
HOST_ALLOC_PORTABLE_MAPPED = 1 | 2  # cudaHostAllocPortable | cudaHostAllocMapped
HOST_REGISTER_PORTABLE_MAPPED = 1 | 2  # cudaHostRegisterPortable | cudaHostRegisterMapped
MEMCPY_HOST_TO_DEVICE = 1
MEMCPY_DEVICE_TO_HOST = 2
MEMCPY_DEFAULT = 4  # cudaMemcpyDefault: direction from the (unified) addresses
ATTR_CLOCK_RATE = 13  # cudaDevAttrClockRate, kHz
ATTR_MULTIPROCESSOR_COUNT = 16
_LATENCY_TESTS = ("host_device_latency_sm", "device_to_device_latency_sm")


def cupy() -> Any:
    """CuPy, or :class:`Waived` saying how to get it."""
    try:
        import cupy as cp
    except ImportError as exc:
        raise Waived(f"CuPy is not installed (pip install 'topolink[cuda]'): {exc}") from exc
    return cp


def load_nccl() -> tuple[Any, str]:
    """``cupy.cuda.nccl`` with libnccl from the pip ``nvidia-nccl`` wheel when that is installed.

    The wheel's library is loaded first (RTLD_GLOBAL), so CuPy's NCCL module binds to it by soname.
    """
    spec = importlib.util.find_spec("nvidia.nccl") if importlib.util.find_spec("nvidia") else None
    for where in (spec.submodule_search_locations or []) if spec else []:
        lib = Path(where) / "lib" / "libnccl.so.2"
        if lib.exists():
            with contextlib.suppress(OSError):  # CuPy says why when it cannot load NCCL either
                ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
            break
    try:
        from cupy.cuda import nccl
    except ImportError as exc:
        return None, f"cupy.cuda.nccl cannot be imported: {exc}"
    if not getattr(nccl, "available", True):
        return None, "CuPy could not load libnccl.so.2 (pip install nvidia-nccl-cu12, or cu13)"
    return nccl, ""


def cuda_error(cp: Any, exc: Exception, what: str) -> Exception:
    """A CuPy error as ours: out of memory becomes MemoryError, the rest ProbeError."""
    status = getattr(exc, "status", None)
    if status == ERROR_MEMORY_ALLOCATION or isinstance(exc, cp.cuda.memory.OutOfMemoryError):
        return MemoryError(f"{what}: device out of memory")
    return ProbeError(f"{what}: {exc}")


def device_malloc(cp: Any, ordinal: int, size: int) -> int:
    with cp.cuda.Device(ordinal):
        try:
            ptr: int = cp.cuda.runtime.malloc(size)
        except cp.cuda.runtime.CUDARuntimeError as exc:
            raise cuda_error(cp, exc, f"cudaMalloc of {size} bytes on GPU {ordinal}") from exc
    return ptr


def device_pointer(cp: Any, host_ptr: int) -> int:
    """The address a GPU uses for pinned host memory (the host address itself on most UVA systems)."""
    try:
        ptr: int = cp.cuda.runtime.pointerGetAttributes(host_ptr).devicePointer
    except cp.cuda.runtime.CUDARuntimeError:
        return host_ptr
    return ptr or host_ptr


def clock_khz(cp: Any, ordinal: int) -> int:
    try:
        khz: int = cp.cuda.runtime.deviceGetAttribute(ATTR_CLOCK_RATE, ordinal)
    except cp.cuda.runtime.CUDARuntimeError:
        khz = 0
    return khz or 2_000_000  # an upper bound: the latch times out no earlier than asked


def enable_peer(cp: Any, ordinal: int, peer: int) -> None:
    """Let ``ordinal`` access ``peer``'s memory (idempotent)."""
    with cp.cuda.Device(ordinal):
        try:
            cp.cuda.runtime.deviceEnablePeerAccess(peer)
        except cp.cuda.runtime.CUDARuntimeError as exc:
            if getattr(exc, "status", None) != ERROR_PEER_ACCESS_ALREADY_ENABLED:
                raise Waived(f"peer access from GPU {ordinal} to GPU {peer} refused: {exc}") from exc


def compile_kernels(cp: Any) -> Any:
    module = cp.RawModule(code=KERNELS)
    for name in KERNEL_NAMES:
        module.get_function(name)  # compiles now: an NVRTC failure shows here, not in a timed sample
    return module


class CudaBackend:
    name = "cuda"

    def __init__(self) -> None:
        self._versions: Pairs = ()
        self._kernels: Any = None
        self._kernel_error = ""

    def versions(self) -> Pairs:
        return self._versions

    def capabilities(self) -> Capabilities:
        tests = tuple(s.name for s in CUDA_SPECS)
        busy = read_busy()  # before CUDA starts: our own context must not count
        try:
            cp = cupy()
        except Waived as exc:
            return Capabilities(backend=self.name, tests=tests, error=str(exc))
        rt = cp.cuda.runtime
        try:
            count = rt.getDeviceCount()
        except rt.CUDARuntimeError as exc:
            return Capabilities(backend=self.name, tests=tests, error=f"no usable CUDA device: {exc}")
        devices: list[Device] = []
        for d in range(count):
            try:
                bus = canonical_bdf(rt.deviceGetPCIBusId(d))
            except (rt.CUDARuntimeError, BadPciAddress):
                continue
            name = rt.getDeviceProperties(d).get("name", b"")
            devices.append(Device(id=bus, ordinal=d, name=name.decode() if isinstance(name, bytes) else str(name),
                                  busy=busy.get(bus, "")))
        peers = tuple((a.id, b.id) for a in devices for b in devices
                      if a.ordinal != b.ordinal and rt.deviceCanAccessPeer(a.ordinal, b.ordinal))
        unavailable = self._probe_optional(cp)
        return Capabilities(backend=self.name, tests=tests, devices=tuple(devices), peer_pairs=peers,
                            unavailable=unavailable, versions=self._versions)

    def _probe_optional(self, cp: Any) -> Pairs:
        rt = cp.cuda.runtime
        versions = [("cupy", cp.__version__), ("cuda_runtime", str(rt.runtimeGetVersion())),
                    ("cuda_driver", str(rt.driverGetVersion()))]
        unavailable: list[tuple[str, str]] = []
        try:
            self._kernels = compile_kernels(cp)
        except Exception as exc:  # NVRTC missing or broken: copies run without the latch
            self._kernel_error = f"NVRTC could not compile the probe kernels: {exc}"
            unavailable += [(t, self._kernel_error) for t in _LATENCY_TESTS]
        nccl, why = load_nccl()
        if nccl is None:
            unavailable.append(("all_reduce", why))
        else:
            versions.append(("nccl", str(nccl.get_version())))
        perftest = find_perftest()
        missing = perftest_unavailable(perftest)
        if missing:
            unavailable.append((GDR_TEST, missing))
        elif perftest is not None:
            versions.append(("perftest", perftest.version or perftest.path))
        self._versions = tuple(versions)
        return tuple(unavailable)

    def kernels(self, cp: Any) -> Any | None:
        """The compiled latch and pointer-chase kernels, or None when NVRTC cannot build them."""
        if self._kernels is None and not self._kernel_error:
            try:
                self._kernels = compile_kernels(cp)
            except Exception as exc:
                self._kernel_error = f"NVRTC could not compile the probe kernels: {exc}"
        return self._kernels

    def open(self, item: Item) -> Session:
        cp = cupy()
        if not self._versions:
            self._probe_optional(cp)
        from ..core._specs import spec

        kind = spec("cuda", item.test).kind
        if kind is Kind.COPY:
            from ._copy import CopySession

            return CopySession(cp, item, self.kernels(cp), self._kernel_error)
        if kind is Kind.LATENCY:
            from ._latency import LatencySession

            kernels = self.kernels(cp)
            if kernels is None:
                raise Waived(self._kernel_error)
            return LatencySession(cp, item, kernels)
        if kind is Kind.COLLECTIVE:
            from ._nccl import NcclSession

            return NcclSession(cp, item)
        from ._perftest import PerftestSession

        return PerftestSession(item)
