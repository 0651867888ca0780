"""Canonical ids: one spelling for every PCI address, whoever reported it."""

from __future__ import annotations

import re

from ._errors import TopolinkError

_BDF = re.compile(r"^(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])$")


class BadPciAddress(TopolinkError, ValueError):
    pass


def canonical_bdf(text: str) -> str:
    """``00000000:3B:00.0`` (NVML), ``3b:00.0`` (lspci) and ``10000:00:04.0`` (VMD) to ``dddd:bb:dd.f``.

    The domain keeps at least four hex digits; 32-bit domains keep what they need.
    """
    m = _BDF.match(text.strip())
    if m is None:
        raise BadPciAddress(f"not a PCI address: {text!r}")
    domain = int(m.group(1) or "0", 16)
    bus, dev, fn = int(m.group(2), 16), int(m.group(3), 16), int(m.group(4))
    if dev > 0x1F:
        raise BadPciAddress(f"PCI device number out of range: {text!r}")
    return f"{domain:04x}:{bus:02x}:{dev:02x}.{fn}"


def is_bdf(text: str) -> bool:
    try:
        canonical_bdf(text)
    except BadPciAddress:
        return False
    return True


def host_bridge_id(domain: int, bus: int) -> str:
    """The sysfs root-complex name, ``pci0000:17``, which is also ``resource.kubernetes.io/pcieRoot``."""
    return f"pci{domain:04x}:{bus:02x}"


def numa_id(index: int) -> str:
    return f"numa{index}"


# CONFIG_NR_CPUS is at most 8192 on every architecture Linux runs GPUs on; a CPU id at or above this is
# garbage, and refusing it before expanding a range keeps ``0-4294967295`` from allocating 4 billion ints.
MAX_CPUS = 8192
_CPULIST_PART = re.compile(r"^([0-9]{1,5})(?:-([0-9]{1,5}))?$")
_CPUMASK = re.compile(r"^[0-9a-fA-F]{1,8}(?:,[0-9a-fA-F]{1,8})*$")


def parse_cpulist(text: str, *, max_cpus: int = MAX_CPUS) -> tuple[int, ...]:
    """Kernel cpulist (``0-47,96-143``) to a sorted tuple. Raises ValueError on garbage or a CPU id at or
    above ``max_cpus``."""
    cpus: set[int] = set()
    text = text.strip()
    if not text:
        return ()  # the kernel's empty list (a memory-only node)
    for part in text.split(","):
        m = _CPULIST_PART.match(part)
        if m is None:
            raise ValueError(f"bad cpu range {part[:40]!r}")
        first = int(m.group(1))
        last = int(m.group(2)) if m.group(2) is not None else first
        if last < first or last >= max_cpus:
            raise ValueError(f"bad cpu range {part[:40]!r}")
        cpus.update(range(first, last + 1))
    return tuple(sorted(cpus))


def format_cpulist(cpus: tuple[int, ...] | list[int]) -> str:
    """Sorted cpus to the kernel's compact form; empty gives ``""``."""
    out: list[str] = []
    ordered = sorted(set(cpus))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


def parse_cpumask(text: str, *, max_cpus: int = MAX_CPUS) -> tuple[int, ...]:
    """Kernel hex cpumask (``00000000,0000ffff``) to a sorted tuple of cpus. Raises ValueError on garbage
    or a set bit at or above ``max_cpus``."""
    text = text.strip()
    if not _CPUMASK.match(text) or len(text) > max_cpus // 4 + max_cpus // 32 + 9:
        raise ValueError(f"bad cpumask {text[:40]!r}")
    value = int(text.replace(",", ""), 16)
    if value.bit_length() > max_cpus:
        raise ValueError(f"cpumask names a CPU at or above {max_cpus}")
    bits = bin(value)[:1:-1]  # least significant first
    return tuple(i for i, bit in enumerate(bits) if bit == "1")
