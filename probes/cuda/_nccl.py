"""NCCL collectives in one process (``ncclCommInitAll`` + grouped calls, nccl-tests' ``-g N``), timed as
nccl-tests times them: per size and mode, every GPU's stream is synchronised (the barrier), the host's wall
clock starts, the ``iters`` operations (float32, the buffers shifted inside buffers of the largest size)
run, every stream is waited for, and the clock stops.

- ``graph`` mode (nccl-tests ``-G <launches>``): for every window the ``iters`` grouped operations are
  captured and instantiated afresh as one CUDA graph per GPU (nccl-tests' ``BenchTime``), and the timed
  window launches every GPU's graph ``launches`` times; the time per operation is the wall time over
  iterations x launches. Where capture is refused, the rest of the item is timed on the stream.
- ``stream`` mode (nccl-tests ``-G 0``, its default), asked by the plan's ``timing`` option: the grouped
  operations are issued one by one inside the window; the time per operation is the wall time over
  iterations. They are issued from Python, a few microseconds per GPU slower than nccl-tests' C loop:
  at small sizes on many GPUs the window holds more host time than ``-G 0``'s, and the cell reads lower.

Either way the launches and the uneven start of the GPUs are inside the window, as in nccl-tests (CUDA
events on each GPU would leave them out and read high at small sizes). Each cell (size and mode) records
how it was timed as it is timed (``last_timing``, read by the runner after every sample): a capture refused
part-way through the sizes leaves the cells before it ``graph`` and those after it ``stream``. all-to-all
calls ``ncclAlltoAll`` where NCCL has it (2.28 and later) and one ncclSend and ncclRecv per peer in a group
before, as nccl-tests does. Out of place, then in place (nccl-tests' order),
every collective. The data check runs apart, once per size and mode (nccl-tests ``-c 1``), on the GPUs:
values that depend on the sending rank and the element's position (see ``probes.core``).
"""

from __future__ import annotations

import os
from typing import Any

from ..core import (
    GRAPH,
    IN_PLACE,
    Counts,
    Item,
    Pairs,
    ProbeError,
    Segment,
    Waived,
    checked,
    counts,
    modes,
    moved,
    received_segments,
    rotation_offset,
    sent_segment,
    summed_values,
)
from ._buffers import Timer
from ._nccl_text import timing_conditions
from ._runtime import cuda_error, device_malloc, host_clock, load_nccl, nccl_alltoall

_F32 = 4
_CHECK_CHUNK = 1 << 21  # elements per step of the data check (16 MiB of int64 positions on the GPU)


class NcclSession:
    def __init__(self, cp: Any, item: Item, kernels: Any | None) -> None:
        del kernels  # nccl-tests holds no latch: its window starts on the host
        nccl, why = load_nccl()
        if nccl is None:
            raise Waived(why)
        self.cp, self.nccl, self.op, self.modes = cp, nccl, item.test, modes(item.test)
        self.clock = host_clock(cp)
        options = dict(item.options)
        self.launches = max(1, int(options.get("graph_launches", "1")))
        self.asked = options.get("timing", GRAPH)  # graph: nccl-tests -G <launches>; stream: -G 0
        self.command = options.get("nccl_tests", "")
        self.windows, self.warmup = item.samples, item.warmup
        self.devices = [t.index for t in item.targets if t.index is not None]
        if len(self.devices) != len(item.targets):
            raise ProbeError(f"every GPU of an {self.op} needs a CUDA ordinal")
        self.ranks = len(self.devices)
        self.alltoall = nccl_alltoall(nccl) if self.op == "alltoall" else None
        try:
            self.comms = nccl.NcclCommunicator.initAll(self.devices)
        except Exception as exc:  # NcclError, CUDA errors: all a failed init
            raise ProbeError(f"NCCL initialisation failed on GPUs {self.devices}: {exc}") from exc
        self.capacity = max(max(counts(self.op, s, self.ranks).send, counts(self.op, s, self.ranks).recv) * _F32
                            for s in item.sizes)
        self.send: list[int] = []
        self.recv: list[int] = []
        self.timers: list[Timer] = []
        try:
            for d in self.devices:
                self.send.append(device_malloc(cp, d, self.capacity))
                self.recv.append(device_malloc(cp, d, self.capacity))
                self.timers.append(Timer(cp, d))
            self.zero()
        except BaseException:
            self.close()
            raise
        self.graph_refused = ""  # why capture failed, once it has
        env = {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}
        version = int(nccl.get_version())
        self._conditions: dict[str, str] = {
            "nccl": str(version), "ranks": str(self.ranks),
            "modes": ", ".join(m.replace("_", " ") for m in self.modes),
            "launch": "one process, grouped calls (nccl-tests -g)",
            "nccl_env": " ".join(f"{k}={v}" for k, v in sorted(env.items())) or "defaults",
            "data_check": "once per size and mode, on the GPUs, untimed (nccl-tests -c 1); values depend on the "
                          "sending rank and the element's position"
                          + ("; the in-place alltoall is timed, not checked (nccl-tests)" if self.op == "alltoall"
                             else ""),
        }
        if self.op == "alltoall":
            self._conditions["alltoall"] = (
                f"ncclAlltoAll (NCCL {version} >= 2.28, as nccl-tests calls it)" if self.alltoall else
                f"one ncclSend and ncclRecv per peer in a group (NCCL {version}: no ncclAlltoAll, as nccl-tests)")

    @property
    def conditions(self) -> Pairs:
        """The item's conditions, and how each timing mode it used times (each cell says which it ran in)."""
        return (*self._conditions.items(), *timing_conditions(
            asked=self.asked, launches=self.launches, windows=self.windows, warmup=self.warmup,
            refused=self.graph_refused, command=self.command))

    def zero(self) -> None:
        for d, s, r in zip(self.devices, self.send, self.recv, strict=True):
            with self.cp.cuda.Device(d):
                self.cp.cuda.runtime.memset(s, 0, self.capacity)
                self.cp.cuda.runtime.memset(r, 0, self.capacity)
                self.cp.cuda.runtime.deviceSynchronize()  # non-blocking streams do not wait for the memset

    def ends(self, rank: int, c: Counts, mode: str, shift: int) -> tuple[int, int]:
        """(send, receive) addresses of ``rank`` for one operation, laid out as nccl-tests lays them out."""
        if mode != IN_PLACE:
            return self.send[rank] + shift, self.recv[rank] + shift
        base = self.recv[rank] + shift  # in place: everything inside the receive buffer
        return base + rank * c.send_in_place * _F32, base + rank * c.recv_in_place * _F32

    def issue(self, size: int, mode: str, iteration: int) -> None:
        """One operation on every rank, as one NCCL group."""
        nccl, c = self.nccl, counts(self.op, size, self.ranks)
        shift = rotation_offset(iteration, max(c.send, c.recv) * _F32, self.capacity)
        nccl.groupStart()
        try:
            for rank, (comm, t) in enumerate(zip(self.comms, self.timers, strict=True)):
                s, r = self.ends(rank, c, mode, shift)
                with self.cp.cuda.Device(t.ordinal):
                    self._call(comm, s, r, c, t.stream.ptr)
        finally:
            nccl.groupEnd()

    def _call(self, comm: Any, s: int, r: int, c: Counts, stream: int) -> None:
        nccl = self.nccl
        if self.op == "all_reduce":
            comm.allReduce(s, r, c.param, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, stream)
        elif self.op == "all_gather":
            comm.allGather(s, r, c.param, nccl.NCCL_FLOAT32, stream)
        elif self.op == "reduce_scatter":
            comm.reduceScatter(s, r, c.param, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, stream)
        elif self.op == "alltoall" and self.alltoall is not None:
            self.alltoall(comm, s, r, c.param, nccl.NCCL_FLOAT32, stream)
        elif self.op == "alltoall":  # nccl-tests before NCCL 2.28: a send and a receive per peer, grouped
            for peer in range(self.ranks):
                comm.send(s + peer * c.param * _F32, c.param, nccl.NCCL_FLOAT32, peer, stream)
                comm.recv(r + peer * c.param * _F32, c.param, nccl.NCCL_FLOAT32, peer, stream)
        else:
            raise ProbeError(f"NCCL has no {self.op} here")

    def sync(self) -> None:
        for t in self.timers:
            t.stream.synchronize()

    def capture(self, size: int, mode: str, iters: int) -> list[Any] | None:
        """The ``iters`` operations as one graph per GPU, captured and instantiated afresh (as nccl-tests does
        per window); None on the stream mode, and (why, once) when capture is refused: the rest of the item
        is then timed on the stream."""
        if self.graph_refused or self.asked != "graph":
            return None
        begun: list[Timer] = []
        try:
            for t in self.timers:
                with self.cp.cuda.Device(t.ordinal):
                    t.stream.begin_capture()
                begun.append(t)
            for i in range(iters):
                self.issue(size, mode, i)
        except Exception as exc:
            self.graph_refused = f"{type(exc).__name__}: {exc}"
        graphs = []
        for t in begun:
            try:
                with self.cp.cuda.Device(t.ordinal):
                    graphs.append(t.stream.end_capture())
            except Exception as exc:
                self.graph_refused = self.graph_refused or f"{type(exc).__name__}: {exc}"
        return None if self.graph_refused else graphs

    def timed(self, size: int, mode: str, iters: int, graphs: list[Any] | None) -> float:
        """Seconds for ``iters`` operations on the host's wall clock, as nccl-tests takes them."""
        self.sync()  # the barrier: every GPU idle before the clock starts
        t0 = self.clock()
        if graphs is not None:
            for _ in range(self.launches):
                for t, g in zip(self.timers, graphs, strict=True):
                    with self.cp.cuda.Device(t.ordinal):
                        g.launch(t.stream)
        else:
            for i in range(iters):
                self.issue(size, mode, i)
        self.sync()  # nccl-tests' completeColl: every stream done
        elapsed = self.clock() - t0
        return elapsed / (self.launches if graphs is not None else 1)

    def workload(self, size: int) -> _Collective:
        return _Collective(self, size)

    def close(self) -> None:
        for comm in getattr(self, "comms", []):
            comm.destroy()
        self.comms = []
        for ptr in self.send + self.recv:
            self.cp.cuda.runtime.free(ptr)  # cudaFree finds the owning device from the address (UVA)
        self.send, self.recv = [], []


class _Collective:
    check_each_sample = False

    def __init__(self, session: NcclSession, size: int) -> None:
        self.session, self.size = session, size
        self.channels = len(session.modes)
        self.bytes_per_op = moved(session.op, size, session.ranks)
        self.last_timing: tuple[str, ...] = ()  # per mode (channel) of the last sample: graph | stream

    def prepare(self) -> None:
        pass

    def sample(self, warmup: int, iters: int) -> tuple[float, ...]:
        s = self.session
        out, timing = [], []
        try:
            for mode in s.modes:
                for i in range(warmup):
                    s.issue(self.size, mode, i)
                s.sync()
                graphs = s.capture(self.size, mode, iters)  # fresh per window, as nccl-tests' BenchTime
                out.append(s.timed(self.size, mode, iters, graphs))
                timing.append("stream" if graphs is None else "graph")  # recorded as this cell was timed
        except s.cp.cuda.runtime.CUDARuntimeError as exc:
            raise cuda_error(s.cp, exc, s.op) from exc
        self.last_timing = tuple(timing)
        return tuple(out)

    def verify(self) -> str | None:
        """Each rank sends its values by position; every element received must be what the collective makes
        of them (nccl-tests' rank- and position-dependent check)."""
        s, cp = self.session, self.session.cp
        c = counts(s.op, self.size, s.ranks)
        for mode in s.modes:
            s.zero()
            for rank, d in enumerate(s.devices):
                with cp.cuda.Device(d):
                    _put(cp, s.ends(rank, c, mode, 0)[0], sent_segment(rank, c))
                    cp.cuda.runtime.deviceSynchronize()
            s.issue(self.size, mode, 0)
            s.sync()
            wrong = 0
            for rank, d in enumerate(s.devices):
                with cp.cuda.Device(d):
                    receive = s.ends(rank, c, mode, 0)[1]
                    if checked(s.op, mode):
                        wrong += sum(_wrong(cp, receive, seg) for seg in received_segments(s.op, rank, s.ranks, c))
            if wrong:
                s.zero()
                return f"{wrong} wrong elements over all ranks ({mode.replace('_', ' ')})"
        s.zero()
        return None

    def close(self) -> None:
        pass


def _chunks(cp: Any, ptr: int, seg: Segment) -> Any:
    """(view of the device buffer, the values it must hold), a bounded chunk of the segment at a time."""
    for start in range(0, seg.count, _CHECK_CHUNK):
        n = min(_CHECK_CHUNK, seg.count - start)
        where = cp.arange(seg.base + start, seg.base + start + n, dtype=cp.int64)
        yield _view(cp, ptr + (seg.offset + start) * _F32, n), summed_values(cp, where, seg.ranks).astype(cp.float32)


def _put(cp: Any, ptr: int, seg: Segment) -> None:
    for view, values in _chunks(cp, ptr, seg):
        view[...] = values


def _wrong(cp: Any, ptr: int, seg: Segment) -> int:
    return sum(int(cp.count_nonzero(view != values)) for view, values in _chunks(cp, ptr, seg))


def _view(cp: Any, ptr: int, count: int) -> Any:
    memory = cp.cuda.UnownedMemory(ptr, count * _F32, None)
    return cp.ndarray((count,), dtype=cp.float32, memptr=cp.cuda.MemoryPointer(memory, 0))
