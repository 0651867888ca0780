"""Canonical ids: one spelling for every PCI address, whoever reported it."""

from __future__ import annotations

from ._errors import TopolinkError

# Ids are checked with str methods and these sets, not regular expressions: compiling one costs about as much as
# a small module's import, at every start (tests/test_sysfs_text.py holds each to the pattern it replaced).
_DIGITS = frozenset("0123456789")
_HEX = frozenset("0123456789abcdefABCDEF")


def _hex(text: str, most: int) -> bool:
    return 1 <= len(text) <= most and _HEX.issuperset(text)


class BadPciAddress(TopolinkError, ValueError):
    pass


def canonical_bdf(text: str) -> str:
    """``00000000:3B:00.0`` (NVML), ``3b:00.0`` (lspci) and ``10000:00:04.0`` (VMD) to ``dddd:bb:dd.f``.

    The domain keeps at least four hex digits; 32-bit domains keep what they need.
    """
    parts = text.strip().split(":")  # ([0-9a-fA-F]{1,8}:)?[0-9a-fA-F]{1,2}:[0-9a-fA-F]{1,2}\.[0-7]
    dev_text, dot, fn_text = parts[-1].partition(".")
    if not (2 <= len(parts) <= 3 and (len(parts) == 2 or _hex(parts[0], 8)) and _hex(parts[-2], 2)
            and _hex(dev_text, 2) and dot and len(fn_text) == 1 and fn_text in "01234567"):
        raise BadPciAddress(f"not a PCI address: {text!r}")
    domain = int(parts[0], 16) if len(parts) == 3 else 0
    bus, dev, fn = int(parts[-2], 16), int(dev_text, 16), int(fn_text)
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


def _cpu_range(part: str) -> tuple[str, str | None] | None:
    """``([0-9]{1,5})(?:-([0-9]{1,5}))?`` (one final newline allowed, as ``$`` does): first and last, else None."""
    first, dash, last = (part[:-1] if part.endswith("\n") else part).partition("-")
    if not (1 <= len(first) <= 5 and _DIGITS.issuperset(first)):
        return None
    if dash and not (1 <= len(last) <= 5 and _DIGITS.issuperset(last)):
        return None
    return first, last if dash else None


def parse_cpulist(text: str, *, max_cpus: int = MAX_CPUS) -> tuple[int, ...]:
    """Kernel cpulist (``0-47,96-143``) to a sorted tuple. Raises ValueError on garbage or a CPU id at or
    above ``max_cpus``."""
    cpus: set[int] = set()
    text = text.strip()
    if not text:
        return ()  # the kernel's empty list (a memory-only node)
    for part in text.split(","):
        found = _cpu_range(part)
        if found is None:
            raise ValueError(f"bad cpu range {part[:40]!r}")
        first = int(found[0])
        last = int(found[1]) if found[1] is not None else first
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
    if not all(_hex(word, 8) for word in text.split(",")) or len(text) > max_cpus // 4 + max_cpus // 32 + 9:
        raise ValueError(f"bad cpumask {text[:40]!r}")
    value = int(text.replace(",", ""), 16)
    if value.bit_length() > max_cpus:
        raise ValueError(f"cpumask names a CPU at or above {max_cpus}")
    bits = bin(value)[:1:-1]  # least significant first
    return tuple(i for i, bit in enumerate(bits) if bit == "1")
