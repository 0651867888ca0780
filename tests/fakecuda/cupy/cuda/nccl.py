"""``cupy.cuda.nccl`` of the fake: ``NcclCommunicator.initAll`` and grouped calls in one process.

As in NCCL, one thread that drives several ranks must group its calls (an ungrouped call would wait for
the other ranks forever): here it is an error. A group becomes one operation per rank on the stream its
calls name; the k-th group of every rank is one collective, run when every rank's stream has reached it.
Captured into a graph, a group takes its place in the sequence each time the graph is launched.

The version is ``FAKECUDA_NCCL_VERSION`` (default 22803, NCCL 2.28.3); ``allToAll`` (``ncclAlltoAll``) exists
from 2.28 on and is refused below it, as the symbol is missing there. Each call costs the host one launch.
``FAKECUDA_NCCL_FAULT=rotate``: an all-reduce puts every element one place further on.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._machine import MACHINE, Op, Stream

NCCL_FLOAT32 = 7
NCCL_SUM = 0
available = True
_RATE = 50e9


class NcclError(RuntimeError):
    pass


_VERSION = int(os.environ.get("FAKECUDA_NCCL_VERSION", "22803"))
_FAULT = os.environ.get("FAKECUDA_NCCL_FAULT", "")


def get_version() -> int:
    return _VERSION


@dataclass
class _Call:
    rank: int
    kind: str
    args: tuple[int, ...]


@dataclass
class _Clique:
    devices: list[int]
    taken: list[int] = field(default_factory=list)
    arrived: dict[int, dict[int, tuple[float, list[_Call]]]] = field(default_factory=dict)
    done: dict[int, float] = field(default_factory=dict)

    def take(self, rank: int) -> int:
        self.taken[rank] += 1
        return self.taken[rank]

    def arrive(self, seq: int, rank: int, clock: float, calls: list[_Call]) -> bool:
        if seq in self.done:
            return True
        here = self.arrived.setdefault(seq, {})
        here[rank] = (clock, calls)
        if len(here) < len(self.devices):
            return False
        moved = _execute(self, [c for r in sorted(here) for c in here[r][1]])
        if MACHINE.corrupt:
            last = here[max(here)][1][-1]
            _floats(last.args[1] if last.kind != "recv" else last.args[0], 1, self.devices[last.rank])[0] = -1.0
        self.done[seq] = max(t for t, _ in here.values()) + moved / _RATE
        MACHINE.log("nccl_group", seq=seq, calls=sorted({c.kind for r in here for c in here[r][1]}))
        return True


def _floats(ptr: int, count: int, device: int) -> Any:
    alloc = MACHINE.find(ptr, count * 4)
    if alloc is None or alloc.device != device:
        raise NcclError(f"NCCL buffer {ptr:#x} is not memory of GPU {device}")
    return np.frombuffer(MACHINE.view(ptr, count * 4), dtype=np.float32)


def _execute(clique: _Clique, calls: list[_Call]) -> int:
    """Move the data of one group over all ranks, in place in the ranks' buffers (a temporary only where
    an in-place operation reads what it overwrites); the bytes moved."""
    n, dev = len(clique.devices), clique.devices
    by_rank = [[c for c in calls if c.rank == r and c.kind not in ("send", "recv", "allToAll")] for r in range(n)]
    moved = 0
    for i in range(len(by_rank[0])):
        ops = [by_rank[r][i] for r in range(n)]
        kind, count = ops[0].kind, ops[0].args[2]
        if any(o.kind != kind or o.args[2] != count for o in ops):
            raise NcclError(f"ranks disagree on collective {i} of the group")
        if kind == "allReduce":  # summed into rank 0's receive buffer, which every other rank's then copies
            first = _floats(ops[0].args[1], count, dev[0])
            first[:] = _floats(ops[0].args[0], count, dev[0])
            for o in ops[1:]:
                first += _floats(o.args[0], count, dev[o.rank])
            if _FAULT == "rotate":  # every element summed right, one place further on
                first[:] = np.roll(first, 1)
            for o in ops[1:]:
                _floats(o.args[1], count, dev[o.rank])[:] = first
        elif kind == "allGather":  # in place, each rank's part is already in its own slot
            for o in ops:
                out = _floats(o.args[1], count * n, dev[o.rank])
                for j, src in enumerate(ops):
                    if j != o.rank or src.args[0] != o.args[1] + j * count * 4:
                        out[j * count:(j + 1) * count] = _floats(src.args[0], count, dev[src.rank])
        elif kind == "reduceScatter":
            for o in ops:
                part = sum(_floats(src.args[0], count * n, dev[src.rank])[o.rank * count:(o.rank + 1) * count]
                           for src in ops)
                _floats(o.args[1], count, dev[o.rank])[:] = part
        moved += count * 4 * n
    exchanges = [c for c in calls if c.kind == "allToAll"]  # (send, recv, count): chunk p goes to rank p
    if exchanges:
        if len(exchanges) != n or len({c.args[2] for c in exchanges}) != 1:
            raise NcclError("ranks disagree on the alltoall of the group")
        count = exchanges[0].args[2]
        in_place = any(c.args[0] == c.args[1] for c in exchanges)
        sent = {c.rank: _floats(c.args[0], count * n, dev[c.rank]) for c in exchanges}
        if in_place:
            sent = {r: v.copy() for r, v in sent.items()}
        for c in exchanges:
            out = _floats(c.args[1], count * n, dev[c.rank])
            for p in range(n):
                out[p * count:(p + 1) * count] = sent[p][c.rank * count:(c.rank + 1) * count]
        moved += count * 4 * n * n
    sends = [c for c in calls if c.kind == "send"]
    recvs = [c for c in calls if c.kind == "recv"]
    in_place = bool({s.args[0] for s in sends} & {r.args[0] for r in recvs})
    data = {(s.rank, s.args[2]): _floats(s.args[0], s.args[1], dev[s.rank]) for s in sends}
    if in_place:
        data = {k: v.copy() for k, v in data.items()}
    for r in recvs:  # recv(buf, count, peer): from rank ``peer`` to ``r.rank``
        key = (r.args[2], r.rank)
        if key not in data or len(data[key]) != r.args[1]:
            raise NcclError(f"rank {r.rank} receives from rank {r.args[2]} what it did not send")
        _floats(r.args[0], r.args[1], dev[r.rank])[:] = data.pop(key)
        moved += r.args[1] * 4
    if data:
        raise NcclError(f"sends without a receive: {sorted(data)}")
    return moved


_depth = [0]
_pending: list[tuple[NcclCommunicator, _Call, Stream]] = []


def groupStart() -> None:  # noqa: N802
    _depth[0] += 1


def groupEnd() -> None:  # noqa: N802
    if _depth[0] == 0:
        raise NcclError("groupEnd without groupStart")
    _depth[0] -= 1
    if _depth[0] == 0:
        pending = list(_pending)
        _pending.clear()
        for comm in dict.fromkeys(c for c, _, _ in pending):
            calls = [call for c, call, _ in pending if c is comm]
            streams = {s.ptr for c, _, s in pending if c is comm}
            if len(streams) != 1:
                raise NcclError("one rank's calls of a group on several streams (not modelled)")
            stream = next(s for c, _, s in pending if c is comm)
            if stream.capturing is not None:
                MACHINE.enqueue(stream, Op("nccl group (captured)", _never, clone=lambda c=comm, k=calls: c.op(k)))
            else:
                MACHINE.enqueue(stream, comm.op(calls))


def _never(stream: Stream) -> None:
    raise RuntimeError("fake CUDA: a captured NCCL group ran without its graph being launched")


class NcclCommunicator:
    def __init__(self, clique: _Clique, rank: int) -> None:
        self.clique, self.rank, self.device = clique, rank, clique.devices[rank]
        self.destroyed = False

    @classmethod
    def initAll(cls, devices: list[int]) -> list[NcclCommunicator]:  # noqa: N802
        clique = _Clique(list(devices), [0] * len(devices))
        MACHINE.log("nccl_init", devices=list(devices))
        return [cls(clique, r) for r in range(len(devices))]

    def rank_id(self) -> int:
        return self.rank

    def destroy(self) -> None:
        self.destroyed = True

    def op(self, calls: list[_Call]) -> Op:
        seq, clique, rank = self.clique.take(self.rank), self.clique, self.rank

        def run(s: Stream) -> None:
            s.clock = max(s.clock, clique.done[seq])

        return Op(f"nccl group {seq}", run, lambda s: clique.arrive(seq, rank, s.clock, calls))

    def _call(self, kind: str, args: tuple[int, ...], dtype: int, stream: int) -> None:
        if self.destroyed:
            raise NcclError("call on a destroyed communicator")
        if dtype != NCCL_FLOAT32:
            raise NcclError("the fake moves float32 only")
        s = MACHINE.stream(stream)
        if s.device != self.device or MACHINE.current_device[-1] != self.device:
            raise NcclError(f"rank {self.rank} (GPU {self.device}) called on GPU {MACHINE.current_device[-1]}'s "
                            f"context or stream")
        if _depth[0] == 0 and len(self.clique.devices) > 1:
            raise NcclError("an ungrouped call from the thread that drives every rank would wait forever")
        MACHINE.launch()
        _pending.append((self, _Call(self.rank, kind, args), s))
        if _depth[0] == 0:
            groupStart()
            groupEnd()

    def allReduce(self, send: int, recv: int, count: int, dtype: int, op: int, stream: int) -> None:  # noqa: N802, PLR0917
        del op
        self._call("allReduce", (send, recv, count), dtype, stream)

    def allGather(self, send: int, recv: int, count: int, dtype: int, stream: int) -> None:  # noqa: N802
        self._call("allGather", (send, recv, count), dtype, stream)

    def reduceScatter(self, send: int, recv: int, count: int, dtype: int, op: int,  # noqa: N802, PLR0917
                      stream: int) -> None:
        del op
        self._call("reduceScatter", (send, recv, count), dtype, stream)

    def allToAll(self, send: int, recv: int, count: int, dtype: int, stream: int) -> None:  # noqa: N802
        if _VERSION < 22800:
            raise NcclError(f"ncclAlltoAll is not in NCCL {_VERSION} (2.28 added it)")
        self._call("allToAll", (send, recv, count), dtype, stream)

    def send(self, buf: int, count: int, dtype: int, peer: int, stream: int) -> None:
        self._call("send", (buf, count, peer), dtype, stream)

    def recv(self, buf: int, count: int, dtype: int, peer: int, stream: int) -> None:
        self._call("recv", (buf, count, peer), dtype, stream)
