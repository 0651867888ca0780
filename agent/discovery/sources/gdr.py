"""What GPUDirect RDMA needs from the host, as far as sysfs and procfs tell.

Peer memory: the ``nvidia_peermem`` module (or the older ``nv_peer_mem``) and the peer-memory clients in
``/sys/kernel/mm/memory_peers`` (``nv_mem``). dma-buf: needs NVIDIA's open kernel modules (the
proprietary ones do not export GPU memory as dma-buf) and a Linux 5.12 or newer kernel. Each fact is
``None`` when the tree does not show it (a copy without ``/sys/module``), never a guess.
"""

from __future__ import annotations

import re

from topology import NODE, Aspect, Problem, Record

from ..access import DiscoveryContext, FsRoot
from ._parse import digits
from ._registry import register
from ._sysfs import Reader

SOURCE = "gdr"
_MODULES = "/sys/module"
_MEMORY_PEERS = "/sys/kernel/mm/memory_peers"
_PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")
# patterns, not compiled: re compiles (and caches) them on first use, which discovery may never reach
_MODULE_VERSION = r"Kernel Module(?: for \S+)?\s+([0-9]{1,4}(?:\.[0-9]{1,4}){1,3})\b"


class GdrHostFacts(Record):
    """The host's GPUDirect RDMA facts: kernel modules and memory peers."""

    __slots__ = __match_args__ = ("peermem_loaded", "memory_peers", "nvidia_loaded", "nvidia_open_module",
                                  "kernel_release", "module_version", "problems")
    peermem_loaded: bool | None
    memory_peers: tuple[str, ...]
    nvidia_loaded: bool | None
    nvidia_open_module: bool | None  # the open GPU kernel modules (dma-buf capable)
    kernel_release: str | None  # uname -r
    module_version: str | None  # the nvidia kernel module's version, /proc/driver/nvidia/version
    problems: tuple[Problem, ...]

    def __init__(self, *, peermem_loaded: bool | None = None, memory_peers: tuple[str, ...] = (),
                 nvidia_loaded: bool | None = None, nvidia_open_module: bool | None = None,
                 kernel_release: str | None = None, module_version: str | None = None,
                 problems: tuple[Problem, ...] = ()) -> None:
        self._fill(locals())

    @property
    def kernel_version(self) -> tuple[int, int] | None:
        found = release_numbers(self.kernel_release or "")
        return None if found is None else (int(found[0]), int(found[1]))


_GDR = (Aspect.GDR,)


@register(SOURCE, covers=(Aspect.GDR,), help="GPUDirect RDMA readiness: nvidia_peermem, memory_peers, dma-buf")
def read_gdr(ctx: DiscoveryContext) -> GdrHostFacts:
    root = ctx.root
    r = Reader(root, SOURCE, "gdr", "/", fact_subject=NODE)
    # Both are directories of their own in sysfs, never links nor files: anything else is a problem, not
    # "no module loaded" or "no peer-memory client".
    modules_known = _plain_dir(root, _MODULES)
    if not modules_known and root.exists(_MODULES):
        r.problem(f"{_MODULES} is not a directory of its own: which modules are loaded is unknown", _GDR)
    peers = tuple(p for p in r.listdir("sys/kernel/mm/memory_peers", _GDR) if p.isprintable() and len(p) <= 64)
    if root.exists(_MEMORY_PEERS) and not _plain_dir(root, _MEMORY_PEERS):
        r.problem(f"{_MEMORY_PEERS} is not a directory of its own: its peer-memory clients are unknown", _GDR)
        peers = ()
    module = _module(r)
    return GdrHostFacts(
        peermem_loaded=any(root.exists(_MODULES, m) for m in _PEERMEM_MODULES) if modules_known else None,
        memory_peers=peers,
        nvidia_loaded=root.exists(_MODULES, "nvidia") if modules_known else None,
        nvidia_open_module=None if module is None else module[0],
        module_version=None if module is None else module[1],
        kernel_release=_release(r.text("proc/sys/kernel/osrelease", _GDR), r),
        problems=tuple(r.problems),
    )


def _plain_dir(root: FsRoot, path: str) -> bool:
    try:
        return root.is_plain_dir(path)
    except OSError:
        return False


def _module(r: Reader) -> tuple[bool, str | None] | None:
    """Whether the open modules are loaded, and their version.
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06 ..." for the open modules;
    the proprietary ones say "NVIDIA UNIX x86_64 Kernel Module  535.129.03 ..."."""
    text = r.text("proc/driver/nvidia/version", _GDR)
    if text is None:
        return None
    first = text.splitlines()[0] if text else ""
    if "Kernel Module" not in first:
        r.problem(f"/proc/driver/nvidia/version: unexpected {first[:60]!r}", _GDR)
        return None
    version = re.search(_MODULE_VERSION, first)
    return "Open Kernel Module" in first, None if version is None else version.group(1)


def release_numbers(text: str) -> tuple[str, str] | None:
    """A kernel release's major and minor numbers, as ``^([0-9]{1,4})\\.([0-9]{1,4})`` reads them, else None: checked
    with str methods (compiling the pattern cost every start as much as a small module's import)."""
    major, dot, rest = text.partition(".")
    minor = rest[:4]
    minor = minor[:len(minor) - len(minor.lstrip("0123456789"))]
    return (major, minor) if dot and digits(major, 1, 4) and minor else None


def _release(text: str | None, r: Reader) -> str | None:
    if not text:
        return None
    if release_numbers(text) is None or len(text) > 128 or not text.isprintable():
        r.problem(f"osrelease: unexpected {text[:60]!r}", _GDR)
        return None
    return text
