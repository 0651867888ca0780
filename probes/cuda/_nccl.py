"""NCCL collectives in one process (``ncclCommInitAll`` + grouped calls, nccl-tests' ``-g N``), timed on
the GPUs: per size and mode, the ``iters`` grouped operations (float32, the buffers shifted inside buffers
of the largest size as nccl-tests does) are captured once as a CUDA graph per GPU (NCCL supports
capture; nccl-tests ``-G``), and each sample launches the graphs behind the latch, between CUDA events on
every GPU; the sample is the slowest GPU's time. Python's cost of issuing the calls (a group start, a
device switch and a call per GPU, per operation) is then outside the timed window, which it is not when
small sizes are enqueued one by one. Where capture is refused, the operations are issued one by one and
timed from the first enqueue (said in the conditions).

Out of place, then in place (nccl-tests' order); alltoall only out of place. The data check runs apart,
once per size and mode (nccl-tests ``-c 1``), on the GPUs.
"""

from __future__ import annotations

import os
from typing import Any

from ..core import (
    IN_PLACE,
    Counts,
    Item,
    Pairs,
    ProbeError,
    Waived,
    counts,
    expected,
    modes,
    moved,
    rotation_offset,
    sent,
)
from ._buffers import Latch, Timer
from ._runtime import cuda_error, device_malloc, load_nccl

_F32 = 4


class NcclSession:
    def __init__(self, cp: Any, item: Item, kernels: Any | None) -> None:
        nccl, why = load_nccl()
        if nccl is None:
            raise Waived(why)
        self.cp, self.nccl, self.op, self.modes = cp, nccl, item.test, modes(item.test)
        self.devices = [t.index for t in item.targets if t.index is not None]
        if len(self.devices) != len(item.targets):
            raise ProbeError(f"every GPU of an {self.op} needs a CUDA ordinal")
        self.ranks = len(self.devices)
        try:
            self.comms = nccl.NcclCommunicator.initAll(self.devices)
        except Exception as exc:  # NcclError, CUDA errors: all a failed init
            raise ProbeError(f"NCCL initialisation failed on GPUs {self.devices}: {exc}") from exc
        self.capacity = max(max(counts(self.op, s, self.ranks).send, counts(self.op, s, self.ranks).recv) * _F32
                            for s in item.sizes)
        self.send: list[int] = []
        self.recv: list[int] = []
        self.timers: list[Timer] = []
        self.latch: Latch | None = None
        try:
            for d in self.devices:
                self.send.append(device_malloc(cp, d, self.capacity))
                self.recv.append(device_malloc(cp, d, self.capacity))
                self.timers.append(Timer(cp, d))
            self.zero()
            self.latch = Latch(cp, kernels) if kernels is not None else None
        except BaseException:
            self.close()
            raise
        self.graph_refused = ""  # why capture failed, once it has
        env = {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}
        self._conditions: dict[str, str] = {
            "nccl": str(nccl.get_version()), "ranks": str(self.ranks),
            "modes": ", ".join(m.replace("_", " ") for m in self.modes),
            "launch": "one process, grouped calls (nccl-tests -g)",
            "nccl_env": " ".join(f"{k}={v}" for k, v in sorted(env.items())) or "defaults",
            "data_check": "once per size and mode, on the GPUs, untimed (nccl-tests -c 1)",
        }

    @property
    def conditions(self) -> Pairs:
        how = ("the timed loop captured as one CUDA graph per GPU, launched behind a latch; CUDA events on every "
               "GPU, the slowest one's time (nccl-tests -G, timed on the GPUs)")
        if self.graph_refused:
            how = f"operations issued one by one from Python between CUDA events (no graph: {self.graph_refused})"
        return (*self._conditions.items(), ("timing", how))

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
        """The ``iters`` operations as one graph per GPU; None (and why, once) when capture is refused."""
        if self.graph_refused:
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
        """Seconds for ``iters`` operations: the slowest GPU's, between its own events."""
        cp, latch = self.cp, self.latch if graphs is not None else None
        if latch:
            latch.arm()
        for t in self.timers:
            with cp.cuda.Device(t.ordinal):
                if latch:
                    latch.hold(t.ordinal, t.stream)
                t.start.record(t.stream)
        if graphs is not None:
            for t, g in zip(self.timers, graphs, strict=True):
                with cp.cuda.Device(t.ordinal):
                    g.launch(t.stream)
        else:
            for i in range(iters):
                self.issue(size, mode, i)
        for t in self.timers:
            with cp.cuda.Device(t.ordinal):
                t.end.record(t.stream)
        if latch:
            latch.release()
        self.sync()
        return max(float(cp.cuda.get_elapsed_time(t.start, t.end)) for t in self.timers) / 1e3

    def workload(self, size: int) -> _Collective:
        return _Collective(self, size)

    def close(self) -> None:
        for comm in getattr(self, "comms", []):
            comm.destroy()
        self.comms = []
        for ptr in self.send + self.recv:
            self.cp.cuda.runtime.free(ptr)  # cudaFree finds the owning device from the address (UVA)
        self.send, self.recv = [], []
        if self.latch is not None:
            self.latch.close()
            self.latch = None


class _Collective:
    check_each_sample = False

    def __init__(self, session: NcclSession, size: int) -> None:
        self.session, self.size = session, size
        self.channels = len(session.modes)
        self.bytes_per_op = moved(session.op, size, session.ranks)
        self.graphs: dict[str, list[Any] | None] = {}

    def prepare(self) -> None:
        pass

    def sample(self, warmup: int, iters: int) -> tuple[float, ...]:
        s = self.session
        out = []
        try:
            for mode in s.modes:
                for i in range(warmup):
                    s.issue(self.size, mode, i)
                s.sync()
                if mode not in self.graphs:
                    self.graphs[mode] = s.capture(self.size, mode, iters)
                out.append(s.timed(self.size, mode, iters, self.graphs[mode]))
        except s.cp.cuda.runtime.CUDARuntimeError as exc:
            raise cuda_error(s.cp, exc, s.op) from exc
        return tuple(out)

    def verify(self) -> str | None:
        """Rank r sends what ``sent`` says; every element received must be what ``expected`` says."""
        s, cp = self.session, self.session.cp
        c = counts(s.op, self.size, s.ranks)
        for mode in s.modes:
            s.zero()
            for rank, d in enumerate(s.devices):
                with cp.cuda.Device(d):
                    for j, (ptr, n) in enumerate(self._chunks(rank, c, mode, sending=True)):
                        _view(cp, ptr, n).fill(sent(s.op, rank, s.ranks, j))
                    cp.cuda.runtime.deviceSynchronize()
            s.issue(self.size, mode, 0)
            s.sync()
            wrong = 0
            for rank, d in enumerate(s.devices):
                with cp.cuda.Device(d):
                    for j, (ptr, n) in enumerate(self._chunks(rank, c, mode, sending=False)):
                        wrong += int(cp.count_nonzero(_view(cp, ptr, n) != expected(s.op, rank, s.ranks, j)))
            if wrong:
                s.zero()
                return f"{wrong} wrong elements over all ranks ({mode.replace('_', ' ')})"
        s.zero()
        return None

    def _chunks(self, rank: int, c: Counts, mode: str, *, sending: bool) -> list[tuple[int, int]]:
        """(address, elements) of each chunk ``rank`` sends from or receives into."""
        s = self.session
        src, dst = s.ends(rank, c, mode, 0)
        ptr, total = (src, c.send) if sending else (dst, c.recv)
        parts = s.ranks if (s.op == "alltoall" or (s.op == "all_gather" and not sending)) else 1
        each = total // parts
        return [(ptr + j * each * _F32, each) for j in range(parts)]

    def close(self) -> None:
        self.graphs = {}


def _view(cp: Any, ptr: int, count: int) -> Any:
    memory = cp.cuda.UnownedMemory(ptr, count * _F32, None)
    return cp.ndarray((count,), dtype=cp.float32, memptr=cp.cuda.MemoryPointer(memory, 0))
