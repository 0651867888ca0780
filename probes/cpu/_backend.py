"""The cpu backend: copies between host buffers bound to NUMA nodes, and a gloo all-reduce across
processes. It runs the same plan, runner, statistics and results as the cuda backend, and runs in CI."""

from __future__ import annotations

import ctypes
import importlib.util
import platform
import time

from topology import format_cpulist

from ..core import Capabilities, Item, Pairs, Session, Target, Waived, Workload
from ..host import HostBuffer, fill_pattern, libnuma, on_cpus, same_bytes


class _Copy:
    """src on the row's node, dst on the column's; the copying thread runs on the row node's CPUs."""

    channels = 1

    def __init__(self, src: Target, dst: Target, size: int) -> None:
        self.bytes_per_op = size
        self.cpus = src.cpus
        self.src = HostBuffer(size, src.index, src.cpus)
        try:
            self.dst = HostBuffer(size, dst.index, dst.cpus)
        except BaseException:
            self.src.close()
            raise
        fill_pattern(self.src.ptr, size)

    def sample(self, warmup: int, iters: int) -> tuple[float, ...]:
        move, dst, src, size = ctypes.memmove, self.dst.ptr, self.src.ptr, self.bytes_per_op
        with on_cpus(self.cpus):
            for _ in range(warmup):
                move(dst, src, size)
            t0 = time.perf_counter_ns()
            for _ in range(iters):
                move(dst, src, size)
            t1 = time.perf_counter_ns()
        return ((t1 - t0) / 1e9,)

    def verify(self) -> str | None:
        if same_bytes(self.dst.ptr, self.src.ptr, self.bytes_per_op):
            return None
        return "destination differs from source"

    def close(self) -> None:
        self.src.close()
        self.dst.close()


class _CopySession:
    def __init__(self, item: Item) -> None:
        self.src, self.dst = item.targets
        self._conditions: dict[str, str] = {
            "copy": "libc memcpy (ctypes.memmove), one thread",
            "cpus": format_cpulist(self.src.cpus) if self.src.cpus else "unbound",
        }

    @property
    def conditions(self) -> Pairs:
        return tuple(self._conditions.items())

    def workload(self, size: int) -> Workload:
        copy = _Copy(self.src, self.dst, size)
        self._conditions["src_placement"] = copy.src.placement.describe()
        self._conditions["dst_placement"] = copy.dst.placement.describe()
        return copy

    def close(self) -> None:
        pass


def _torch_version() -> str | None:
    if importlib.util.find_spec("torch") is None:
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return "unknown"


class CpuBackend:
    name = "cpu"

    def versions(self) -> Pairs:
        out = [("python", platform.python_version()), ("libc", "-".join(platform.libc_ver())),
               ("libnuma", "yes" if libnuma() is not None else "no (mbind system call)")]
        torch = _torch_version()
        if torch:
            out.append(("torch", torch))
        return tuple(out)

    def capabilities(self) -> Capabilities:
        unavailable: list[tuple[str, str]] = []
        if _torch_version() is None:
            unavailable.append(("all_reduce", "torch is not installed (pip install 'topolink[torch]'): "
                                              "the gloo all-reduce needs torch.distributed"))
        return Capabilities(backend=self.name, tests=("host_memcpy", "all_reduce"), unavailable=tuple(unavailable),
                            versions=self.versions())

    def open(self, item: Item) -> Session:
        if item.test == "host_memcpy":
            return _CopySession(item)
        if item.test == "all_reduce":
            from ._gloo import GlooSession  # torch is optional

            return GlooSession(item)
        raise Waived(f"the cpu backend has no test {item.test!r}")
