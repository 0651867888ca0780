"""NCCL all-reduce in one process (``ncclCommInitAll`` + grouped calls), timed as nccl-tests times it:
per size, a wall clock around ``iters`` grouped all-reduces (float32 sum, out of place, the offset
rotated inside buffers of the largest size) and the stream synchronisation, divided by ``iters``."""

from __future__ import annotations

import os
import time
from typing import Any

from ..core import Item, Pairs, ProbeError, Waived, all_reduce_bytes, rotation_offset
from ._runtime import cuda_error, device_malloc, load_nccl


class NcclSession:
    def __init__(self, cp: Any, item: Item) -> None:
        nccl, why = load_nccl()
        if nccl is None:
            raise Waived(why)
        self.cp, self.nccl = cp, nccl
        self.devices = [t.index for t in item.targets if t.index is not None]
        if len(self.devices) != len(item.targets):
            raise ProbeError("every GPU of an all-reduce needs a CUDA ordinal")
        try:
            self.comms = nccl.NcclCommunicator.initAll(self.devices)
        except Exception as exc:  # NcclError, CUDA errors: all a failed init
            raise ProbeError(f"NCCL initialisation failed on GPUs {self.devices}: {exc}") from exc
        self.capacity = max(item.sizes)
        self.send: list[int] = []
        self.recv: list[int] = []
        self.streams: list[Any] = []
        try:
            for d in self.devices:
                self.send.append(device_malloc(cp, d, self.capacity))
                self.recv.append(device_malloc(cp, d, self.capacity))
                with cp.cuda.Device(d):
                    cp.cuda.runtime.memset(self.send[-1], 0, self.capacity)
                    cp.cuda.runtime.deviceSynchronize()  # non-blocking streams do not wait for the memset
                    self.streams.append(cp.cuda.Stream(non_blocking=True))
        except BaseException:
            self.close()
            raise
        env = {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}
        self.conditions: Pairs = (
            ("nccl", str(nccl.get_version())), ("ranks", str(len(self.devices))),
            ("mode", "out of place, one process, grouped calls"),
            ("nccl_env", " ".join(f"{k}={v}" for k, v in sorted(env.items())) or "defaults"),
        )

    def all_reduce(self, size: int, iteration: int, send: list[int] | None = None) -> None:
        nccl, count = self.nccl, size // 4
        off = rotation_offset(iteration, size, self.capacity)
        nccl.groupStart()
        try:
            for comm, d, s, r, stream in zip(self.comms, self.devices, send or self.send, self.recv, self.streams,
                                             strict=True):
                with self.cp.cuda.Device(d):
                    comm.allReduce(s + off, r + off, count, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, stream.ptr)
        finally:
            nccl.groupEnd()

    def sync(self) -> None:
        for stream in self.streams:
            stream.synchronize()

    def workload(self, size: int) -> _AllReduce:
        return _AllReduce(self, size)

    def close(self) -> None:
        for comm in getattr(self, "comms", []):
            comm.destroy()
        self.comms = []
        for ptr in self.send + self.recv:
            self.cp.cuda.runtime.free(ptr)  # cudaFree finds the owning device from the address (UVA)
        self.send, self.recv = [], []


class _AllReduce:
    channels = 1

    def __init__(self, session: NcclSession, size: int) -> None:
        self.session, self.size = session, size
        self.bytes_per_op = all_reduce_bytes(size, len(session.devices))

    def sample(self, warmup: int, iters: int) -> tuple[float, ...]:
        s = self.session
        try:
            for i in range(warmup):
                s.all_reduce(self.size, i)
            s.sync()
            t0 = time.perf_counter()
            for i in range(iters):
                s.all_reduce(self.size, i)
            s.sync()
            return (time.perf_counter() - t0,)
        except s.cp.cuda.runtime.CUDARuntimeError as exc:
            raise cuda_error(s.cp, exc, "all_reduce") from exc

    def verify(self) -> str | None:
        """Rank r sends r+1 everywhere; every element must come back as n(n+1)/2 (exact in float32)."""
        s, cp = self.session, self.session.cp
        count, n = self.size // 4, len(s.devices)
        for rank, (d, ptr) in enumerate(zip(s.devices, s.send, strict=True)):
            with cp.cuda.Device(d):
                _view(cp, ptr, count).fill(rank + 1)
                cp.cuda.runtime.deviceSynchronize()
        s.all_reduce(self.size, 0)
        s.sync()
        wrong = 0
        for d, ptr in zip(s.devices, s.recv, strict=True):
            with cp.cuda.Device(d):
                wrong += int(cp.count_nonzero(_view(cp, ptr, count) != n * (n + 1) / 2))
        for d, ptr in zip(s.devices, s.send, strict=True):
            with cp.cuda.Device(d):
                cp.cuda.runtime.memset(ptr, 0, s.capacity)
                cp.cuda.runtime.deviceSynchronize()
        return f"{wrong} wrong elements over all ranks" if wrong else None

    def close(self) -> None:
        pass


def _view(cp: Any, ptr: int, count: int) -> Any:
    memory = cp.cuda.UnownedMemory(ptr, count * 4, None)
    return cp.ndarray((count,), dtype=cp.float32, memptr=cp.cuda.MemoryPointer(memory, 0))
