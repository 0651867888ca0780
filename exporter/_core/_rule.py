"""The base of the settings' rules (:mod:`._settings` has every kind): :class:`Rule`, argparse's ``type`` for a
flag; :class:`Text`, the rule of a name, address or path; :func:`env_value`, a ``TOPOLINK_*`` variable read
through a rule. Apart so that a command whose flags are all text (``discover``) loads none of the other kinds
(nine classes, about 1.5M instructions of its start, measured).

Loads nothing on import: argparse only on a refusal.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a start-up cost)

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


class SettingError(ValueError):
    """A value a rule refuses; the message says what is allowed, without the setting's name."""


class Rule:
    """A kind of value: ``parse`` checks and converts the text, ``__call__`` is argparse's ``type``."""

    what = "a value"

    def parse(self, text: str) -> Any:
        raise NotImplementedError

    def bad_examples(self) -> tuple[str, ...]:
        """Texts this rule must refuse, for the test that walks every flag and variable."""
        return ()

    def __call__(self, text: str) -> Any:
        try:
            return self.parse(text)
        except SettingError as exc:
            import argparse  # already loaded: argparse is calling

            raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None

    def __repr__(self) -> str:  # argparse's fallback name for a type, should a message ever use it
        return self.what


class Text(Rule):
    """A name, address or path: not empty (``--node-name "$NODE"`` with $NODE unset must not mean "none"). Any
    other character is taken: the outputs escape what they show (``topology.shown``)."""

    what = "text"

    def __init__(self, *, empty: bool = False) -> None:
        self.empty = empty  # a list that may be empty (``--exclude ""``: nothing left out)

    def parse(self, text: str) -> Any:
        if not text.strip() and not self.empty:
            raise SettingError("empty")
        return text

    def bad_examples(self) -> tuple[str, ...]:
        return () if self.empty else ("", " ")


# Every variable a parser built in this process read, with its rule: the test that tries bad values walks it.
VARIABLES: dict[str, Rule] = {}

TEXT = Text()


def env_value(env: Mapping[str, str] | None, name: str, rule: Rule, fallback: Any) -> Any:
    """The variable ``name`` (of ``os.environ`` where ``env`` is None) read through ``rule``; unset or empty
    (a DaemonSet's optional key) is ``fallback``. SettingError names the variable and its text."""
    VARIABLES[name] = rule
    text = (os.environ if env is None else env).get(name)
    if text is None or text == "":
        return fallback
    try:
        return rule.parse(text)
    except SettingError as exc:
        raise SettingError(f"${name}={text!r}: {exc}") from None
