"""The command reference as Markdown, generated from the parsers themselves: every command, its flags with
their defaults and help, and its exit statuses as its ``--help`` states them. ``docs/reference.md`` holds the
output between markers and a test keeps the two equal.

Defaults are the ones a clean environment gives (no ``TOPOLINK_*`` variable set): ``serve`` and the discovery
flags read their defaults from the environment.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
from collections.abc import Iterator, Sequence

# The order of the reference: the order of ``topolink --help``, each command's companions beside it.
COMMANDS = ("discover", "topo", "place", "probe", "selftest", "serve", "prune", "cluster")
_DISCOVERY = "--sysfs-root"  # the first of the discovery flags: the shared ones are tabled once
_EXIT = re.compile(r"Exit status:\s*(.*?)\.?$", re.DOTALL)
_CODE = re.compile(r"(?:^|;\s*)(\d)\s+")


@contextlib.contextmanager
def _clean_environment() -> Iterator[None]:
    saved = {k: v for k, v in os.environ.items() if k.startswith("TOPOLINK_") or k in ("NODE_NAME", "KUBECONFIG")}
    for key in saved:
        del os.environ[key]
    try:
        yield
    finally:
        os.environ.update(saved)


def command_parser(name: str) -> argparse.ArgumentParser:
    """The parser of one command, as ``topolink NAME`` builds it (defaults of a clean environment)."""
    from . import build_parser

    with _clean_environment():
        parser = build_parser(name)  # only this command's parser is built
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            choices: dict[str, argparse.ArgumentParser] = action.choices
            if name in choices:
                return choices[name]
    raise KeyError(name)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _flag(action: argparse.Action) -> str:
    if isinstance(action, argparse.BooleanOptionalAction):
        return "`" + action.option_strings[0].replace("--", "--[no-]", 1) + "`"
    names = ", ".join(action.option_strings)
    if action.nargs == 0:
        return f"`{names}`"
    if action.choices is not None:
        return f"`{names} {'|'.join(str(c) for c in action.choices)}`".replace("|", "\\|")
    metavar = action.metavar or action.dest.upper()
    more = " ..." if action.nargs in ("+", "*") else ""
    return f"`{names} {metavar}{more}`"


def _default(action: argparse.Action) -> str:
    if action.required:
        return "required"
    if action.nargs == 0 and not isinstance(action, argparse.BooleanOptionalAction):
        return "-"
    value = action.default
    if isinstance(action, argparse.BooleanOptionalAction):
        return "on" if value else "off"
    if value is None or value == "":
        return "-"
    if isinstance(value, list):
        return "`" + ",".join(str(v) for v in value) + "`"
    return f"`{value:g}`" if isinstance(value, float) else f"`{value}`"


def _shared() -> list[argparse.Action]:
    """The discovery options, as ``discover`` has them: from ``--sysfs-root`` on."""
    actions = command_parser("discover")._actions
    start = next(n for n, a in enumerate(actions) if _DISCOVERY in a.option_strings)
    return actions[start:]


def _own_actions(parser: argparse.ArgumentParser, shared: set[str]) -> tuple[list[argparse.Action], bool]:
    """The command's own flags, and whether it takes the shared discovery ones."""
    own = [a for a in parser._actions if not isinstance(a, argparse._HelpAction)
           and not set(a.option_strings) & shared]
    return own, any(_DISCOVERY in a.option_strings for a in parser._actions)


def _help(action: argparse.Action) -> str:
    text = action.help or ""
    if "%(" in text:
        text = text % {**vars(action), "prog": "topolink"}
    return _cell(text)


def exit_statuses(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    """The exit statuses the command's ``--help`` epilog states, in its order."""
    found = _EXIT.search(parser.epilog or "")
    if not found:
        return []
    text = " ".join(found.group(1).split())
    marks = list(_CODE.finditer(text))
    return [(m.group(1), text[m.end():marks[n + 1].start() if n + 1 < len(marks) else len(text)].strip(" ;."))
            for n, m in enumerate(marks)]


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in rows)]


def commands_markdown() -> str:
    """Every command: what it does, its flags (default, meaning) and its exit statuses."""
    out: list[str] = []
    shared_actions = _shared()
    shared = {o for a in shared_actions for o in a.option_strings}
    takes = []
    for name in COMMANDS:
        parser = command_parser(name)
        own, discovery = _own_actions(parser, shared)
        if discovery:
            takes.append(f"`{name}`")
        out += [f"### `topolink {name}`", "", _cell(parser.description or _help_of(name)), ""]
        rows = [(_flag(a), _default(a), _help(a)) for a in own]
        if discovery:
            rows.append(("the discovery options", "", "[below](#the-discovery-options)"))
        out += _table(("flag", "default", "meaning"), rows) if rows else ["No flags."]
        statuses = exit_statuses(parser)
        if statuses:
            out += ["", *_table(("exit", "meaning"), [(f"`{c}`", _cell(m)) for c, m in sorted(statuses)])]
        out.append("")
    out += ["### The discovery options", "", f"Taken by {', '.join(takes)}.", ""]
    out += _table(("flag", "default", "meaning"), [(_flag(a), _default(a), _help(a)) for a in shared_actions])
    return "\n".join(out) + "\n"


def _help_of(name: str) -> str:
    from . import _COMMANDS

    return next((line for command, _, line in _COMMANDS if command == name), "")


__all__ = ["COMMANDS", "command_parser", "commands_markdown", "exit_statuses"]
