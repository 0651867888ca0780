"""What every CUDA session shares: the CUDA runtime constants it passes, CuPy and NCCL loaded on demand
(a missing one is a waiver with the way to get it), and the runtime calls with their errors made ours
(out of memory is MemoryError, the rest ProbeError). Nothing here imports CuPy at module load."""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core import ProbeError, Waived

ERROR_MEMORY_ALLOCATION = 2  # cudaErrorMemoryAllocation
ERROR_PEER_ACCESS_ALREADY_ENABLED = 704
ERROR_PEER_ACCESS_NOT_ENABLED = 705
ERROR_TOO_MANY_PEERS = 711  # cudaErrorTooManyPeers: a device maps at most 8 peers at once
HOST_ALLOC_PORTABLE_MAPPED = 1 | 2  # cudaHostAllocPortable | cudaHostAllocMapped
HOST_REGISTER_PORTABLE_MAPPED = 1 | 2  # cudaHostRegisterPortable | cudaHostRegisterMapped
MEMCPY_HOST_TO_DEVICE = 1
MEMCPY_DEVICE_TO_HOST = 2
MEMCPY_DEFAULT = 4  # cudaMemcpyDefault: direction from the (unified) addresses
ATTR_CLOCK_RATE = 13  # cudaDevAttrClockRate, kHz
ATTR_MULTIPROCESSOR_COUNT = 16


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


NCCL_ALLTOALL_SINCE = 22800  # NCCL 2.28 added ncclAlltoAll; nccl-tests calls it from then on
AllToAll = Callable[[Any, int, int, int, int, int], None]  # (comm, send, recv, count, dtype, stream)


def nccl_alltoall(nccl: Any) -> AllToAll | None:
    """``ncclAlltoAll`` where the loaded NCCL has it (2.28 and later): CuPy's binding when it has one, else
    the library's own symbol called on the communicator's handle; None before 2.28 (send/recv then)."""
    if int(nccl.get_version()) < NCCL_ALLTOALL_SINCE:
        return None
    if hasattr(nccl.NcclCommunicator, "allToAll"):
        return lambda comm, s, r, n, dtype, stream: comm.allToAll(s, r, n, dtype, stream)
    try:
        fn = ctypes.CDLL("libnccl.so.2").ncclAlltoAll  # the library CuPy loaded (same soname)
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    fn.restype = ctypes.c_int

    def call(comm: Any, s: int, r: int, n: int, dtype: int, stream: int) -> None:  # noqa: PLR0917 - NCCL's
        status = fn(s, r, n, dtype, comm.ptr, stream)
        if status:
            raise ProbeError(f"ncclAlltoAll returned {status}")

    return call


def host_clock(cp: Any) -> Callable[[], float]:
    """The host's wall clock: ``time.perf_counter``, or the simulated host's when the CuPy in use is a
    simulation of a machine (which then says so, and keeps its host and GPU clocks in one time base)."""
    simulated: Callable[[], float] | None = getattr(cp, "TOPOLINK_HOST_CLOCK", None)
    return simulated if simulated is not None and bool(getattr(cp, "TOPOLINK_SIMULATION", None)) else time.perf_counter


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


def enable_peer(cp: Any, ordinal: int, peer: int) -> bool:
    """Let ``ordinal`` access ``peer``'s memory; True when this call enabled it, False when it already was."""
    with cp.cuda.Device(ordinal):
        try:
            cp.cuda.runtime.deviceEnablePeerAccess(peer)
        except cp.cuda.runtime.CUDARuntimeError as exc:
            if getattr(exc, "status", None) == ERROR_PEER_ACCESS_ALREADY_ENABLED:
                return False
            raise Waived(f"peer access from GPU {ordinal} to GPU {peer} refused: {exc}") from exc
    return True


def disable_peer(cp: Any, ordinal: int, peer: int) -> None:
    """Unmap ``peer``'s memory from ``ordinal`` (a device maps at most 8 peers at once)."""
    with cp.cuda.Device(ordinal):
        try:
            cp.cuda.runtime.deviceDisablePeerAccess(peer)
        except cp.cuda.runtime.CUDARuntimeError as exc:
            if getattr(exc, "status", None) != ERROR_PEER_ACCESS_NOT_ENABLED:
                raise ProbeError(f"could not disable peer access from GPU {ordinal} to GPU {peer}: {exc}") from exc
