"""Memory and gating every CUDA session shares: buffers on a GPU (cudaMalloc) or on a host NUMA node
(bound, first-touched, checked, then pinned with cudaHostRegister), the latch that holds streams until the
host releases them, and the random pattern a copy moves with the check that it arrived (a kernel on the
GPU that holds the buffer; memcmp for host memory), never inside a timed window.
"""

from __future__ import annotations

import ctypes
import importlib
import os
from typing import Any

from ..core import Target
from ..host import PATTERN_BYTES, HostBuffer, same_bytes
from ._kernels import LATCH_TIMEOUT_MS
from ._runtime import (
    ATTR_MULTIPROCESSOR_COUNT,
    HOST_ALLOC_PORTABLE_MAPPED,
    HOST_REGISTER_PORTABLE_MAPPED,
    MEMCPY_DEFAULT,
    MEMCPY_DEVICE_TO_HOST,
    clock_khz,
    cuda_error,
    device_malloc,
    device_pointer,
)

_CHUNK = 4 * 1024 * 1024
HOST_BUFFER_HOW = ("anonymous mmap bound to the node with mbind, first-touched by a thread on the node's CPUs, "
                   "placement checked with move_pages, pinned with cudaHostRegister(Portable|Mapped); "
                   "nvbandwidth uses cuMemHostAlloc(Portable) after setting the thread's CPU affinity")


class Buffer:
    """``size`` bytes on a GPU (cudaMalloc) or on a host node (bound, touched, then registered)."""

    def __init__(self, cp: Any, target: Target, size: int) -> None:
        self.cp, self.target, self.size = cp, target, size
        self.host: HostBuffer | None = None
        self.ordinal = target.index if target.kind == "gpu" and target.index is not None else 0
        if target.kind == "gpu":
            self.ptr = self.device_ptr = device_malloc(cp, self.ordinal, size)
            return
        self.host = HostBuffer(size, target.index, target.cpus)
        self.ptr = self.host.ptr
        try:
            cp.cuda.runtime.hostRegister(self.ptr, size, HOST_REGISTER_PORTABLE_MAPPED)
        except cp.cuda.runtime.CUDARuntimeError as exc:
            self.host.close()
            raise cuda_error(cp, exc, f"cudaHostRegister of {size} bytes") from exc
        self.device_ptr = device_pointer(cp, self.ptr)  # what a kernel dereferences

    def read(self, offset: int, n: int, into: ctypes.Array[ctypes.c_char]) -> int:
        """Address of ``n`` bytes at ``offset`` in host memory (device bytes are copied into ``into``)."""
        if self.host is not None:
            return self.ptr + offset
        with self.cp.cuda.Device(self.ordinal):
            self.cp.cuda.runtime.memcpy(ctypes.addressof(into), self.ptr + offset, n, MEMCPY_DEVICE_TO_HOST)
        return ctypes.addressof(into)

    def clear(self) -> None:
        if self.host is not None:
            ctypes.memset(self.ptr, 0, self.size)
            return
        with self.cp.cuda.Device(self.ordinal):
            self.cp.cuda.runtime.memset(self.ptr, 0, self.size)
            self.cp.cuda.runtime.deviceSynchronize()  # the legacy stream does not order non-blocking ones

    def close(self) -> None:
        rt = self.cp.cuda.runtime
        if self.host is not None and self.ptr:
            rt.hostUnregister(self.ptr)
            self.host.close()
        elif self.ptr:
            with self.cp.cuda.Device(self.ordinal):
                rt.free(self.ptr)
        self.ptr = 0


class Pattern:
    """A random 2 MiB pattern (nvbandwidth's period), in host memory and on each GPU that needs it."""

    def __init__(self, cp: Any, kernels: Any | None) -> None:
        self.cp, self.kernels = cp, kernels
        self.host = ctypes.create_string_buffer(os.urandom(PATTERN_BYTES), PATTERN_BYTES)
        self._device: dict[int, int] = {}  # ordinal -> pattern copy
        self._wrong: dict[int, int] = {}  # ordinal -> 8-byte counter
        self._streams: dict[int, Any] = {}  # ordinal -> the stream the check runs on

    def on(self, ordinal: int) -> int:
        if ordinal not in self._device:
            ptr = device_malloc(self.cp, ordinal, PATTERN_BYTES)
            with self.cp.cuda.Device(ordinal):
                self.cp.cuda.runtime.memcpy(ptr, ctypes.addressof(self.host), PATTERN_BYTES, MEMCPY_DEFAULT)
            self._device[ordinal] = ptr
            self._wrong[ordinal] = device_malloc(self.cp, ordinal, 8)
            with self.cp.cuda.Device(ordinal):
                self._streams[ordinal] = self.cp.cuda.Stream(non_blocking=True)
        return self._device[ordinal]

    def fill(self, buf: Buffer, n: int, stream: Any = None) -> None:
        """The pattern repeated over the first ``n`` bytes of ``buf``: for device memory, copies queued on
        ``stream`` (what runs next on it sees them), or done before this returns when no stream is given.
        Never a bare ``cudaMemcpy`` between device buffers: it returns before the copy is done, on the legacy
        stream, which orders nothing on a non-blocking one."""
        rt = self.cp.cuda.runtime
        src = self.on(buf.ordinal) if buf.host is None else ctypes.addressof(self.host)
        if buf.host is not None:
            for off in range(0, n, PATTERN_BYTES):
                ctypes.memmove(buf.ptr + off, src, min(PATTERN_BYTES, n - off))
            return
        queue: Any = stream if stream is not None else self._streams[buf.ordinal]
        with self.cp.cuda.Device(buf.ordinal):
            for off in range(0, n, PATTERN_BYTES):
                rt.memcpyAsync(buf.ptr + off, src, min(PATTERN_BYTES, n - off), MEMCPY_DEFAULT, queue.ptr)
            if stream is None:
                queue.synchronize()

    def differs(self, buf: Buffer, n: int) -> str | None:
        """What differs from the pattern in the first ``n`` bytes of ``buf``; None when nothing does."""
        if buf.host is None and self.kernels is not None:
            return self._differs_on_gpu(buf, n)
        scratch = ctypes.create_string_buffer(_CHUNK)
        for off in range(0, n, _CHUNK):
            length = min(_CHUNK, n - off)
            here = buf.read(off, length, scratch)
            for part in range(0, length, PATTERN_BYTES):  # _CHUNK is a whole number of patterns
                m = min(PATTERN_BYTES, length - part)
                if not same_bytes(here + part, ctypes.addressof(self.host), m):
                    return f"the destination differs from the source at offset {off + part}"
        return None

    def _differs_on_gpu(self, buf: Buffer, n: int) -> str | None:
        assert self.kernels is not None
        np = importlib.import_module("numpy")  # a CuPy dependency
        rt, ordinal = self.cp.cuda.runtime, buf.ordinal
        pattern = self.on(ordinal)
        wrong = self._wrong[ordinal]
        kernel = self.kernels.get_function("topolink_check")
        sms = rt.deviceGetAttribute(ATTR_MULTIPROCESSOR_COUNT, ordinal)
        count = ctypes.c_uint64(0)
        stream = self._streams[ordinal]
        with self.cp.cuda.Device(ordinal), stream:
            rt.memsetAsync(wrong, 0, 8, stream.ptr)
            kernel((sms * 4,), (256,), (np.uint64(buf.ptr), np.uint64(pattern), np.uint64(n // 4),
                                        np.uint64(PATTERN_BYTES // 4), np.uint64(wrong)))
            stream.synchronize()
            rt.memcpy(ctypes.addressof(count), wrong, 8, MEMCPY_DEVICE_TO_HOST)
        return None if count.value == 0 else f"{count.value} of {n // 4} 4-byte words differ from the source"

    def close(self) -> None:
        rt = self.cp.cuda.runtime
        for ordinal, ptr in [*self._device.items(), *self._wrong.items()]:
            with self.cp.cuda.Device(ordinal):
                rt.free(ptr)
        self._device, self._wrong, self._streams = {}, {}, {}


class Latch:
    """A 4-byte portable, mapped host flag that ``topolink_latch`` spins on, on every stream."""

    def __init__(self, cp: Any, kernels: Any) -> None:
        self.cp = cp
        self.kernel = kernels.get_function("topolink_latch")
        self.ptr: int = cp.cuda.runtime.hostAlloc(4, HOST_ALLOC_PORTABLE_MAPPED)
        self.flag = ctypes.c_int.from_address(self.ptr)
        self.device_ptr = device_pointer(cp, self.ptr)

    def hold(self, ordinal: int, stream: Any) -> None:
        np = importlib.import_module("numpy")  # a CuPy dependency

        timeout = clock_khz(self.cp, ordinal) * LATCH_TIMEOUT_MS  # kHz = clocks per millisecond
        with self.cp.cuda.Device(ordinal), stream:
            self.kernel((1,), (1,), (np.uint64(self.device_ptr), np.uint64(timeout)))

    def arm(self) -> None:
        self.flag.value = 0

    def release(self) -> None:
        self.flag.value = 1

    def close(self) -> None:
        self.cp.cuda.runtime.freeHost(self.ptr)


class Timer:
    """A non-blocking stream on one GPU with the two events that time it."""

    def __init__(self, cp: Any, ordinal: int) -> None:
        self.ordinal = ordinal
        with cp.cuda.Device(ordinal):
            self.stream = cp.cuda.Stream(non_blocking=True)
            self.start = cp.cuda.Event()
            self.end = cp.cuda.Event()
