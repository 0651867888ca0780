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
from typing import Any

# The order of the reference: the order of ``topolink --help``, each command's companions beside it.
COMMANDS = ("discover", "topo", "place", "probe", "selftest", "serve", "prune", "cluster", "controller", "doctor")
_DISCOVERY = "--sysfs-root"  # the first of the discovery flags: the shared ones are tabled once
_EXIT = re.compile(r"Exit status:\s*(.*?)\.?$", re.DOTALL)
_CODE = re.compile(r"(?:^|;\s*)(\d)\s+")


class _Recording(argparse.ArgumentParser):
    """A parser that keeps the flags added to it and its commands' parsers, in the order they were added:
    argparse lists them only in private attributes. Its groups' flags are kept too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.added: list[argparse.Action] = []
        self.commands: dict[str, argparse.ArgumentParser] = {}
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self.added.append(action)
        return action

    def add_argument_group(self, *args: Any, **kwargs: Any) -> Any:
        return self._recorded(super().add_argument_group(*args, **kwargs))

    def add_mutually_exclusive_group(self, *args: Any, **kwargs: Any) -> Any:
        return self._recorded(super().add_mutually_exclusive_group(*args, **kwargs))

    def _recorded(self, group: Any) -> Any:
        add = group.add_argument

        def add_argument(*args: Any, **kwargs: Any) -> argparse.Action:
            action: argparse.Action = add(*args, **kwargs)
            self.added.append(action)
            return action

        group.add_argument = add_argument
        return group

    def add_subparsers(self, **kwargs: Any) -> Any:
        sub = super().add_subparsers(**kwargs)
        self.commands = sub.choices  # the action's choices: each command's name and parser, as added
        return sub

    def flags(self) -> list[argparse.Action]:
        """The flags added, without ``-h``."""
        return [a for a in self.added if "--help" not in a.option_strings]


@contextlib.contextmanager
def _clean_environment() -> Iterator[None]:
    saved = {k: v for k, v in os.environ.items() if k.startswith("TOPOLINK_") or k in ("NODE_NAME", "KUBECONFIG")}
    for key in saved:
        del os.environ[key]
    try:
        yield
    finally:
        os.environ.update(saved)


def command_parser(name: str) -> _Recording:
    """The parser of one command, as ``topolink NAME`` builds it (defaults of a clean environment)."""
    from . import build_parser

    with _clean_environment():
        parser = build_parser(name, _Recording)  # only this command's parser is built
    assert isinstance(parser, _Recording)
    command = parser.commands[name]
    assert isinstance(command, _Recording)
    return command


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
    actions = command_parser("discover").flags()
    start = next(n for n, a in enumerate(actions) if _DISCOVERY in a.option_strings)
    return actions[start:]


def _own_actions(parser: _Recording, shared: set[str]) -> tuple[list[argparse.Action], bool]:
    """The command's own flags, and whether it takes the shared discovery ones."""
    own = [a for a in parser.flags() if not set(a.option_strings) & shared]
    return own, any(_DISCOVERY in a.option_strings for a in parser.flags())


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
