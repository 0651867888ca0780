"""Collectives over gloo across processes on this host (127.0.0.1 only), timed as nccl-tests times them.

torch is imported once, in the probe process, and the rank processes (``_rank``) are forked from it: a rank
starts in milliseconds instead of importing torch again (2 s or more each). The ranks of one placement (the
CPUs of each rank) are kept for the whole pass and serve every collective planned on them.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import tempfile
from multiprocessing.connection import Connection
from typing import Any

from topology import format_cpulist

from ..core import Item, Pairs, ProbeError, Waived, counts, moved
from ._rank import rank_main, rank_threads


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
        for rank, (cpus, threads) in enumerate(zip(placement, rank_threads(placement), strict=True)):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=rank_main, args=(rank, len(placement), cpus, store, child),
                               kwargs={"threads": threads}, daemon=True)
            proc.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(proc)
        self.threads: tuple[int, ...] = tuple(self._gather("ready"))  # as each rank runs, not as asked

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
                                  ("rank_threads", " ".join(map(str, group.threads))),
                                  ("transport", "gloo over loopback (GLOO_SOCKET_IFNAME=lo)"),
                                  ("torch", group.torch_version),
                                  ("ranks_started", "forked from the probe process after importing torch once"),
                                  ("data_check", "once per size and mode, untimed (nccl-tests)"))

    def workload(self, size: int) -> _Sweep:
        return _Sweep(self, size)

    def close(self) -> None:
        pass
