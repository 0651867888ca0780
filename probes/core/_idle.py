"""Is a GPU idle enough to measure? Compute processes or utilisation above 10% (DCGM's threshold for
copy utilisation) make it busy; a probe refuses a busy GPU unless forced.

The probe processes of this agent are not counted: a pass keeps one child, with its CUDA contexts, from
its first item to its last. NVML names a process by its PID in the host's namespace, which inside a
container (no ``hostPID``) is not the PID the agent knows; so on a GPU where our child may hold a
context, one process NVML lists that is none of ours by PID is taken for that child.

Unknown is never idle: a GPU whose processes, utilisation, handle or bus id NVML cannot read is busy, with
a reason that says its state is unknown and which call failed.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from typing import Any

from topology import BadPciAddress, canonical_bdf

BUSY_PERCENT = 10
UNKNOWN = "busy state unknown"  # the start of every reason that says a read failed
ANY = "*"  # the key of an answer that holds for every GPU (NVML could not even count them)
INDEX_PREFIX = "nvml index "
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
    """Why a GPU is busy; empty when it is idle (``None``: not asked; a failed read is :func:`unknown`)."""
    why = []
    if processes:
        why.append(f"{processes} compute process{'es' if processes > 1 else ''} running")
    if gpu_percent is not None and gpu_percent > threshold:
        why.append(f"GPU utilisation {gpu_percent}%")
    if memory_percent is not None and memory_percent > threshold:
        why.append(f"memory utilisation {memory_percent}%")
    return ", ".join(why)


def unknown(what: str, exc: BaseException) -> str:
    """Why a GPU counts as busy when a read of its busy state failed: unknown is never idle."""
    return f"{UNKNOWN}: {what} failed ({type(exc).__name__}: {exc})"


def is_unknown(reason: str) -> bool:
    return reason.startswith(UNKNOWN)


def index_key(index: int) -> str:
    """The key of a GPU NVML lists at ``index`` whose bus id could not be read."""
    return f"{INDEX_PREFIX}{index}"


def busy_of(answer: Mapping[str, str], bus: str, index: int | None = None) -> str:
    """Why the GPU at ``bus`` (NVML ``index`` when known) is busy in a :func:`read_busy` answer; empty when
    idle. A GPU the answer does not name is unknown, not idle, when some GPU could not be identified (its
    handle or PCI info unreadable, or the count itself): it may be that one."""
    if bus in answer:
        return answer[bus]
    if index is not None and index_key(index) in answer:
        return answer[index_key(index)]
    if ANY in answer:
        return answer[ANY]
    unnamed = sorted(k for k in answer if k.startswith(INDEX_PREFIX))
    if unnamed:
        return f"{UNKNOWN}: NVML could not name the GPU at {', '.join(unnamed)}, which may be this one"
    return ""


def _one(pynvml: Any, h: Any, bus: str) -> str:
    try:
        procs = others(bus, [p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)], os.getpid())
    except pynvml.NVMLError as exc:
        return unknown("nvmlDeviceGetComputeRunningProcesses", exc)
    try:
        util = pynvml.nvmlDeviceGetUtilizationRates(h)
        gpu, mem = int(util.gpu), int(util.memory)
    except pynvml.NVMLError as exc:
        return unknown("nvmlDeviceGetUtilizationRates", exc)
    return busy_reason(procs, gpu, mem)


def read_busy() -> dict[str, str]:
    """Bus id -> why busy ("" when idle), for every GPU NVML sees; empty when NVML is not there (nothing to
    refuse on). A failed read makes the GPU's busy state unknown, which is a reason (:func:`is_unknown`): a
    GPU whose handle or bus id cannot be read is keyed by its NVML index (:func:`index_key`), and a count
    that cannot be read by :data:`ANY`. Read the answer with :func:`busy_of`."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no NVML: the probe cannot tell, and says so elsewhere
        return {}
    out: dict[str, str] = {}
    try:
        try:
            count = pynvml.nvmlDeviceGetCount()
        except pynvml.NVMLError as exc:
            return {ANY: unknown("nvmlDeviceGetCount", exc)}
        for i in range(count):
            try:
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
            except pynvml.NVMLError as exc:
                out[index_key(i)] = unknown("nvmlDeviceGetHandleByIndex", exc)
                continue
            try:
                raw = pynvml.nvmlDeviceGetPciInfo(h).busId
                bus = canonical_bdf(raw.decode() if isinstance(raw, bytes) else raw)
            except (pynvml.NVMLError, BadPciAddress) as exc:
                out[index_key(i)] = unknown("nvmlDeviceGetPciInfo", exc)
                continue
            out[bus] = _one(pynvml, h, bus)
    finally:
        pynvml.nvmlShutdown()
    return out
