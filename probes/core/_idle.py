"""Is a GPU idle enough to measure? Compute processes or utilisation above 10% (DCGM's threshold for
copy utilisation) make it busy; a probe refuses a busy GPU unless forced.

The probe processes of this agent are not counted: a pass keeps one child, with its CUDA contexts, from
its first item to its last. NVML names a process by its PID in the host's namespace, which inside a
container (no ``hostPID``) is not the PID the agent knows; so on a GPU where our child may hold a
context, one process NVML lists that is none of ours by PID is taken for that child.
"""

from __future__ import annotations

import os
from collections.abc import Collection

from topology import BadPciAddress, canonical_bdf

BUSY_PERCENT = 10
_OURS: dict[int, frozenset[str]] = {}  # pid -> bus ids where it may hold a CUDA context


def ours(pid: int, *, alive: bool = True, gpus: Collection[str] = ()) -> None:
    """Note a probe process of this agent and the GPUs it may hold a context on (added to what it had);
    ``alive=False`` forgets it. Its own CUDA contexts never make a GPU busy."""
    if alive:
        _OURS[pid] = _OURS.get(pid, frozenset()) | frozenset(gpus)
    else:
        _OURS.pop(pid, None)


def others(bus: str, pids: Collection[int], mine: int) -> int:
    """How many of the processes NVML lists on ``bus`` (``pids``) are not this agent's."""
    listed = set(pids)
    foreign = [p for p in pids if p != mine and p not in _OURS]
    unseen = sum(1 for pid, gpus in _OURS.items() if bus in gpus and pid not in listed)
    return max(0, len(foreign) - unseen)


def busy_reason(processes: int, gpu_percent: int | None, memory_percent: int | None,
                threshold: int = BUSY_PERCENT) -> str:
    """Why a GPU is busy; empty when it is idle (unknown utilisation counts as idle)."""
    why = []
    if processes:
        why.append(f"{processes} compute process{'es' if processes > 1 else ''} running")
    if gpu_percent is not None and gpu_percent > threshold:
        why.append(f"GPU utilisation {gpu_percent}%")
    if memory_percent is not None and memory_percent > threshold:
        why.append(f"memory utilisation {memory_percent}%")
    return ", ".join(why)


def read_busy() -> dict[str, str]:
    """Bus id -> why busy, for every GPU NVML sees; empty when NVML is not there (nothing to refuse on)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no NVML: the probe cannot tell, and says so elsewhere
        return {}
    out: dict[str, str] = {}
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            try:
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                raw = pynvml.nvmlDeviceGetPciInfo(h).busId
                bus = canonical_bdf(raw.decode() if isinstance(raw, bytes) else raw)
            except (pynvml.NVMLError, BadPciAddress):
                continue
            try:
                procs = others(bus, [p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)], os.getpid())
            except pynvml.NVMLError:
                procs = 0
            gpu: int | None
            mem: int | None
            try:
                util = pynvml.nvmlDeviceGetUtilizationRates(h)
                gpu, mem = int(util.gpu), int(util.memory)
            except pynvml.NVMLError:
                gpu = mem = None
            out[bus] = busy_reason(procs, gpu, mem)
    finally:
        pynvml.nvmlShutdown()
    return out
