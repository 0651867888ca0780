"""A gloo rank: the process forked from the probe process once torch is imported there, which holds one
process group and its send and receive buffers, and times, or checks, what the probe process asks for.

Each rank runs torch's own operations (the out-of-place copy, the data check) on as many threads as it has
CPUs to itself (``rank_threads``): torch's default, one OpenMP thread per CPU of the machine in every rank,
puts the ranks' spinning threads on the same CPUs, and each parallel operation then waits for the scheduler
(measured on 2 CPUs shared by 2 ranks: twenty 4 MiB copies 30 times slower, each data check most of a
second). gloo's own transfers and reductions run on the calling thread either way.

Per sample and mode: barrier, wall clock around ``iters`` operations (float32, the buffers shifted inside
buffers of the largest size as nccl-tests does), the time averaged over ranks (nccl-tests ``-a 1``). The
data check runs apart, once per size and mode: every rank sends values that depend on its rank and on each
element's position (``element_values``), and every element received must be what the collective makes of
them, so a misplaced, foreign or missing element is counted wrong. The values are made a chunk at a time in
working space the rank keeps (``values_into``): fresh arrays per step, faulting in their pages each time,
made a 4 MiB check take 0.1-0.2 s on a loaded machine.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from multiprocessing.connection import Connection
from typing import Any

from ..core import (
    IN_PLACE,
    ProbeError,
    Segment,
    checked,
    counts,
    received_segments,
    rotation_offset,
    sent_segment,
    values_into,
)

_INIT_TIMEOUT_S = 60
_CHECK_CHUNK = 1 << 18  # elements per step of the data check: 5 MiB of working space, which stays in cache


@dataclass(frozen=True, slots=True)
class _Call:
    op: str
    size: int
    mode: str


def _run(dist: Any, op: str, inp: Any, out: Any) -> None:
    if op == "all_reduce":
        if out.data_ptr() != inp.data_ptr():
            out.copy_(inp)
        dist.all_reduce(out)
    elif op == "all_gather":
        dist.all_gather_into_tensor(out, inp)
    elif op == "reduce_scatter":
        dist.reduce_scatter_tensor(out, inp)
    elif op == "alltoall":
        dist.all_to_all_single(out, inp)
    else:
        raise ProbeError(f"gloo has no {op}")


class _Rank:
    """What a rank process holds: its process group and its send and receive buffers."""

    def __init__(self, torch: Any, dist: Any) -> None:
        self.torch, self.dist = torch, dist
        self.rank, self.ranks = dist.get_rank(), dist.get_world_size()
        self.send = self.recv = self.positions = self.scratch = self.values = torch.zeros(0)

    def alloc(self, capacity: int) -> None:
        torch, n = self.torch, capacity // 4
        self.send = torch.zeros(n, dtype=torch.float32)
        self.recv = torch.zeros(n, dtype=torch.float32)
        # the data check's working space, a chunk at most, kept (fresh arrays fault in their pages each time)
        chunk = min(n, _CHECK_CHUNK)
        self.positions = torch.zeros(chunk, dtype=torch.int64)
        self.scratch = torch.zeros(chunk, dtype=torch.int64)
        self.values = torch.zeros(chunk, dtype=torch.float32)

    def views(self, call: _Call, shift: int) -> tuple[Any, Any]:
        """(input, output) of one operation, laid out as nccl-tests lays them out (offsets in elements)."""
        c = counts(call.op, call.size, self.ranks)
        if call.mode != IN_PLACE:
            return self.send.narrow(0, shift, c.send), self.recv.narrow(0, shift, c.recv)
        if call.op == "all_gather":
            out = self.recv.narrow(0, shift, c.recv)
            return out.narrow(0, self.rank * c.send_in_place, c.send), out
        if call.op == "reduce_scatter":
            inp = self.send.narrow(0, shift, c.send)
            return inp, inp.narrow(0, self.rank * c.recv_in_place, c.recv)
        buf = self.recv.narrow(0, shift, c.recv)  # all_reduce
        return buf, buf

    def timed(self, call: _Call, warmup: int, iters: int) -> float:
        c = counts(call.op, call.size, self.ranks)
        step, capacity, dist = max(c.send, c.recv), self.recv.numel(), self.dist
        self.send.zero_()  # zeros stay zeros: no overflow however many sums
        for i in range(warmup):
            _run(dist, call.op, *self.views(call, rotation_offset(i, step, capacity)))
        dist.barrier()
        t0 = time.perf_counter()
        for i in range(iters):
            _run(dist, call.op, *self.views(call, rotation_offset(i, step, capacity)))
        elapsed = self.torch.tensor([time.perf_counter() - t0], dtype=self.torch.float64)
        dist.all_reduce(elapsed)  # nccl-tests -a 1: the mean over ranks
        seconds: float = elapsed.item() / self.ranks
        return seconds

    def check(self, call: _Call) -> int:
        rank, ranks, c = self.rank, self.ranks, counts(call.op, call.size, self.ranks)
        self.recv.zero_()
        inp, out = self.views(call, 0)
        for part, values in self._values(sent_segment(rank, c)):
            inp.narrow(0, *part).copy_(values)
        _run(self.dist, call.op, inp, out)
        wrong = 0
        if checked(call.op, call.mode):
            for seg in received_segments(call.op, rank, ranks, c):
                wrong += sum(int((out.narrow(0, *part) != v).sum().item()) for part, v in self._values(seg))
        total = self.torch.tensor([wrong], dtype=self.torch.int64)
        self.dist.all_reduce(total)
        self.send.zero_()
        self.recv.zero_()  # zeros stay zeros in the timed loop
        return int(total.item())

    def _values(self, seg: Segment) -> Iterator[tuple[tuple[int, int], Any]]:
        """((offset, count), float32 values) of the segment, a chunk at a time, in the rank's working space:
        each chunk is used before the next is made."""
        torch = self.torch
        for start in range(0, seg.count, _CHECK_CHUNK):
            n = min(_CHECK_CHUNK, seg.count - start)
            where = torch.arange(seg.base + start, seg.base + start + n, out=self.positions[:n])
            yield (seg.offset + start, n), values_into(where, seg.ranks, self.values[:n], self.scratch[:n])


def rank_threads(placement: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
    """torch threads per rank: its CPUs (all of this process's when unbound) shared out among the ranks
    whose CPUs overlap its own, at least one, so that the ranks' threads together never outnumber the CPUs."""
    here = frozenset(os.sched_getaffinity(0))
    sets = [frozenset(cpus) or here for cpus in placement]
    return tuple(max(1, len(mine) // sum(1 for other in sets if other & mine)) for mine in sets)


def rank_main(rank: int, world: int, cpus: tuple[int, ...], store: str, conn: Connection, *, threads: int) -> None:
    try:
        if cpus:
            os.sched_setaffinity(0, cpus)
        import torch
        import torch.distributed as dist

        torch.set_num_threads(threads)
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                                timeout=timedelta(seconds=_INIT_TIMEOUT_S))
    except Exception as exc:  # reported to the probe process, which fails the item
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", torch.get_num_threads()))
    me = _Rank(torch, dist)
    while True:
        op, *args = conn.recv()
        if op == "stop":
            break
        try:
            if op == "alloc":
                me.alloc(args[0])
                conn.send(("ok", None))
            elif op == "sample":
                call, warmup, iters = args
                conn.send(("ok", me.timed(_Call(*call), warmup, iters)))
            elif op == "verify":
                conn.send(("ok", me.check(_Call(*args[0]))))
        except Exception as exc:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
    dist.destroy_process_group()


