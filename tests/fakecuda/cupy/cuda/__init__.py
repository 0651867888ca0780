"""``cupy.cuda`` of the fake: devices, streams (with graph capture), events, and raw memory handles."""

from __future__ import annotations

from types import TracebackType

from .._machine import MACHINE, CUDARuntimeError, Op
from .._machine import Event as _Event
from . import graph, memory, runtime
from .memory import MemoryPointer, UnownedMemory

__all__ = ["Device", "Event", "MemoryPointer", "Stream", "UnownedMemory", "get_elapsed_time", "graph", "memory",
           "runtime"]


class Device:
    def __init__(self, device: int = 0) -> None:
        runtime._check_device(device)
        self.id = device

    def __enter__(self) -> Device:
        MACHINE.current_device.append(self.id)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        MACHINE.current_device.pop()

    def synchronize(self) -> None:
        MACHINE.drain()


class Stream:
    def __init__(self, null: bool = False, non_blocking: bool = False, ptds: bool = False) -> None:
        if null or ptds or not non_blocking:
            raise RuntimeError("fake CUDA: only non-blocking streams (the probes use no other)")
        self._s = MACHINE.new_stream(MACHINE.current_device[-1])
        self.ptr = self._s.ptr
        self.device_id = self._s.device

    def __enter__(self) -> Stream:
        MACHINE.current_stream.append(self._s)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        MACHINE.current_stream.pop()

    def synchronize(self) -> None:
        MACHINE.drain()

    def wait_event(self, event: Event) -> None:
        MACHINE.wait(self._s, event._e)

    def record(self, event: Event | None = None) -> Event:
        event = event or Event()
        event.record(self)
        return event

    def begin_capture(self, mode: int | None = None) -> None:
        del mode
        if MACHINE.no_capture or MACHINE.captures_left == 0:
            raise CUDARuntimeError(900, "operation not permitted when stream is capturing (refused by the fake)")
        if MACHINE.captures_left is not None:
            MACHINE.captures_left -= 1
        if self._s.capturing is not None:
            raise CUDARuntimeError(900, "the stream is already capturing")
        self._s.capturing = []
        MACHINE.log("capture_begin", device=self.device_id)

    def end_capture(self) -> graph.Graph:
        if self._s.capturing is None:
            raise CUDARuntimeError(900, "the stream is not capturing")
        ops: list[Op] = self._s.capturing
        self._s.capturing = None
        MACHINE.log("capture_end", device=self.device_id, ops=len(ops))
        return graph.Graph(ops, self.device_id)


class Event:
    def __init__(self, block: bool = False, disable_timing: bool = False, interprocess: bool = False) -> None:
        del block, disable_timing, interprocess
        self._e = _Event(MACHINE.current_device[-1])

    def record(self, stream: Stream | None = None) -> None:
        if stream is None:
            raise RuntimeError("fake CUDA: an event recorded on the legacy default stream")
        MACHINE.record(self._e, stream._s)

    def synchronize(self) -> None:
        MACHINE.drain()


def get_elapsed_time(start: Event, end: Event) -> float:
    MACHINE.drain()
    a, b = start._e, end._e
    if a.device != b.device:
        raise CUDARuntimeError(400, "events of different devices")
    if not (a.done and b.done):
        raise CUDARuntimeError(600, "event not recorded")
    return (b.time - a.time) * 1e3


