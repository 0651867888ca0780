"""Every console example of the README and ``docs/`` runs: against the machine profile or the saved inputs it
names, its output compared with the one shown (times, versions and dates aside); an example that needs a GPU,
a cluster or this very host is checked for its flags (against the real parsers) and the paths it names. The
tables generated from the code equal the code's, and every relative link leads somewhere."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.docs_support import GENERATED, REPO, Command, Example, documents, examples, marked, normalised, words
from tests.fakenvml import materialize

BIN = Path(sys.executable).parent
ALL = [e for path in documents() if path.exists() for e in examples(path)]
RUN = [e for e in ALL if e.kind in ("machine", "files")]
CHECK = [e for e in ALL if e.kind not in ("machine", "files")]


def test_there_are_examples_of_both_kinds() -> None:
    assert len(RUN) >= 9 and CHECK


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_each_generated_table_equals_the_code(name: str) -> None:
    path, section = marked(name)
    assert section == GENERATED[name](), f"{path.relative_to(REPO)}: run python -m tests.docs_support"


def test_the_readme_is_a_front_door_with_an_example_of_every_command() -> None:
    from agent.cli._reference import COMMANDS

    readme = REPO / "README.md"
    assert len(readme.read_text().splitlines()) <= 250
    shown = {words(c.text)[1] for e in examples(readme) for c in e.commands if words(c.text)[:1] == ["topolink"]}
    assert set(COMMANDS) | {"--version"} <= shown


_LINK = re.compile(r"\]\((?!https?://|mailto:)([^)#\s]*)(?:#([^)\s]*))?\)")


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors for the headings of a Markdown file: lower case, punctuation dropped, spaces as -."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    heads = re.findall(r"^#+ (.+)$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def test_every_relative_link_leads_to_a_file_and_a_heading() -> None:
    broken = []
    for path in (p for p in documents() if p.exists()):
        for m in _LINK.finditer(path.read_text()):
            target = (path.parent / m.group(1)) if m.group(1) else path
            if not target.exists():
                broken.append(f"{path.relative_to(REPO)}: {m.group(1)}")
            elif m.group(2) and target.suffix == ".md" and m.group(2) not in _anchors(target):
                broken.append(f"{path.relative_to(REPO)}: {m.group(1)}#{m.group(2)}")
    assert broken == []


# -- examples that run ----------------------------------------------------------------------------------------

def _workdir(tmp: Path) -> Path:
    """A fresh directory that sees the repository's folders (so ``tests/data/...`` resolves) and nothing
    written there reaches the checkout."""
    work = tmp / "work"
    work.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in (".git",):
            (work / entry.name).symlink_to(entry)
    return work


def _run(example: Example, tmp: Path) -> list[tuple[Command, int, list[str]]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOPOLINK_", "KUBECONFIG", "NODE_NAME"))}
    env |= {"PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1",
            "COLUMNS": "120"}
    if example.kind == "machine":
        assert example.profile, f"{example.where}: machine= names no profile"
        overrides = yaml.safe_load(example.overlay) if example.overlay else None
        env |= materialize(example.profile, tmp / "machine", overrides).env()
    mark = "@@topolink-example@@"
    script = ["set +e"]
    for n, command in enumerate(example.commands):
        text = re.sub(r"^\.venv/bin/", f"{BIN}/", command.text)
        script += [f"echo '{mark} {n}'", "{ " + text + "\n} 2>&1"]
    proc = subprocess.run(["bash", "-c", "\n".join(script)], cwd=_workdir(tmp), env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    chunks = proc.stdout.split(f"{mark} ")[1:]
    assert len(chunks) == len(example.commands), proc.stdout + proc.stderr
    return [(c, proc.returncode, chunk.split("\n", 1)[1].splitlines() if "\n" in chunk else [])
            for c, chunk in zip(example.commands, chunks, strict=True)]


def _matches(shown: list[str], got: list[str]) -> bool:
    """Line by line; a line ``...`` in what is shown stands for any lines."""
    if not shown:
        return not got
    if shown[0] == "...":
        return any(_matches(shown[1:], got[n:]) for n in range(len(got) + 1))
    return bool(got) and shown[0] == got[0] and _matches(shown[1:], got[1:])


@pytest.mark.slow
@pytest.mark.parametrize("example", RUN, ids=[e.where for e in RUN])
def test_each_example_prints_what_it_shows(example: Example, tmp_path: Path) -> None:
    for command, _, got in _run(example, tmp_path):
        shown, seen = normalised(command.output), normalised(got)
        assert _matches(shown, seen), (f"{example.path.relative_to(REPO)}:{command.line}: $ {command.text}\n"
                                       "--- shown\n" + "\n".join(shown) + "\n--- printed\n" + "\n".join(seen))


# -- examples checked for their flags and paths -----------------------------------------------------------------

_OPERATORS = {"|", "||", "&&", ";", "&"}


def _simple_commands(argv: list[str]) -> list[list[str]]:
    out, current = [], []
    for word in argv:
        if word in _OPERATORS:
            out.append(current)
            current = []
        else:
            current.append(word)
    return [c for c in [*out, current] if c]


def _extras() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return set(project["optional-dependencies"])


def _check_topolink(args: list[str], where: str) -> None:
    from agent.cli import build_parser
    from agent.cli._reference import _clean_environment

    with _clean_environment():
        parser = build_parser()
    try:
        parser.parse_args(args)
    except SystemExit as exc:
        assert not exc.code, f"{where}: topolink {' '.join(args)}: refused by the parser"


def _repo_path(word: str) -> bool:
    """A word that names something in the repository (its first component is a top-level entry)."""
    if word.startswith(("-", "/", "$", "~")) or "://" in word or "=" in word:
        return False
    first = word.removeprefix("./").split("/", 1)[0]
    return "/" in word and (REPO / first).exists()


def _check_simple(argv: list[str], where: str) -> None:
    while argv and re.fullmatch(r"[A-Z_]+=.*", argv[0]):  # VAR=value command
        argv = argv[1:]
    if not argv:
        return
    program = argv[0].rsplit("/", 1)[-1]
    for word in argv:
        if _repo_path(word):
            assert (REPO / word).exists(), f"{where}: {word} is not in the repository"
    if program == "topolink":
        _check_topolink(argv[1:], where)
    elif program.startswith("python") and argv[1:3] == ["-m", "tests.fakenvml"]:
        profile = argv[4]
        assert (REPO / profile).exists() or (REPO / "tests/machines" / f"{profile}.yaml").exists() \
            or profile.startswith("/"), f"{where}: no profile {profile}"
        if "--" in argv:
            _check_simple(argv[argv.index("--") + 1:], where)
    elif program.startswith("python") and len(argv) > 1 and argv[1].startswith("benchmarks/"):
        source = (REPO / argv[1]).read_text()
        for flag in (w.split("=", 1)[0] for w in argv[2:] if w.startswith("--")):
            assert f'"{flag}"' in source, f"{where}: {argv[1]} takes no {flag}"
    elif program == "pip" or argv[1:3] == ["-m", "pip"]:
        for word in argv:
            found = re.fullmatch(r"(?:topolink|\.)\[([\w,]+)\]", word)
            if found:
                assert set(found.group(1).split(",")) <= _extras(), f"{where}: no extra {found.group(1)}"


@pytest.mark.parametrize("example", CHECK, ids=[e.where for e in CHECK])
def test_each_example_that_cannot_run_here_has_valid_flags_and_paths(example: Example) -> None:
    assert example.commands, f"{example.where}: an empty example"
    for command in example.commands:
        where = f"{example.path.relative_to(REPO)}:{command.line}"
        for simple in _simple_commands(words(command.text)):
            _check_simple(simple, where)
