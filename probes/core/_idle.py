"""Is a GPU idle enough to measure? Compute processes or utilisation above 10% (DCGM's threshold for
copy utilisation) make it busy; a probe refuses a busy GPU unless forced. The probe processes of this
agent are not counted: a pass keeps one child, with its CUDA context, from its first item to its last."""

from __future__ import annotations

import os

from topology import BadPciAddress, canonical_bdf

BUSY_PERCENT = 10
_OURS: set[int] = set()


def ours(pid: int, *, alive: bool = True) -> None:
    """Note (or forget) a probe process of this agent: its own CUDA context never makes a GPU busy."""
    if alive:
        _OURS.add(pid)
    else:
        _OURS.discard(pid)


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
                mine = _OURS | {os.getpid()}
                procs = [p for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h) if p.pid not in mine]
            except pynvml.NVMLError:
                procs = []
            gpu: int | None
            mem: int | None
            try:
                util = pynvml.nvmlDeviceGetUtilizationRates(h)
                gpu, mem = int(util.gpu), int(util.memory)
            except pynvml.NVMLError:
                gpu = mem = None
            out[bus] = busy_reason(len(procs), gpu, mem)
    finally:
        pynvml.nvmlShutdown()
    return out
