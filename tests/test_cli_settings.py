"""Every setting of every command is read through one typed rule (``exporter._core._settings``): each flag that
takes a value and each variable a parser reads is tried with the values its rule must refuse, and each is
refused by a usage error naming it, exit 2, never a traceback, never taken for something else. The list is
generated from the parsers: a new flag or variable is walked as soon as it exists, and one without a rule
fails here."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.cli import main
from agent.cli._reference import COMMANDS, command_parser
from exporter._core import _settings
from exporter._core._settings import SIZE, Rule

REPO = Path(__file__).resolve().parents[1]
REQUIRED = {"place": ["--gpus", "1"]}  # what a command needs to be parsed at all


def valued_flags() -> list[tuple[str, str, argparse.Action]]:
    out = []
    for command in COMMANDS:
        for action in command_parser(command)._actions:  # argparse has no public list of a parser's flags
            if action.option_strings and action.nargs != 0 and not isinstance(action, argparse._SubParsersAction):
                out.append((command, action.option_strings[-1], action))
    return out


def variables() -> list[tuple[str, str, Rule]]:
    out = []
    for command in COMMANDS:
        _settings.VARIABLES.clear()
        command_parser(command)
        out += [(command, name, rule) for name, rule in sorted(_settings.VARIABLES.items())]
    return out


FLAGS = valued_flags()
VARIABLES = variables()


def test_the_walk_covers_the_settings_the_issue_names() -> None:
    flags = {(c, f) for c, f, _ in FLAGS}
    assert {("serve", "--port"), ("serve", "--probe-interval"), ("serve", "--dot-timeout"), ("place", "--size"),
            ("cluster", "--page-size"), ("prune", "--label-prefix")} <= flags
    names = {n for _, n, _ in VARIABLES}
    assert {"TOPOLINK_PORT", "TOPOLINK_PROBE_INTERVAL", "TOPOLINK_HTTP_KEEP_ALIVE", "TOPOLINK_COMPAT_LABELS",
            "TOPOLINK_SYSFS_ROOT", "TOPOLINK_LABELS_VIA"} <= names


@pytest.mark.parametrize(("command", "flag", "action"), FLAGS, ids=[f"{c} {f}" for c, f, _ in FLAGS])
def test_every_flag_has_a_rule_and_refuses_what_it_must(command: str, flag: str, action: argparse.Action,
                                                        capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    if action.choices is not None:  # argparse's own rule: one of the choices (Choice reads the variable)
        bad: tuple[str, ...] = ("no-such-choice",)
    else:
        assert isinstance(action.type, Rule), f"{command} {flag}: read by {action.type!r}, not a settings rule"
        bad = action.type.bad_examples()
    for name in [k for k in os.environ if k.startswith("TOPOLINK_")]:
        monkeypatch.delenv(name)
    assert bad, f"{command} {flag}: its rule names nothing it refuses"
    for value in bad:
        code = main([command, *REQUIRED.get(command, []), f"{flag}={value}"])
        err = capsys.readouterr().err
        assert code == 2, (command, flag, value, err)
        (line,) = err.splitlines()
        assert line.startswith(f"topolink {command}: argument ") and flag in line, (value, err)


@pytest.mark.parametrize(("command", "name", "rule"), VARIABLES, ids=[f"{c} {n}" for c, n, _ in VARIABLES])
def test_every_variable_refuses_what_its_rule_must_even_for_help(command: str, name: str, rule: Rule,
                                                                 capsys: pytest.CaptureFixture[str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    bad = [v for v in rule.bad_examples() if v and "\x00" not in v]  # empty is unset; no NUL in a variable
    assert bad, f"{name}: its rule names nothing a variable can hold that it refuses"
    for value in bad:
        monkeypatch.setenv(name, value)
        for argv in ([command, *REQUIRED.get(command, [])], [command, "--help"]):
            code = main(argv)
            captured = capsys.readouterr()
            assert code == 2 and captured.out == "", (argv, name, value, captured)
            (line,) = captured.err.splitlines()
            assert line.startswith(f"topolink {command}: ${name}="), line


def test_a_bad_variable_is_one_clear_line_in_a_real_process_with_help() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_")} | {"TOPOLINK_PORT": "abc"}
    run = subprocess.run([sys.executable, "-m", "agent.cli", "serve", "--help"], capture_output=True, text=True,
                         env={**env, "PYTHONPATH": str(REPO)}, cwd=REPO, timeout=60, check=False)
    assert run.returncode == 2 and "Traceback" not in run.stderr and run.stdout == ""
    assert run.stderr == "topolink serve: $TOPOLINK_PORT='abc': not a whole number\n"


@pytest.mark.parametrize(("text", "expected"), [
    ("4096", 4096), ("4096B", 4096), ("1KiB", 1024), ("1KB", 1000), ("1kB", 1000), ("1K", 1024),
    ("256M", 256 << 20), ("1MiB", 1 << 20), ("1MB", 10**6), ("1GiB", 1 << 30), ("1GB", 10**9), ("1.5GiB", 3 << 29),
    ("1 GiB", 1 << 30), ("1TiB", 1 << 40), ("1TB", 10**12),
])
def test_sizes_say_their_unit(text: str, expected: int) -> None:
    assert SIZE.parse(text) == expected


def test_a_lowercase_b_is_bits_and_refused_with_a_hint(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["place", "--gpus", "2", "--size", "1Gb"]) == 2
    assert capsys.readouterr().err == ("topolink place: argument --size: '1Gb': a lowercase b is bits; sizes are in "
                                       "bytes: say 1GB\n")
