"""The sysfs and id parsers that check text with str methods accept exactly what the regular expressions they
replaced accepted (compiling those cost every start about as much as a small module's import), and read the same
values from it: each against its pattern, on strings drawn from the pattern and on strings of its characters.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.discovery.sources._parse import decimal, driver_name, hex_int, host_bridge_dir, link_speed_gts
from agent.discovery.sources._sysfs import sysfs_bdf
from agent.discovery.sources.gdr import release_numbers
from agent.discovery.sources.numa import _mem_total_kb, node_index
from tests.budget import examples
from topology import BadPciAddress, canonical_bdf, parse_cpulist, parse_cpumask

# Characters the patterns use, their neighbours, and what a careless check lets through (a Unicode digit, a
# Unicode space, a final newline).
_CHARS = "0123456789abcdefABCDEFgxX:.-,+_ /pcinodeGTsPCIMmTotalkB\n\t\u0663\u2003"


def _texts(pattern: str) -> st.SearchStrategy[str]:
    return st.one_of(st.from_regex(pattern, fullmatch=True), st.from_regex(pattern),
                     st.text(_CHARS, max_size=30), st.from_regex(pattern, fullmatch=True).map(lambda s: s + "\n"))


def _same(new: Callable[[str], object], old: Callable[[str], object], text: str) -> None:
    def outcome(f: Callable[[str], object]) -> object:
        try:
            return f(text)
        except ValueError as exc:
            return type(exc)
    assert outcome(new) == outcome(old), text


def _old_hex_int(text: str) -> int:
    if not re.match(r"^0[xX][0-9a-fA-F]{1,8}$", text):
        raise ValueError(text)
    return int(text, 16)


def _old_decimal(text: str) -> int:
    text = text.strip()
    if not re.match(r"^-?[0-9]{1,19}$", text):
        raise ValueError(text)
    return int(text)


def _old_link_speed(text: str) -> float | None:
    if text.startswith("Unknown"):
        return None
    m = re.match(r"^([0-9]{1,3}(?:\.[0-9]{1,3})?) GT/s(?: PCIe)?$", text)
    if m is None:
        raise ValueError(text)
    return float(m.group(1))


def _old_bdf(text: str) -> str:
    m = re.match(r"^(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])$", text.strip())
    if m is None:
        raise BadPciAddress(f"not a PCI address: {text!r}")
    domain = int(m.group(1) or "0", 16)
    bus, dev, fn = int(m.group(2), 16), int(m.group(3), 16), int(m.group(4))
    if dev > 0x1F:
        raise BadPciAddress(f"PCI device number out of range: {text!r}")
    return f"{domain:04x}:{bus:02x}:{dev:02x}.{fn}"


def _old_cpulist(text: str) -> tuple[int, ...]:
    cpus: set[int] = set()
    text = text.strip()
    if not text:
        return ()
    for part in text.split(","):
        m = re.match(r"^([0-9]{1,5})(?:-([0-9]{1,5}))?$", part)
        if m is None:
            raise ValueError(part)
        first = int(m.group(1))
        last = int(m.group(2)) if m.group(2) is not None else first
        if last < first or last >= 8192:
            raise ValueError(part)
        cpus.update(range(first, last + 1))
    return tuple(sorted(cpus))


def _old_cpumask(text: str) -> tuple[int, ...]:
    text = text.strip()
    if not re.match(r"^[0-9a-fA-F]{1,8}(?:,[0-9a-fA-F]{1,8})*$", text) or len(text) > 8192 // 4 + 8192 // 32 + 9:
        raise ValueError(text)
    value = int(text.replace(",", ""), 16)
    if value.bit_length() > 8192:
        raise ValueError(text)
    return tuple(i for i, bit in enumerate(bin(value)[:1:-1]) if bit == "1")


def _bool(f: Callable[[str], object]) -> Callable[[str], object]:
    return lambda text: bool(f(text))


def _old_release(text: str) -> tuple[str, str] | None:
    m = re.match(r"^([0-9]{1,4})\.([0-9]{1,4})", text)
    return None if m is None else (m.group(1), m.group(2))


def _old_host_bridge(text: str) -> tuple[int, int] | None:
    m = re.match(r"^pci([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2})$", text)
    return None if m is None else (int(m.group(1), 16), int(m.group(2), 16))


def _old_node_index(text: str) -> int | None:
    m = re.match(r"^node([0-9]{1,5})$", text)
    return None if m is None else int(m.group(1))


def _old_mem_total(text: str) -> str:
    m = re.search(r"MemTotal:\s+([0-9]{1,16})\s*kB", text)
    if m is None:
        raise ValueError("no MemTotal")
    return m.group(1)


_CASES: dict[str, tuple[str, Callable[[str], object], Callable[[str], object]]] = {
    "hex_int": (r"0[xX][0-9a-fA-F]{1,8}", hex_int, _old_hex_int),
    "decimal": (r"\s?-?[0-9]{1,19}\s?", decimal, _old_decimal),
    "link_speed_gts": (r"[0-9]{1,3}(\.[0-9]{1,3})? GT/s( PCIe)?", link_speed_gts, _old_link_speed),
    "sysfs_bdf": (r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", sysfs_bdf,
                  _bool(re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$").match)),
    "host_bridge_dir": (r"pci[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}", host_bridge_dir, _old_host_bridge),
    "driver_name": (r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}", driver_name,
                    _bool(re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$").match)),
    "release_numbers": (r"[0-9]{1,5}\.[0-9]{1,6}[.-]?[0-9a-z]{0,4}", release_numbers, _old_release),
    "node_index": (r"node[0-9]{1,5}", node_index, _old_node_index),
    "mem_total": (r"(Node 0 )?MemTotal:\s+[0-9]{1,17}\s*kB\n?", _mem_total_kb, _old_mem_total),
    "canonical_bdf": (r"\s?([0-9a-fA-F]{1,8}:)?[0-9a-fA-F]{1,2}:[0-9a-fA-F]{1,2}\.[0-7]\s?", canonical_bdf, _old_bdf),
    "parse_cpulist": (r"\s?[0-9]{1,5}(-[0-9]{1,5})?(,[0-9]{1,5}(-[0-9]{1,5})?){0,3}\s?", parse_cpulist, _old_cpulist),
    "parse_cpumask": (r"\s?[0-9a-fA-F]{1,8}(,[0-9a-fA-F]{1,8}){0,3}\s?", parse_cpumask, _old_cpumask),
}


@pytest.mark.parametrize("name", sorted(_CASES))
def test_str_checks_accept_what_their_patterns_did(name: str) -> None:
    pattern, new, old = _CASES[name]

    @settings(max_examples=examples(100, 3000), deadline=None)
    @given(_texts(pattern))
    def check(text: str) -> None:
        _same(new, old, text)
    check()


@pytest.mark.parametrize(("name", "text"), [
    ("sysfs_bdf", "0000:3b:00.0\n"), ("sysfs_bdf", "0000:3B:00.0"), ("sysfs_bdf", "0000:3b:00.8"),
    ("link_speed_gts", "8. GT/s"), ("link_speed_gts", "\u0663 GT/s"), ("decimal", "--1"), ("decimal", "1" * 20),
    ("mem_total", "MemTotal:16 kB"), ("mem_total", "MemTotal: 12345678901234567 kB MemTotal: 4 kB"),
    ("canonical_bdf", "3b:00.0"), ("canonical_bdf", "1:2:3:4.0"), ("parse_cpulist", "0-3\n,5"),
    ("parse_cpumask", "ff\n,ff"), ("node_index", "node1\n"), ("driver_name", "_x"), ("hex_int", "0x10de\n"),
    ("release_numbers", "6.12345-generic"), ("release_numbers", "12345.6"), ("release_numbers", "6."),
])
def test_edges(name: str, text: str) -> None:
    _, new, old = _CASES[name]
    _same(new, old, text)
