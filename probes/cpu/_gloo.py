"""All-reduce over gloo across processes on this host (127.0.0.1 only), the way nccl-tests times it.

Rank processes are spawned once per item and kept for the whole size sweep. Per sample: barrier, wall
clock around ``iters`` all-reduces (float32 sum, in place, the offset rotated inside a buffer of the
largest size as nccl-tests does), the time averaged over ranks. The data check runs apart: every rank
contributes rank+1, every element must come back as n(n+1)/2.
"""

from __future__ import annotations

import contextlib
import importlib.util
import multiprocessing as mp
import os
import tempfile
import time
from datetime import timedelta
from multiprocessing.connection import Connection
from typing import Any

from topology import format_cpulist

from ..core import Item, Pairs, ProbeError, Waived, all_reduce_bytes, rotation_offset

_INIT_TIMEOUT_S = 60


def _rank_main(rank: int, world: int, cpus: tuple[int, ...], store: str, conn: Connection) -> None:
    try:
        if cpus:
            os.sched_setaffinity(0, cpus)
        import torch
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_gloo_available():
            conn.send(("waived", "this torch build has no gloo backend"))
            return
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                                timeout=timedelta(seconds=_INIT_TIMEOUT_S))
    except Exception as exc:  # reported to the probe process, which fails the item
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", str(torch.__version__)))  # a TorchVersion would need torch to unpickle
    buf = torch.zeros(0, dtype=torch.float32)
    while True:
        op, *args = conn.recv()
        if op == "stop":
            break
        try:
            if op == "alloc":
                buf = torch.zeros(args[0] // 4, dtype=torch.float32)
                conn.send(("ok", None))
            elif op == "sample":
                conn.send(("ok", _timed(dist, buf, *args)))
            elif op == "verify":
                conn.send(("ok", _check(dist, buf, rank, world, args[0])))
        except Exception as exc:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
    dist.destroy_process_group()


def _timed(dist: Any, buf: Any, size: int, warmup: int, iters: int) -> float:
    import torch

    count, capacity = size // 4, buf.numel()
    buf.zero_()  # zeros stay zeros: no overflow however many sums
    for i in range(warmup):
        dist.all_reduce(buf.narrow(0, rotation_offset(i, count, capacity), count))
    dist.barrier()
    t0 = time.perf_counter()
    for i in range(iters):
        dist.all_reduce(buf.narrow(0, rotation_offset(i, count, capacity), count))
    elapsed = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
    dist.all_reduce(elapsed)  # nccl-tests -a 1: the mean over ranks
    return float(elapsed.item()) / int(dist.get_world_size())


def _check(dist: Any, buf: Any, rank: int, world: int, size: int) -> int:
    import torch

    view = buf.narrow(0, 0, size // 4)
    view.fill_(rank + 1)
    dist.all_reduce(view)
    wrong = torch.tensor([int((view != world * (world + 1) / 2).sum().item())], dtype=torch.int64)
    dist.all_reduce(wrong)
    return int(wrong.item())


class _Sweep:
    channels = 1

    def __init__(self, session: GlooSession, size: int) -> None:
        self.session = session
        self.size = size
        self.bytes_per_op = all_reduce_bytes(size, len(session.conns))

    def sample(self, warmup: int, iters: int) -> tuple[float, ...]:
        times = self.session.ask(("sample", self.size, warmup, iters))
        return (float(times[0]),)

    def verify(self) -> str | None:
        wrong = int(self.session.ask(("verify", self.size))[0])
        return f"{wrong} wrong elements over all ranks" if wrong else None

    def close(self) -> None:
        pass


class GlooSession:
    def __init__(self, item: Item) -> None:
        # Only the rank processes import torch (seconds and hundreds of MB); a rank says whether gloo is there.
        if importlib.util.find_spec("torch") is None:
            raise Waived("torch is not installed: No module named 'torch'")
        os.environ["GLOO_SOCKET_IFNAME"] = "lo"  # ranks talk over loopback only
        self._dir = tempfile.TemporaryDirectory(prefix="topolink-gloo-")
        store = os.path.join(self._dir.name, "store")
        ctx = mp.get_context("spawn")
        world = len(item.targets)
        self.conns: list[Connection] = []
        self.procs: list[Any] = []
        for rank, target in enumerate(item.targets):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_rank_main, args=(rank, world, target.cpus, store, child), daemon=True)
            proc.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(proc)
        self.versions = self._gather("ready")
        self.capacity = max(item.sizes)
        self.ask(("alloc", self.capacity))
        cpus = [format_cpulist(t.cpus) if t.cpus else "unbound" for t in item.targets]
        self.conditions: Pairs = (("ranks", str(world)), ("rank_cpus", " ".join(cpus)),
                                  ("transport", "gloo over loopback (GLOO_SOCKET_IFNAME=lo)"),
                                  ("torch", str(self.versions[0])), ("mode", "in place"))

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
            if status == "waived":
                self.close()
                raise Waived(str(value))
            if expect == "ready" and status != "ready":
                raise ProbeError(f"gloo rank {rank} answered {status!r}")
            out.append(value)
        return out

    def ask(self, message: tuple[Any, ...]) -> list[Any]:
        for conn in self.conns:
            conn.send(message)
        return self._gather("ok")

    def workload(self, size: int) -> _Sweep:
        return _Sweep(self, size)

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
