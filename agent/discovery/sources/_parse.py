"""Parsers of sysfs attribute text: plain, bounded, and strict about what the kernel writes.

Each takes the attribute's text and returns a typed value, ``None`` for the kernel's own "unknown"
values, or raises ValueError for anything else (the caller turns that into a Problem).
"""

from __future__ import annotations

from collections.abc import Callable

# Checked with str methods and these sets, not regular expressions: compiling one costs about as much as a small
# module's import, at every start (tests/test_sysfs_text.py holds each to the pattern it replaced).
DIGITS = frozenset("0123456789")
HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
LOWER_HEX_DIGITS = frozenset("0123456789abcdef")


def one_line(text: str) -> str:
    """``text`` less one final newline: what a pattern anchored with ``$`` accepted before the end."""
    return text[:-1] if text.endswith("\n") else text


def digits(text: str, low: int, high: int) -> bool:
    """``text`` is ``low`` to ``high`` ASCII digits (``[0-9]{low,high}``)."""
    return low <= len(text) <= high and DIGITS.issuperset(text)


def hex_digits(text: str, low: int, high: int, allowed: frozenset[str] = HEX_DIGITS) -> bool:
    """``text`` is ``low`` to ``high`` hexadecimal digits (``[0-9a-fA-F]{low,high}``; ``allowed``: which)."""
    return low <= len(text) <= high and allowed.issuperset(text)


def hex_int(text: str) -> int:
    """``0x10de`` -> 0x10de (at most 32 bits); ValueError on anything else."""
    line = one_line(text)
    if line[:2] not in ("0x", "0X") or not hex_digits(line[2:], 1, 8):
        raise ValueError(text)
    return int(text, 16)


MAX_NUMA_NODES = 4096  # the kernel's MAX_NUMNODES is at most 1 << 10; leave room
MAX_LINK_WIDTH = 32  # PCIe x32 is the widest the specification allows


def decimal(text: str) -> int:
    """A plain ASCII decimal integer of at most 19 digits; ValueError otherwise (no ``٣``, no 400 digits)."""
    text = text.strip()
    if not digits(text.removeprefix("-"), 1, 19):
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
    number, _, unit = one_line(text).partition(" ")
    whole, dot, fraction = number.partition(".")
    if unit not in ("GT/s", "GT/s PCIe") or not digits(whole, 1, 3) or (dot and not digits(fraction, 1, 3)):
        raise ValueError(text)
    return float(number)


def bdf_key(bdf: str) -> tuple[int, str]:
    """Sort key for bus ids, numeric domain first: ``10000:00:04.0`` after ``ffff:00:00.0``."""
    domain, _, rest = bdf.partition(":")
    try:
        return int(domain, 16), rest
    except ValueError:
        return -1, bdf


def host_bridge_dir(part: str) -> tuple[int, int] | None:
    """The domain and bus of a root complex's directory (``pci([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2})``), else None."""
    domain, colon, bus = one_line(part).removeprefix("pci").partition(":")
    if not part.startswith("pci") or not colon or not hex_digits(domain, 4, 8) or not hex_digits(bus, 2, 2):
        return None
    return int(domain, 16), int(bus, 16)


_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_DRIVER_CHARS = _ALNUM | frozenset("_.+-")


def driver_name(name: str) -> bool:
    """A driver's name as the kernel writes one: ``[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}``."""
    line = one_line(name)
    return 1 <= len(line) <= 64 and line[0] in _ALNUM and _DRIVER_CHARS.issuperset(line)
