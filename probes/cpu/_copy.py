"""Copies between host buffers bound to NUMA nodes, the cpu analogue of nvbandwidth's host copies.

``host_memcpy``: one thread on the row node's CPUs copies the row's buffer into the column's.
``host_bidirectional_memcpy``: the same copy, timed, while a second thread on the column node's CPUs
copies a buffer twice as large back (nvbandwidth's interfering copy, sized so it covers the whole timed
window); only the timed direction is reported. libc's memcpy releases the interpreter lock, so the two
threads copy at the same time.

Every sample starts from a cleared destination and its data is checked after it (nvbandwidth's
per-sample check), never inside the timed window.
"""

from __future__ import annotations

import ctypes
import threading
import time

from topology import format_cpulist

from ..core import Item, Pairs, Target, Workload
from ..host import HostBuffer, fill_pattern, on_cpus, same_bytes


class _Pair:
    """A source on one node and a destination on another, ``size`` bytes each."""

    def __init__(self, src: Target, dst: Target, size: int) -> None:
        self.size = size
        self.src = HostBuffer(size, src.index, src.cpus)
        try:
            self.dst = HostBuffer(size, dst.index, dst.cpus)
        except BaseException:
            self.src.close()
            raise
        fill_pattern(self.src.ptr, size)

    def copy(self, times: int) -> None:
        move, dst, src, size = ctypes.memmove, self.dst.ptr, self.src.ptr, self.size
        for _ in range(times):
            move(dst, src, size)

    def clear(self) -> None:
        ctypes.memset(self.dst.ptr, 0, self.size)

    def same(self) -> bool:
        return same_bytes(self.dst.ptr, self.src.ptr, self.size)

    def close(self) -> None:
        self.src.close()
        self.dst.close()


class CopyWorkload:
    channels = 1
    check_each_sample = True

    def __init__(self, item: Item, size: int) -> None:
        self.bytes_per_op = size
        self.src, self.dst = item.targets
        self.timed = _Pair(self.src, self.dst, size)
        self.back: _Pair | None = None
        if item.test == "host_bidirectional_memcpy":
            try:
                self.back = _Pair(self.dst, self.src, 2 * size)
            except BaseException:
                self.timed.close()
                raise

    def prepare(self) -> None:
        for pair in self._pairs():
            pair.clear()

    def _interfere(self, ready: threading.Barrier, times: int) -> None:
        assert self.back is not None
        with on_cpus(self.dst.cpus):
            ready.wait()
            self.back.copy(times)

    def sample(self, warmup: int, iters: int) -> tuple[float, ...]:
        other: threading.Thread | None = None
        ready = threading.Barrier(2 if self.back is not None else 1)
        if self.back is not None:
            other = threading.Thread(target=self._interfere, args=(ready, warmup + iters), daemon=True)
            other.start()
        with on_cpus(self.src.cpus):
            ready.wait()
            self.timed.copy(warmup)
            t0 = time.perf_counter_ns()
            self.timed.copy(iters)
            t1 = time.perf_counter_ns()
        if other is not None:
            other.join()
        return ((t1 - t0) / 1e9,)

    def verify(self) -> str | None:
        if not self.timed.same():
            return "destination differs from source"
        if self.back is not None and not self.back.same():
            return "the interfering copy's destination differs from its source"
        return None

    def _pairs(self) -> list[_Pair]:
        return [self.timed] + ([self.back] if self.back is not None else [])

    def close(self) -> None:
        for pair in self._pairs():
            pair.close()


class CopySession:
    def __init__(self, item: Item) -> None:
        self.item = item
        src = item.targets[0]
        self._conditions: dict[str, str] = {
            "copy": "libc memcpy (ctypes.memmove), one thread",
            "cpus": format_cpulist(src.cpus) if src.cpus else "unbound",
            "data_check": "every sample, destination against source (memcmp), untimed",
        }
        if item.test == "host_bidirectional_memcpy":
            self._conditions["interference"] = (
                "a second thread on the column node's CPUs copies twice the size back for the whole sample")

    @property
    def conditions(self) -> Pairs:
        return tuple(self._conditions.items())

    def workload(self, size: int) -> Workload:
        copy = CopyWorkload(self.item, size)
        self._conditions["src_placement"] = copy.timed.src.placement.describe()
        self._conditions["dst_placement"] = copy.timed.dst.placement.describe()
        return copy

    def close(self) -> None:
        pass
