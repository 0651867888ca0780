"""One typed rule per kind of setting: every flag and every ``TOPOLINK_*`` variable of every command is read
through one of these, so a value out of range, without its unit, or not finite is refused where it is read,
never taken for something else (``--port 99999`` is not port 34463, ``--probe-interval -5`` is not "off",
``1e400`` is not infinity).

A rule is an argparse ``type``: called with the text, it returns the value or raises argparse's
``ArgumentTypeError`` with one line saying what is allowed (``topolink`` prints ``argument --FLAG: that
line``, exit 2). :func:`env_value` reads a variable through the same rule while the parser is built, a bad
one a :class:`SettingError` naming the variable: ``--help`` with a bad variable is refused too, as the
command would be.

Each rule also lists values it must refuse (``bad_examples``): tests/test_cli_settings.py walks every
parser's flags and variables and tries them, so a new flag is covered by the rule it is given.

Loads nothing on import (``topolink --help`` builds parsers with these): argparse only on a refusal. The base
rule, text and :func:`env_value` are ``._rule``'s, which a command whose flags are all text (``discover``) loads
alone.
"""

from __future__ import annotations

from ._rule import TEXT, VARIABLES, Rule, SettingError, Text, env_value

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a start-up cost)

if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

__all__ = ["GPUS", "MAX_SIZE_BYTES", "NAMES", "PATH", "PORT", "SIZE", "SIZE_UNITS", "SWITCH", "TEXT", "VARIABLES",
           "Choice", "GpuList", "Names", "Number", "PathRule", "Pattern", "Rule", "SettingError", "Size", "Switch",
           "Text", "count", "env_value", "seconds"]

MAX_SIZE_BYTES = 1 << 50
# Byte units, the prefix's letter either case (kB is SI's spelling): K, M, G, T alone are binary as nccl-tests
# reads them, KiB... binary, KB... decimal. A unit ending in a lowercase b is bits: refused with a hint.
_SCALE = {"": (1, 1), "k": (1 << 10, 10**3), "m": (1 << 20, 10**6), "g": (1 << 30, 10**9), "t": (1 << 40, 10**12)}
SIZE_UNITS = "B, KB/KiB, MB/MiB, GB/GiB, TB/TiB (K, M, G, T alone: binary)"


def _number(text: str, integer: bool) -> float:
    word = text.strip()
    try:
        value = int(word, 10) if integer else float(word)
    except ValueError:
        raise SettingError("not a whole number" if integer else "not a number") from None
    if not -float("inf") < value < float("inf"):  # NaN too; not math.isfinite: one more import at start-up
        raise SettingError("not a finite number")
    return value


class Number(Rule):
    """A whole or decimal number in ``[low, high]`` (``low_open``: above ``low``), finite, in its unit."""

    def __init__(self, low: float, high: float, *, integer: bool = False, low_open: bool = False,
                 unit: str = "") -> None:
        self.low, self.high, self.integer, self.low_open, self.unit = low, high, integer, low_open, unit
        kind = "a whole number" if integer else "a number"
        span = f"above {_text(low)}, at most {_text(high)}" if low_open else f"from {_text(low)} to {_text(high)}"
        self.what = f"{kind} {span}" + (f" ({unit})" if unit else "")

    def parse(self, text: str) -> Any:
        value = _number(text, self.integer)
        if value < self.low or (self.low_open and value == self.low) or value > self.high:
            raise SettingError(f"out of range: {self.what}")
        return value

    def bad_examples(self) -> tuple[str, ...]:
        below = self.low if self.low_open else self.low - 1
        out = ["abc", "", "1e400", "nan", "inf", "-inf", _text(below), _text(self.high + (1 if self.integer else
                                                                                         self.high or 1))]
        if self.integer:
            out.append("1.5")
        return tuple(out)


def _text(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


class Choice(Rule):
    def __init__(self, *choices: str) -> None:
        self.choices = choices
        self.what = "one of " + ", ".join(choices)

    def parse(self, text: str) -> Any:
        if text not in self.choices:
            raise SettingError(self.what)
        return text

    def bad_examples(self) -> tuple[str, ...]:
        return ("no-such-choice", "")


class Switch(Rule):
    """On or off, as a variable says it: 1/true/yes/on, 0/false/no/off (any case); nothing else."""

    what = "on or off: 1, true, yes, on or 0, false, no, off"
    _ON, _OFF = ("1", "true", "yes", "on"), ("0", "false", "no", "off")

    def parse(self, text: str) -> Any:
        word = text.strip().lower()
        if word in self._ON:
            return True
        if word in self._OFF:
            return False
        raise SettingError(self.what)

    def bad_examples(self) -> tuple[str, ...]:
        return ("ture", "2", "enabled")


class PathRule(Text):
    """A file or directory name (a ``Path``; pathlib is loaded only when one is given)."""

    what = "a path"

    def parse(self, text: str) -> Path:
        from pathlib import Path

        return Path(super().parse(text))


class GpuList(Text):
    """GPUs by NVML index or PCI bus id (``0,3`` or ``0000:18:00.0``), comma separated; may be empty."""

    what = "NVML indices or PCI bus ids (0000:18:00.0), comma separated"

    def __init__(self) -> None:
        super().__init__(empty=True)

    def parse(self, text: str) -> Any:
        for item in (word.strip() for word in text.split(",")):
            if item and not item.isdigit() and not _bus_id(item):
                raise SettingError(f"{item!r} is neither: {self.what}")
        return text

    def bad_examples(self) -> tuple[str, ...]:
        return ("gpu0", "0,x", "-1", "0000:18:00", "0000:zz:00.0")


class Pattern(Text):
    """A name with a grammar (a DNS subdomain, an attribute name): the whole text matches ``pattern`` and is at
    most ``longest`` characters (``empty``: '' is taken too, meaning none)."""

    def __init__(self, what: str, pattern: str, longest: int, *, empty: bool = False,
                 bad: tuple[str, ...] = ()) -> None:
        super().__init__(empty=empty)
        self.what, self.pattern, self.longest, self.bad = what, pattern, longest, bad

    def parse(self, text: str) -> Any:
        import re  # loaded with argparse already: only a given value is checked

        if text == "" and self.empty:
            return text
        super().parse(text)  # '' or blank: "empty", as every text says it
        if len(text) > self.longest or not re.fullmatch(self.pattern, text):
            raise SettingError(f"not {self.what}")
        return text

    def bad_examples(self) -> tuple[str, ...]:
        return (*super().bad_examples(), "x" * (self.longest + 1), *self.bad)


def _bus_id(item: str) -> bool:
    hexdigits = set("0123456789abcdefABCDEF")
    parts = item.split(":")
    if len(parts) != 3 or "." not in parts[2]:
        return False
    device, _, function = parts[2].partition(".")
    fields = ((parts[0], 4), (parts[1], 2), (device, 2), (function, 1))
    return all(len(f) == n and set(f) <= hexdigits for f, n in fields)


class Names(Text):
    """Names separated by commas (a variable's spelling of a flag that takes several), each a text."""

    what = "names separated by commas"

    def parse(self, text: str) -> list[str]:
        return [Text.parse(self, word) for word in text.split(",")]

    def bad_examples(self) -> tuple[str, ...]:
        return ("a,,b", "a,", ",")


class Size(Rule):
    """A number of bytes with its unit (``SIZE_UNITS``), 1 byte to 1 PiB. A lowercase ``b`` is bits."""

    what = f"bytes, 1 B to 1 PiB, with a unit: {SIZE_UNITS}"

    def parse(self, text: str) -> Any:
        word = text.strip()
        digits = len(word) - len(word.lstrip("0123456789."))
        number, unit = word[:digits], word[digits:].strip()
        if unit.endswith("b"):
            raise SettingError(f"a lowercase b is bits; sizes are in bytes: say {number}{unit[:-1]}B")
        if not number or number.count(".") > 1 or number in (".",) or not self._unit_ok(unit):
            raise SettingError(f"a number of bytes with a unit: {SIZE_UNITS}")
        binary, decimal = _SCALE[unit[:1].lower() if unit not in ("", "B") else ""]
        scale = decimal if unit.endswith("B") and "i" not in unit and len(unit) == 2 else binary
        value = int(float(number) * scale)
        if not 1 <= value <= MAX_SIZE_BYTES:
            raise SettingError("out of range: 1 B to 1 PiB")
        return value

    @staticmethod
    def _unit_ok(unit: str) -> bool:
        if unit in ("", "B"):
            return True
        prefix, rest = unit[:1].lower(), unit[1:]
        return prefix in _SCALE and prefix != "" and rest in ("", "B", "iB")

    def bad_examples(self) -> tuple[str, ...]:
        return ("1Gb", "1gb", "8b", "1GIB", "1 parsec", "", "0", "-1GiB", "1e400", "nan", "2PiB")


PORT = Number(0, 65535, integer=True, unit="0: any free port")
SIZE = Size()
GPUS = GpuList()
NAMES = Names()
PATH = PathRule()
SWITCH = Switch()


def seconds(low: float = 0, high: float = 365 * 86400, *, low_open: bool = True) -> Number:
    return Number(low, high, low_open=low_open, unit="seconds")


def count(low: int, high: int) -> Number:
    return Number(low, high, integer=True)
