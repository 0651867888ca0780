"""The peak memory of a probe child and everything it started (its session: gloo ranks, perftest), sampled
while a pass runs. Each sample sums the proportional set size (psutil's ``memory_full_info().pss``, from
``/proc/PID/smaps_rollup``: a page shared by forked ranks counted once over them, as the container's memory
cgroup charges it once) over the session's processes (``os.getsid``); the fake CUDA runtime's device memory,
shared memory in host RAM that a GPU would hold in its own, is left out (``Pss_Shmem``, which psutil does not
report, read from the same file) for a simulated pass. Not a test: the benchmarks print what it finds."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil


def _session(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


def _pss_shmem(pid: int) -> int:
    """``Pss_Shmem`` of ``/proc/PID/smaps_rollup`` in bytes: the one figure psutil does not give."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key == "Pss_Shmem":
                return int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _pss(pid: int, *, without_shmem: bool) -> int:
    try:
        pss = int(psutil.Process(pid).memory_full_info().pss)
    except psutil.Error:
        return 0
    return pss - (_pss_shmem(pid) if without_shmem else 0)


class PeakMemory:
    """Samples the session led by ``leader()`` (the pass's child; a fresh one after a kill) every
    ``interval_s`` until stopped; ``peak`` in bytes."""

    def __init__(self, leader: Callable[[], int | None], *, interval_s: float = 0.02,
                 without_shmem: bool = False) -> None:
        self.leader, self.interval_s, self.without_shmem = leader, interval_s, without_shmem
        self.peak = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            lead = self.leader()
            pids = psutil.pids() if lead else []
            total = sum(_pss(p, without_shmem=self.without_shmem) for p in pids if _session(p) == lead)
            self.peak = max(self.peak, total)
            self.samples += 1
            time.sleep(self.interval_s)
