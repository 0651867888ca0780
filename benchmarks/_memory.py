"""The peak memory of a probe child and everything it started (its session: gloo ranks, perftest), sampled
from /proc while a pass runs. Each sample sums the proportional set size (``Pss`` of
``/proc/PID/smaps_rollup``: a page shared by forked ranks counted once over them, as the container's
memory cgroup charges it once) over the session's processes; the fake CUDA runtime's device memory,
shared memory in host RAM that a GPU would hold in its own, is left out (``Pss_Shmem``) for a simulated
pass. Not a test: the benchmarks print what it finds."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path


def _session(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[3])  # field 6: the session id


def _pss(pid: int, *, without_shmem: bool) -> int:
    fields: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("Pss", "Pss_Shmem"):
                fields[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return 0
    return fields.get("Pss", 0) - (fields.get("Pss_Shmem", 0) if without_shmem else 0)


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
            pids = [int(p) for p in os.listdir("/proc") if p.isdigit()] if lead else []
            total = sum(_pss(p, without_shmem=self.without_shmem) for p in pids if _session(p) == lead)
            self.peak = max(self.peak, total)
            self.samples += 1
            time.sleep(self.interval_s)
