"""``topolink --help`` and ``topolink COMMAND --help`` without argparse: the texts argparse prints, stored.

Importing argparse (with ``re``, ``enum`` and the rest it loads) costs about as much as starting the
interpreter, so help that is asked for alone is read from ``help.txt`` beside this module: each text as
argparse printed it 80 columns wide, with the Python version it was made under and the CRC-32 of each of
our source files that building its parser read. A text is printed only where all of that still holds (same
Python, 80 columns, no source changed since); otherwise argparse prints the help, as it always did.
``python -m tests.stored_help`` writes the file and tests/test_cli_startup.py checks that it is current.
Commands whose help shows defaults read from the environment (``serve``, ``prune``) are not stored.

Imports nothing beyond ``os`` and ``sys`` (and ``zlib`` to check a text it is about to print).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not typing's: importing typing costs ~5 ms of start-up; mypy reads it as True
if TYPE_CHECKING:
    from collections.abc import Sequence

HELP_FILE = os.path.join(os.path.dirname(__file__), "help.txt")
TOP = "-"  # the key of ``topolink --help``
HEADER = "%% "  # starts each text's header line: ``%% KEY PYTHON FILE=CRC ...``
WIDTH = 80  # the terminal width the texts are stored for (argparse's, from COLUMNS or the terminal)
_HELP_FLAGS = ("-h", "--help")


def columns() -> int:
    """The terminal width argparse formats help for: what ``shutil.get_terminal_size`` says (COLUMNS, else
    standard output's terminal, else 80), without importing shutil."""
    try:
        width = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        width = 0
    if width <= 0:
        try:
            width = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            width = 0
        width = width or WIDTH
    return width


def help_key(argv: Sequence[str]) -> str | None:
    """``TOP`` for ``--help`` alone, ``COMMAND`` for ``COMMAND --help``; None for any other command line."""
    if len(argv) == 1 and argv[0] in _HELP_FLAGS:
        return TOP
    if len(argv) == 2 and argv[1] in _HELP_FLAGS and not argv[0].startswith("-"):
        return argv[0]
    return None


def source_root() -> str:
    """The directory holding the ``agent`` package: source paths in the header are relative to it."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def stored_help(argv: Sequence[str]) -> str | None:
    """The help ``argv`` asks for, as argparse would print it here, where it is stored and current."""
    key = help_key(argv)
    if key is None or columns() != WIDTH or any(name.startswith("TOPOLINK_") for name in os.environ):
        return None  # a variable may be bad: the parser is built, reads it and refuses it, as without --help
    try:
        with open(HELP_FILE, encoding="utf-8") as f:
            entries = f.read().rstrip("\n").split(f"\n{HEADER}")[1:]  # each text ends in one newline
    except OSError:
        return None
    for entry in entries:
        header, _, text = entry.partition("\n")
        name, python, *sources = header.split(" ")
        if name == key:
            current = python == "{}.{}".format(*sys.version_info[:2]) and _unchanged(sources)
            return f"{text}\n" if current else None
    return None


def _unchanged(sources: list[str]) -> bool:
    import zlib

    root = source_root()
    for source in sources:
        path, _, crc = source.rpartition("=")
        try:
            with open(os.path.join(root, path), "rb") as f:
                if f"{zlib.crc32(f.read()):08x}" != crc:
                    return False
        except OSError:
            return False
    return True
