"""Collectives over gloo across processes on this host (127.0.0.1 only), timed as nccl-tests times them.

torch is imported once, in the probe process, and the rank processes are forked from it: a rank starts in
milliseconds instead of importing torch again (about 1.5 s each). The ranks of one placement (the CPUs
of each rank) are kept for the whole pass and serve every collective planned on them.

Per sample and mode: barrier, wall clock around ``iters`` operations (float32, the buffers shifted inside
buffers of the largest size as nccl-tests does), the time averaged over ranks (nccl-tests ``-a 1``). The
data check runs apart, once per size and mode: every rank sends values that depend on its rank and on each
element's position (``element_values``), and every element received must be what the collective makes of
them, so a misplaced, foreign or missing element is counted wrong.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from multiprocessing.connection import Connection
from typing import Any

from topology import format_cpulist

from ..core import (
    IN_PLACE,
    Item,
    Pairs,
    ProbeError,
    Segment,
    Waived,
    checked,
    counts,
    element_values,
    moved,
    received_segments,
    rotation_offset,
    sent_segment,
)

_INIT_TIMEOUT_S = 60
_CHECK_CHUNK = 1 << 20  # elements per step of the data check (8 MiB of int64 positions)


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
        self.send = self.recv = torch.zeros(0)

    def alloc(self, capacity: int) -> None:
        self.send = self.torch.zeros(capacity // 4, dtype=self.torch.float32)
        self.recv = self.torch.zeros(capacity // 4, dtype=self.torch.float32)

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
        """((offset, count), float32 values) of the segment, a bounded chunk at a time."""
        torch = self.torch
        for start in range(0, seg.count, _CHECK_CHUNK):
            n = min(_CHECK_CHUNK, seg.count - start)
            where = torch.arange(seg.base + start, seg.base + start + n, dtype=torch.int64)
            yield (seg.offset + start, n), element_values(where, seg.ranks).to(torch.float32)


def _rank_main(rank: int, world: int, cpus: tuple[int, ...], store: str, conn: Connection) -> None:
    try:
        if cpus:
            os.sched_setaffinity(0, cpus)
        import torch
        import torch.distributed as dist

        dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                                timeout=timedelta(seconds=_INIT_TIMEOUT_S))
    except Exception as exc:  # reported to the probe process, which fails the item
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", str(torch.__version__)))  # a TorchVersion would need torch to unpickle
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


class GlooGroup:
    """Rank processes, one per target, forked from this process once torch is imported here."""

    def __init__(self, placement: tuple[tuple[int, ...], ...]) -> None:
        try:
            import torch
            import torch.distributed as dist
        except ImportError as exc:
            raise Waived(f"torch is not installed: {exc}") from exc
        if not dist.is_available() or not dist.is_gloo_available():
            raise Waived("this torch build has no gloo backend")
        os.environ["GLOO_SOCKET_IFNAME"] = "lo"  # ranks talk over loopback only
        self.torch_version = str(torch.__version__)
        self.placement, self.capacity = placement, 0
        self._dir = tempfile.TemporaryDirectory(prefix="topolink-gloo-")
        store = os.path.join(self._dir.name, "store")
        ctx = mp.get_context("fork")
        self.conns: list[Connection] = []
        self.procs: list[Any] = []
        for rank, cpus in enumerate(placement):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_rank_main, args=(rank, len(placement), cpus, store, child), daemon=True)
            proc.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(proc)
        self._gather("ready")

    def _gather(self, expect: str) -> list[Any]:
        out = []
        for rank, conn in enumerate(self.conns):
            try:
                status, value = conn.recv()
            except EOFError:
                self.close()
                raise ProbeError(f"gloo rank {rank} died") from None
            if status == "error":
                self.close()
                raise ProbeError(f"gloo rank {rank}: {value}")
            if expect == "ready" and status != "ready":
                self.close()
                raise ProbeError(f"gloo rank {rank} answered {status!r}")
            out.append(value)
        return out

    def ask(self, message: tuple[Any, ...]) -> list[Any]:
        for conn in self.conns:
            conn.send(message)
        return self._gather("ok")

    def reserve(self, capacity: int) -> None:
        """Send and receive buffers of ``capacity`` bytes in every rank (grown, never shrunk)."""
        if capacity > self.capacity:
            self.ask(("alloc", capacity))
            self.capacity = capacity

    @property
    def alive(self) -> bool:
        return bool(self.procs) and all(p.is_alive() for p in self.procs)

    def close(self) -> None:
        for conn in self.conns:
            with contextlib.suppress(OSError):
                conn.send(("stop",))
        for proc in self.procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join()
        self.conns, self.procs = [], []
        self._dir.cleanup()


class _Sweep:
    check_each_sample = False

    def __init__(self, session: GlooSession, size: int) -> None:
        self.session, self.size = session, size
        self.channels = len(session.modes)
        self.bytes_per_op = moved(session.op, size, len(session.group.conns))

    def prepare(self) -> None:
        pass

    def sample(self, warmup: int, iters: int) -> tuple[float, ...]:
        s = self.session
        return tuple(float(s.group.ask(("sample", (s.op, self.size, mode), warmup, iters))[0]) for mode in s.modes)

    def verify(self) -> str | None:
        s = self.session
        for mode in s.modes:
            wrong = int(s.group.ask(("verify", (s.op, self.size, mode)))[0])
            if wrong:
                return f"{wrong} wrong elements over all ranks ({mode.replace('_', ' ')})"
        return None

    def close(self) -> None:
        pass


class GlooSession:
    def __init__(self, item: Item, group: GlooGroup, modes: tuple[str, ...]) -> None:
        self.op, self.group, self.modes = item.test, group, modes
        world = len(item.targets)
        group.reserve(max(max(counts(self.op, s, world).send, counts(self.op, s, world).recv) * 4
                          for s in item.sizes))
        cpus = [format_cpulist(t.cpus) if t.cpus else "unbound" for t in item.targets]
        self.conditions: Pairs = (("ranks", str(world)), ("rank_cpus", " ".join(cpus)),
                                  ("transport", "gloo over loopback (GLOO_SOCKET_IFNAME=lo)"),
                                  ("torch", group.torch_version),
                                  ("ranks_started", "forked from the probe process after importing torch once"),
                                  ("data_check", "once per size and mode, untimed (nccl-tests)"))

    def workload(self, size: int) -> _Sweep:
        return _Sweep(self, size)

    def close(self) -> None:
        pass
