"""The simulated machine behind the fake CuPy: devices, memory, streams, events and a clock.

Device memory is shared anonymous memory in host RAM (``mmap``: shared memory, so that a measurement of the
probe's host memory can leave it out, and outside RLIMIT_DATA, which a GPU's memory is outside of too) at
addresses no CPU pointer can have (from 2**48 up), so a device address handed to the CPU, or a host address a
kernel was never given access to, is an error here as it is on a GPU. Copies move bytes in place, without a copy
in between. Work enqueued on a stream runs when something synchronises (stream, device, a synchronous copy, an
elapsed time): each stream then runs its queue in order, waits on events across streams, and advances its own
clock by bytes over a made-up rate. The host has a clock of its own in the same time base (``host``, what
``cupy.TOPOLINK_HOST_CLOCK`` reads): each launch (kernel, async copy, NCCL call, graph launch) costs it
``FAKECUDA_LAUNCH_US``, an operation starts on its stream no earlier than the host time it was enqueued at, a
latch kernel holds its stream until the host time of the synchronisation that finds it released, and a
synchronisation brings the host up to the GPUs' clocks. So CUDA events between two points of a stream time the
GPU's work alone, while the host's wall clock around a loop also counts the launches and the uneven start of the
streams, as on a GPU. The legacy default stream (``cudaMemcpy`` between two device buffers, which returns before
the copy is done) is run after every other stream that has work ready, as CUDA is free to: work on a non-
blocking stream that does not wait for it sees it undone. The numbers are simulated; tests assert what was
called, in which order, and what data arrived, never speed.

Configuration (environment, read once): ``FAKECUDA_GPUS`` (count, default 2), ``FAKECUDA_BUS`` (comma
separated PCI bus ids), ``FAKECUDA_PEERS`` (``all``, ``none``), ``FAKECUDA_MEMORY`` (bytes per device),
``FAKECUDA_NVSWITCH`` (``all`` or comma separated ordinals: the GPUs on one NVSwitch fabric, between which
CUDA's limit of 8 mapped peers does not apply; it applies to every other pair, as over PCIe),
``FAKECUDA_LAUNCH_US`` (host microseconds per launch, default 0), ``FAKECUDA_LOG`` (a file that gets one JSON
line per notable call), ``FAKECUDA_NO_NVRTC`` and ``FAKECUDA_NO_CAPTURE`` (refuse kernel compilation / graph
capture), ``FAKECUDA_CAPTURES`` (captures that begin before every later one is refused: a capture failing
part-way through a sweep), ``FAKECUDA_CORRUPT`` (copies leave their last byte unwritten, NCCL the last element
it receives), ``FAKECUDA_SPLIT_FAULT=odd`` (the split-warp copy's odd warps copy nothing).
"""

from __future__ import annotations

import bisect
import collections
import ctypes
import dataclasses
import itertools
import json
import mmap
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MAX_PEERS = 8  # CUDA: a device maps at most 8 peers at once over PCIe (none on an NVSwitch fabric)
DEVICE_BASE = 1 << 48
RATES = {"h2d": 20e9, "d2h": 20e9, "local": 500e9, "peer": 100e9, "staged": 10e9}


class CUDARuntimeError(RuntimeError):
    def __init__(self, status: int, message: str = "") -> None:
        super().__init__(f"cudaError {status}: {message}")
        self.status = status


@dataclass
class Allocation:
    base: int
    size: int
    device: int
    data: mmap.mmap
    address: int  # where ``data`` is in this process


@dataclass
class Event:
    device: int
    enqueued: int = 0  # records enqueued
    done: int = 0  # records executed
    time: float = 0.0


@dataclass
class Op:
    """One unit of work on a stream: ``ready`` says whether it can run now, ``run`` runs it."""

    name: str
    run: Callable[[Stream], None]
    ready: Callable[[Stream], bool] = lambda stream: True
    clone: Callable[[], Op] | None = None  # a fresh copy, for a graph launched again
    at: float = 0.0  # the host time it was enqueued at (set by ``Machine.enqueue``)


@dataclass
class Stream:
    ptr: int
    device: int
    queue: collections.deque[Op] = field(default_factory=collections.deque)
    clock: float = 0.0
    capturing: list[Op] | None = None
    legacy: bool = False  # the legacy default stream: ordered with no non-blocking stream


class Machine:
    def __init__(self) -> None:
        env = os.environ
        self.count = int(env.get("FAKECUDA_GPUS", "2"))
        buses = [b for b in env.get("FAKECUDA_BUS", "").split(",") if b]
        self.buses = buses or [f"0000:{0x10 + i:02x}:00.0" for i in range(self.count)]
        self.peers_possible = env.get("FAKECUDA_PEERS", "all") == "all"
        self.memory = int(env.get("FAKECUDA_MEMORY", str(2 << 30)))
        fabric = env.get("FAKECUDA_NVSWITCH", "")
        self.nvswitch = set(range(self.count)) if fabric == "all" else {int(d) for d in fabric.split(",") if d}
        self.log_path = env.get("FAKECUDA_LOG", "")
        self.no_nvrtc = env.get("FAKECUDA_NO_NVRTC") == "1"
        self.no_capture = env.get("FAKECUDA_NO_CAPTURE") == "1"
        limit = env.get("FAKECUDA_CAPTURES", "")
        self.captures_left: int | None = int(limit) if limit else None  # then every capture is refused
        self.corrupt = env.get("FAKECUDA_CORRUPT") == "1"
        self.split_fault = env.get("FAKECUDA_SPLIT_FAULT", "")
        self.allocations: dict[int, Allocation] = {}
        self._bases: list[int] = []
        self._next = [DEVICE_BASE + (d << 40) for d in range(self.count)]
        self.used = [0] * self.count
        self.peers: dict[int, set[int]] = {d: set() for d in range(self.count)}
        self.host_ranges: dict[int, int] = {}  # registered or allocated host memory: base -> size
        self.host_keep: dict[int, ctypes.Array[ctypes.c_char]] = {}
        self.streams: dict[int, Stream] = {}
        self._ptrs = itertools.count(0x1000)
        self.launch_s = float(env.get("FAKECUDA_LAUNCH_US", "0")) * 1e-6
        self.host = 0.0  # the host's clock, in the streams' time base
        self._legacy: dict[int, Stream] = {}
        self.current_device = [0]
        self.current_stream: list[Stream | None] = [None]

    # -- log -------------------------------------------------------------------------------------
    def log(self, call: str, **fields: Any) -> None:
        if self.log_path:
            with open(self.log_path, "a") as f:
                f.write(json.dumps({"call": call, **fields}) + "\n")

    def limited(self, device: int, peer: int) -> bool:
        """Whether the mapping counts against the 8-peer limit: every pair but two GPUs of the fabric."""
        return not (device in self.nvswitch and peer in self.nvswitch)

    # -- memory ----------------------------------------------------------------------------------
    def malloc(self, device: int, size: int) -> int:
        if self.used[device] + size > self.memory:
            raise CUDARuntimeError(2, "out of memory")
        base = self._next[device]
        self._next[device] += (size + 0xFFFF) & ~0xFFFF
        self.used[device] += size
        data = mmap.mmap(-1, max(size, 1))
        self.allocations[base] = Allocation(base, size, device, data, ctypes.addressof(ctypes.c_char.from_buffer(data)))
        bisect.insort(self._bases, base)
        return base

    def free(self, ptr: int) -> None:
        alloc = self.allocations.pop(ptr, None)
        if alloc is None:
            raise CUDARuntimeError(1, f"free of {ptr:#x}, which is not an allocation")
        self._bases.remove(ptr)
        self.used[alloc.device] -= alloc.size

    def find(self, ptr: int, size: int) -> Allocation | None:
        """The device allocation holding ``[ptr, ptr+size)``; None for host memory; an error otherwise."""
        if ptr < DEVICE_BASE:
            return None
        i = bisect.bisect_right(self._bases, ptr) - 1
        alloc = self.allocations.get(self._bases[i]) if i >= 0 else None
        if alloc is None or ptr + size > alloc.base + alloc.size:
            raise CUDARuntimeError(700, f"illegal address {ptr:#x} (+{size})")
        return alloc

    def mapped(self, ptr: int, size: int) -> bool:
        return any(base <= ptr and ptr + size <= base + n for base, n in self.host_ranges.items())

    def address(self, ptr: int, size: int) -> int:
        """Where the bytes of ``ptr`` (device or host) are in this process."""
        alloc = self.find(ptr, size)
        return ptr if alloc is None else alloc.address + ptr - alloc.base

    def read(self, ptr: int, size: int) -> bytes:
        alloc = self.find(ptr, size)
        if alloc is None:
            return ctypes.string_at(ptr, size)
        off = ptr - alloc.base
        return bytes(alloc.data[off:off + size])

    def write(self, ptr: int, data: bytes | bytearray | memoryview) -> None:
        alloc = self.find(ptr, len(data))
        if alloc is None:
            ctypes.memmove(ptr, bytes(data), len(data))
            return
        off = ptr - alloc.base
        alloc.data[off:off + len(data)] = data

    def view(self, ptr: int, size: int) -> memoryview:
        """Device bytes in place (writable); host bytes through ctypes."""
        alloc = self.find(ptr, size)
        if alloc is None:
            return memoryview((ctypes.c_char * size).from_address(ptr)).cast("B")
        off = ptr - alloc.base
        return memoryview(alloc.data)[off:off + size]

    def reachable(self, device: int, ptr: int, size: int) -> str:
        """How ``device`` reaches the memory (local, host, peer); an error when it cannot."""
        alloc = self.find(ptr, size)
        if alloc is None:
            if not self.mapped(ptr, size):
                raise CUDARuntimeError(700, f"GPU {device} dereferenced host memory {ptr:#x} that is not mapped")
            return "host"
        if alloc.device == device:
            return "local"
        if alloc.device not in self.peers[device]:
            raise CUDARuntimeError(700, f"GPU {device} read GPU {alloc.device}'s memory without peer access")
        return "peer"

    # -- streams ---------------------------------------------------------------------------------
    def new_stream(self, device: int) -> Stream:
        stream = Stream(next(self._ptrs), device)
        self.streams[stream.ptr] = stream
        return stream

    def stream(self, ptr: int) -> Stream:
        if ptr not in self.streams:
            raise CUDARuntimeError(400, f"no stream {ptr:#x}")
        return self.streams[ptr]

    def legacy(self, device: int) -> Stream:
        if device not in self._legacy:
            stream = Stream(next(self._ptrs), device, legacy=True)
            self._legacy[device] = self.streams[stream.ptr] = stream
        return self._legacy[device]

    def launch(self) -> None:
        """The host's cost of one launch."""
        self.host += self.launch_s

    def enqueue(self, stream: Stream, op: Op) -> None:
        if stream.capturing is not None:
            stream.capturing.append(op)
        else:
            stream.queue.append(dataclasses.replace(op, at=self.host))

    def drain(self) -> None:
        """Run everything enqueued, as far as it can go; a queue that cannot move is a deadlock."""
        if any(s.capturing is not None for s in self.streams.values()):
            raise CUDARuntimeError(900, "synchronous call while a stream is capturing")
        moved = True
        while moved:
            moved = False
            for s in sorted(self.streams.values(), key=lambda s: s.legacy):  # the legacy stream last
                while s.queue:
                    s.clock = max(s.clock, s.queue[0].at)  # not before the host enqueued it
                    if not s.queue[0].ready(s):
                        break
                    s.queue.popleft().run(s)
                    moved = True
        self.host = max([self.host, *(s.clock for s in self.streams.values())])
        stuck = [f"{s.ptr:#x}:{s.queue[0].name}" for s in self.streams.values() if s.queue]
        if stuck:
            raise RuntimeError(f"fake CUDA: deadlock, streams waiting: {', '.join(stuck)}")

    def record(self, event: Event, stream: Stream) -> None:
        if event.device != stream.device:
            raise CUDARuntimeError(400, "event and stream on different devices")
        event.enqueued += 1
        generation = event.enqueued

        def run(s: Stream) -> None:
            event.done, event.time = generation, s.clock

        self.enqueue(stream, Op("record", run))

    def wait(self, stream: Stream, event: Event) -> None:
        generation = event.enqueued

        def run(s: Stream) -> None:
            s.clock = max(s.clock, event.time)

        self.enqueue(stream, Op("wait", run, lambda s: event.done >= generation))

    def copy_op(self, dst: int, src: int, size: int, how: str) -> Op:
        def run(s: Stream) -> None:
            n = size - 1 if self.corrupt and size > 1 else size
            ctypes.memmove(self.address(dst, size), self.address(src, size), n)
            s.clock += size / RATES[how]

        return Op(f"copy {how}", run)

    def kind(self, dst: int, src: int, size: int) -> str:
        a, b = self.find(dst, size), self.find(src, size)
        if a is None and b is None:
            return "local"
        if a is None:
            return "d2h"
        if b is None:
            return "h2d"
        if a.device == b.device:
            return "local"
        if a.device in self.peers[b.device] or b.device in self.peers[a.device]:
            return "peer"
        self.log("staged_copy", src=b.device, dst=a.device)
        return "staged"


MACHINE = Machine()
MACHINE.log("process", pid=os.getpid())  # one line per process that loads CUDA
