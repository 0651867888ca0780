"""Host memory bound to a NUMA node, first-touched there, and its placement checked page by page.

Binding is ``mbind(MPOL_BIND)`` through libnuma when it is installed, else the raw system call.
The pages are then touched by a thread running on the node's CPUs (nvbandwidth's way, which also works
where ``mbind`` is refused), and ``move_pages`` reports the node each sampled page landed on.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import mmap
import os
import platform
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache

from topology import format_cpulist

from ..core import ProbeError

MPOL_BIND = 2
MPOL_MF_STRICT = 1
MPOL_MF_MOVE = 2
_SYSCALLS = {  # (mbind, move_pages)
    "x86_64": (237, 279),
    "aarch64": (235, 239),
    "ppc64le": (259, 301),
}
_SAMPLED_PAGES = 1024
_MIN_ON_NODE = 0.99


@dataclass(frozen=True, slots=True)
class Placement:
    node: int | None  # the node asked for (None: not bound)
    checked: int  # pages whose node was read back
    on_node: int
    how: str  # how it was bound and checked, for the record

    @property
    def verified(self) -> bool:
        return self.node is not None and self.checked > 0 and self.on_node >= _MIN_ON_NODE * self.checked

    def describe(self) -> str:
        if self.node is None:
            return f"not bound to a NUMA node ({self.how})"
        if self.checked == 0:
            return f"node {self.node}, placement not verified ({self.how})"
        return f"node {self.node}: {self.on_node}/{self.checked} sampled pages on the node ({self.how})"


@cache
def _libc() -> ctypes.CDLL:
    lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    lib.mmap.restype = ctypes.c_void_p
    lib.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    lib.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    lib.syscall.restype = ctypes.c_long
    return lib


@cache
def libnuma() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("numa") or "libnuma.so.1"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None
    lib.mbind.restype = ctypes.c_long
    lib.move_pages.restype = ctypes.c_long
    return lib


def _mbind(addr: int, size: int, node: int) -> str:
    """Bind ``[addr, addr+size)`` to ``node``; returns how, raises OSError when refused."""
    words = node // 64 + 1
    mask = (ctypes.c_ulong * words)()
    mask[node // 64] = 1 << (node % 64)
    args = (ctypes.c_void_p(addr), ctypes.c_ulong(size), ctypes.c_int(MPOL_BIND), mask,
            ctypes.c_ulong(words * 64 + 1), ctypes.c_uint(MPOL_MF_STRICT | MPOL_MF_MOVE))
    numa = libnuma()
    if numa is not None:
        rc, how = numa.mbind(*args), "mbind via libnuma"
    else:
        number = _SYSCALLS.get(platform.machine(), (None, None))[0]
        if number is None:
            raise OSError(errno.ENOSYS, f"no mbind system call number for {platform.machine()}")
        rc, how = _libc().syscall(ctypes.c_long(number), *args), "mbind system call"
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return how


def page_nodes(addrs: list[int]) -> list[int]:
    """The node of each page (negative errno where the kernel could not say), via ``move_pages``."""
    count = len(addrs)
    pages = (ctypes.c_void_p * count)(*addrs)
    status = (ctypes.c_int * count)()
    numa = libnuma()
    if numa is not None:
        rc = numa.move_pages(0, ctypes.c_ulong(count), pages, None, status, 0)
    else:
        number = _SYSCALLS.get(platform.machine(), (None, None))[1]
        if number is None:
            raise OSError(errno.ENOSYS, "no move_pages system call number")
        rc = _libc().syscall(ctypes.c_long(number), 0, ctypes.c_ulong(count), pages, None, status, 0)
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return list(status)


def sample_pages(addr: int, size: int, page: int, count: int = _SAMPLED_PAGES) -> list[int]:
    """Up to ``count`` page addresses spread evenly over the buffer, first and last included."""
    pages = max(1, size // page)
    if pages <= count:
        return [addr + i * page for i in range(pages)]
    step = (pages - 1) / (count - 1)
    return sorted({addr + round(i * step) * page for i in range(count)})


@contextmanager
def on_cpus(cpus: tuple[int, ...]) -> Iterator[str]:
    """Run the calling thread on ``cpus`` for the block; yields a note ("" when it worked)."""
    if not cpus:
        yield "no CPUs given"
        return
    before = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, cpus)
    except OSError as exc:
        yield f"could not run on CPUs {format_cpulist(cpus)}: {exc.strerror}"
        return
    try:
        yield ""
    finally:
        os.sched_setaffinity(0, before)


class HostBuffer:
    """``size`` bytes of anonymous memory on ``node`` (or unbound when None), every page touched."""

    def __init__(self, size: int, node: int | None = None, cpus: tuple[int, ...] = ()) -> None:
        libc = _libc()
        self.size = size
        prot = mmap.PROT_READ | mmap.PROT_WRITE
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
        ptr = libc.mmap(None, size, prot, flags, -1, 0)
        if ptr is None or ptr == ctypes.c_void_p(-1).value:
            err = ctypes.get_errno()
            raise MemoryError(f"mmap of {size} bytes failed: {os.strerror(err)}")
        self.ptr: int = ptr
        notes: list[str] = []
        if node is not None:
            try:
                notes.append(_mbind(self.ptr, size, node))
            except OSError as exc:
                notes.append(f"mbind refused ({exc.strerror})")
        with on_cpus(cpus) as moved:
            ctypes.memset(self.ptr, 0, size)  # first touch: the pages are placed now
        notes.append("first touch on the node's CPUs" if not moved else f"first touch: {moved}")
        self.placement = self._check(node, notes)

    def _check(self, node: int | None, notes: list[str]) -> Placement:
        if node is None:
            return Placement(None, 0, 0, "; ".join(notes))
        try:
            found = page_nodes(sample_pages(self.ptr, self.size, mmap.PAGESIZE))
        except OSError as exc:
            return Placement(node, 0, 0, "; ".join([*notes, f"move_pages failed: {exc.strerror}"]))
        on_node = sum(1 for n in found if n == node)
        placement = Placement(node, len(found), on_node, "; ".join([*notes, "checked with move_pages"]))
        if not placement.verified:
            self.close()
            raise ProbeError(f"host buffer not on NUMA node {node}: {placement.describe()}")
        return placement

    def close(self) -> None:
        if self.ptr:
            _libc().munmap(ctypes.c_void_p(self.ptr), self.size)
            self.ptr = 0
