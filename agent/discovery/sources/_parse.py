"""Parsers of sysfs attribute text: plain, bounded, and strict about what the kernel writes.

Each takes the attribute's text and returns a typed value, ``None`` for the kernel's own "unknown"
values, or raises ValueError for anything else (the caller turns that into a Problem).
"""

from __future__ import annotations

import re
from collections.abc import Callable

_LINK_SPEED = re.compile(r"^([0-9]{1,3}(?:\.[0-9]{1,3})?) GT/s(?: PCIe)?$")
_HEX = re.compile(r"^0[xX][0-9a-fA-F]{1,8}$")


def hex_int(text: str) -> int:
    """``0x10de`` -> 0x10de (at most 32 bits); ValueError on anything else."""
    if not _HEX.match(text):
        raise ValueError(text)
    return int(text, 16)


_DECIMAL = re.compile(r"^-?[0-9]{1,19}$")
MAX_NUMA_NODES = 4096  # the kernel's MAX_NUMNODES is at most 1 << 10; leave room
MAX_LINK_WIDTH = 32  # PCIe x32 is the widest the specification allows


def decimal(text: str) -> int:
    """A plain ASCII decimal integer of at most 19 digits; ValueError otherwise (no ``٣``, no 400 digits)."""
    text = text.strip()
    if not _DECIMAL.match(text):
        raise ValueError(text)
    return int(text)


def bounded(lo: int, hi: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = decimal(text)
        if not lo <= value <= hi:
            raise ValueError(f"{value} outside {lo}..{hi}")
        return value
    return parse


def non_negative(text: str) -> int:
    value = decimal(text)
    if value < 0:
        raise ValueError(text)
    return value


def link_width(text: str) -> int | None:
    """``current_link_width``: 0 and 255 are what the kernel shows for a link that is down or unknown."""
    value = decimal(text)
    if value in (0, 255):
        return None
    if not 1 <= value <= MAX_LINK_WIDTH:
        raise ValueError(text)
    return value


def numa_node(text: str) -> int | None:
    """The kernel's ``numa_node``: -1 means it does not know (no ACPI proximity), not an error."""
    value = decimal(text)
    if value == -1:
        return None
    if not 0 <= value < MAX_NUMA_NODES:
        raise ValueError(text)
    return value


def link_speed_gts(text: str) -> float | None:
    """``8.0 GT/s PCIe`` (or ``8 GT/s`` from older kernels) -> 8.0; ``Unknown`` -> None."""
    if text.startswith("Unknown"):
        return None
    m = _LINK_SPEED.match(text)
    if m is None:
        raise ValueError(text)
    return float(m.group(1))


def bdf_key(bdf: str) -> tuple[int, str]:
    """Sort key for bus ids, numeric domain first: ``10000:00:04.0`` after ``ffff:00:00.0``."""
    domain, _, rest = bdf.partition(":")
    try:
        return int(domain, 16), rest
    except ValueError:
        return -1, bdf
