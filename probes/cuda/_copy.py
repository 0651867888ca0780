"""Copy-engine copies on CUDA, timed with events on the issuing stream.

Per sample, as nvbandwidth: the latch kernel holds every stream, the warm-up copies and the timed copies
are enqueued behind it, the first stream records the start and the others wait on it, then the host
releases the latch. Host buffers are NUMA-bound (``HostBuffer``) and pinned with ``cudaHostRegister``.
"""

from __future__ import annotations

import ctypes
import importlib
import os
from typing import Any

from topology import format_cpulist

from ..core import Item, Pairs, Target
from ..host import PATTERN_BYTES, HostBuffer, same_bytes
from ._kernels import LATCH_TIMEOUT_MS
from ._legs import Leg, legs
from ._runtime import (
    HOST_ALLOC_PORTABLE_MAPPED,
    HOST_REGISTER_PORTABLE_MAPPED,
    MEMCPY_DEFAULT,
    MEMCPY_DEVICE_TO_HOST,
    MEMCPY_HOST_TO_DEVICE,
    clock_khz,
    cuda_error,
    device_malloc,
    device_pointer,
    enable_peer,
)

_CHUNK = 4 * 1024 * 1024


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

    def fill(self, pattern: ctypes.Array[ctypes.c_char]) -> None:
        rt, src, length = self.cp.cuda.runtime, ctypes.addressof(pattern), len(pattern)
        for off in range(0, self.size, length):
            n = min(length, self.size - off)
            if self.host is not None:
                ctypes.memmove(self.ptr + off, src, n)
            else:
                with self.cp.cuda.Device(self.ordinal):
                    rt.memcpy(self.ptr + off, src, n, MEMCPY_HOST_TO_DEVICE)

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


class _Stream:
    def __init__(self, cp: Any, ordinal: int) -> None:
        self.ordinal = ordinal
        with cp.cuda.Device(ordinal):
            self.stream = cp.cuda.Stream(non_blocking=True)
            self.start = cp.cuda.Event()
            self.end = cp.cuda.Event()


class CopyWorkload:
    def __init__(self, cp: Any, copies: tuple[Leg, ...], size: int, latch: Latch | None) -> None:
        self.cp, self.legs, self.latch = cp, copies, latch
        self.bytes_per_op = size
        self.channels = len(copies)
        self.buffers: list[tuple[Buffer, Buffer]] = []
        try:
            for leg in copies:
                src = Buffer(cp, leg.src, size)
                try:
                    dst = Buffer(cp, leg.dst, size)  # its own buffer, also for a local copy
                except BaseException:
                    src.close()
                    raise
                self.buffers.append((src, dst))
        except BaseException:
            self.close()
            raise
        self.streams = [_Stream(cp, leg.issuer.index or 0) for leg in copies]
        pattern = ctypes.create_string_buffer(os.urandom(min(size, PATTERN_BYTES)), min(size, PATTERN_BYTES))
        for src, dst in self.buffers:
            src.fill(pattern)
            dst.clear()

    def _enqueue(self, i: int, count: int) -> None:
        rt = self.cp.cuda.runtime
        leg, (src, dst), s = self.legs[i], self.buffers[i], self.streams[i]
        peer = leg.src.kind == leg.dst.kind == "gpu" and leg.src.index != leg.dst.index
        for _ in range(count):
            if peer:
                rt.memcpyPeerAsync(dst.ptr, leg.dst.index, src.ptr, leg.src.index, self.bytes_per_op, s.stream.ptr)
            else:
                rt.memcpyAsync(dst.ptr, src.ptr, self.bytes_per_op, MEMCPY_DEFAULT, s.stream.ptr)

    def sample(self, warmup: int, iters: int) -> tuple[float, ...]:
        cp = self.cp
        if self.latch:
            self.latch.arm()
        for i, s in enumerate(self.streams):
            with cp.cuda.Device(s.ordinal):
                if self.latch:
                    self.latch.hold(s.ordinal, s.stream)
                self._enqueue(i, warmup)
        first = self.streams[0]
        with cp.cuda.Device(first.ordinal):
            first.start.record(first.stream)
        for s in self.streams[1:]:
            with cp.cuda.Device(s.ordinal):
                s.stream.wait_event(first.start)  # every stream starts when the first does
                s.start.record(s.stream)
        for i, s in enumerate(self.streams):
            with cp.cuda.Device(s.ordinal):
                self._enqueue(i, iters)
                s.end.record(s.stream)
        if self.latch:
            self.latch.release()
        for s in self.streams:
            s.stream.synchronize()
        return tuple(cp.cuda.get_elapsed_time(s.start, s.end) / 1e3 for s in self.streams)

    def verify(self) -> str | None:
        a = ctypes.create_string_buffer(_CHUNK)
        b = ctypes.create_string_buffer(_CHUNK)
        for i, (src, dst) in enumerate(self.buffers):
            for off in range(0, self.bytes_per_op, _CHUNK):
                n = min(_CHUNK, self.bytes_per_op - off)
                if not same_bytes(src.read(off, n, a), dst.read(off, n, b), n):
                    return f"channel {i}: destination differs from source at offset {off}"
        return None

    def close(self) -> None:
        for pair in self.buffers:
            for buf in pair:
                buf.close()
        self.buffers = []


class CopySession:
    def __init__(self, cp: Any, item: Item, kernels: Any | None, kernel_error: str) -> None:
        self.cp = cp
        self.legs = legs(item.test, item.targets)
        gpus = sorted({t.index for t in item.targets if t.kind == "gpu" and t.index is not None})
        for a in gpus:
            for b in gpus:
                if a != b:
                    enable_peer(cp, a, b)  # both ways, before anything is timed
        self.latch = Latch(cp, kernels) if kernels is not None else None
        issuers = ", ".join(f"{leg.src.id}->{leg.dst.id} on GPU {leg.issuer.id}'s stream" for leg in self.legs)
        self._conditions: dict[str, str] = {
            "engine": "copy engine (cudaMemcpyAsync / cudaMemcpyPeerAsync), non-blocking streams",
            "issuers": issuers,
            "latch": "spin kernel on a host flag" if self.latch else f"none: {kernel_error}",
        }
        hosts = [t for t in item.targets if t.kind == "host"]
        if hosts:
            self._conditions["host_cpus"] = format_cpulist(hosts[0].cpus) if hosts[0].cpus else "unbound"

    @property
    def conditions(self) -> Pairs:
        return tuple(self._conditions.items())

    def workload(self, size: int) -> CopyWorkload:
        work = CopyWorkload(self.cp, self.legs, size, self.latch)
        for src, dst in work.buffers:
            for buf in (src, dst):
                if buf.host is not None:
                    self._conditions["host_placement"] = buf.host.placement.describe()
        return work

    def close(self) -> None:
        if self.latch:
            self.latch.close()
