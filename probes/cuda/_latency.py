"""Pointer-chase latency on CUDA, as nvbandwidth's ``host_device_latency_sm`` and
``device_to_device_latency_sm``: a chain of pointers 128 B apart over 2 MiB, one thread of one block
per launch, one launch per SM, each timed with events; latency = total time / accesses."""

from __future__ import annotations

import ctypes
import importlib
from typing import Any

from ..core import Item, Pairs, ProbeError, Target
from ._buffers import HOST_BUFFER_HOW, Buffer
from ._kernels import WORD, chain_end, chain_words, per_launch
from ._peers import PeerAccess
from ._runtime import ATTR_MULTIPROCESSOR_COUNT, MEMCPY_DEVICE_TO_HOST, MEMCPY_HOST_TO_DEVICE, device_malloc


class LatencyWorkload:
    """The chain lives in the column target's memory; the row GPU (or the only GPU) chases it."""

    channels = 1
    check_each_sample = False  # the chain is read, never written: checked once

    def __init__(self, cp: Any, kernels: Any, chaser: int, memory: Target, *, size: int, stride: int) -> None:
        np = importlib.import_module("numpy")

        self.cp, self.np, self.chaser, self.size = cp, np, chaser, size
        self.bytes_per_op = size
        self.kernel = kernels.get_function("topolink_chase")
        self.words, self.step = size // WORD, stride // WORD
        self.buffer = Buffer(cp, memory, size)
        self.sink = device_malloc(cp, chaser, WORD)
        words = chain_words(self.buffer.device_ptr, size, stride)  # addresses as the chasing GPU sees them
        content = (ctypes.c_uint64 * len(words))(*words)
        if self.buffer.host is not None:
            ctypes.memmove(self.buffer.ptr, content, size)
        else:
            with cp.cuda.Device(memory.index or 0):
                cp.cuda.runtime.memcpy(self.buffer.ptr, ctypes.addressof(content), size, MEMCPY_HOST_TO_DEVICE)
        self.sms = cp.cuda.runtime.deviceGetAttribute(ATTR_MULTIPROCESSOR_COUNT, chaser)
        with cp.cuda.Device(chaser):
            self.stream = cp.cuda.Stream(non_blocking=True)
            self.start, self.end = cp.cuda.Event(), cp.cuda.Event()

    def _launch(self, hops: int, target_block: int, grid: int) -> None:
        np = self.np
        with self.cp.cuda.Device(self.chaser), self.stream:
            self.kernel((grid,), (1,), (np.uint64(self.buffer.device_ptr), np.uint64(hops), np.uint32(target_block),
                                        np.uint64(self.sink)))

    def prepare(self) -> None:
        pass

    def sample(self, warmup: int, iters: int) -> tuple[float, ...]:
        if warmup:
            self._launch(warmup, 0, 1)
            self.stream.synchronize()
        hops = per_launch(iters, self.sms)
        total_ms = 0.0
        for block in range(self.sms):  # one launch per SM, as nvbandwidth
            self.start.record(self.stream)
            self._launch(hops, block, self.sms)
            self.end.record(self.stream)
            self.stream.synchronize()
            total_ms += self.cp.cuda.get_elapsed_time(self.start, self.end)
        return (total_ms / 1e3 * iters / (hops * self.sms),)  # seconds for exactly ``iters`` accesses

    def verify(self) -> str | None:
        hops = 1000 + self.words // self.step // 3
        self._launch(hops, 0, 1)
        self.stream.synchronize()
        got = ctypes.c_uint64()
        with self.cp.cuda.Device(self.chaser):
            self.cp.cuda.runtime.memcpy(ctypes.addressof(got), self.sink, WORD, MEMCPY_DEVICE_TO_HOST)
        want = self.buffer.device_ptr + chain_end(hops, self.words, self.step) * WORD
        return None if got.value == want else f"the chase ended at {got.value:#x}, expected {want:#x}"

    def close(self) -> None:
        self.buffer.close()
        if self.sink:
            with self.cp.cuda.Device(self.chaser):
                self.cp.cuda.runtime.free(self.sink)
            self.sink = 0


class LatencySession:
    def __init__(self, cp: Any, item: Item, kernels: Any) -> None:
        self.cp, self.kernels = cp, kernels
        self.peers = PeerAccess(cp)
        self._conditions: dict[str, str] = {"chain": "pointer i -> i+16 (128 B stride), one thread, one launch per SM"}
        if item.test == "host_device_latency_sm":
            host, gpu = item.targets
            self.chaser, self.memory = gpu, host
            self._conditions["host_buffer"] = HOST_BUFFER_HOW
        else:
            self.chaser, self.memory = item.targets
            assert self.chaser.index is not None and self.memory.index is not None
            self.peers.one_way(self.chaser.index, self.memory.index)  # given back in close()
            self._conditions["peer_access"] = "enabled for this item, disabled after it"
        if self.chaser.index is None:
            self.peers.close()
            raise ProbeError(f"{self.chaser.id} has no CUDA ordinal")

    @property
    def conditions(self) -> Pairs:
        return tuple(self._conditions.items())

    def workload(self, size: int) -> LatencyWorkload:
        assert self.chaser.index is not None
        work = LatencyWorkload(self.cp, self.kernels, self.chaser.index, self.memory, size=size, stride=128)
        if work.buffer.host is not None:
            self._conditions["host_placement"] = work.buffer.host.placement.describe()
        return work

    def close(self) -> None:
        self.peers.close()
