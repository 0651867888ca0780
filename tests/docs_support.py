"""The documentation as the tests read it: the Markdown files, the sections generated from the code (between
``<!-- NAME:start -->`` and ``<!-- NAME:end -->``), and every console example with what it says about where
it runs.

An example is a ```` ```console ```` block; the HTML comment right above it says where it runs:

- ``<!-- example: machine=PROFILE -->``: each ``$ `` command runs against that machine profile of
  ``tests/machines`` (as ``python -m tests.fakenvml run PROFILE -- COMMAND`` runs it), in a fresh directory
  that sees the repository's folders, and its output must be the one shown; ``overlay`` adds the YAML block
  just above to the profile (``busy:`` GPUs, say).
- ``<!-- example: files -->``: the same without a machine profile, for commands that read saved inputs
  (``--from tests/data/...``) or nothing of the machine.
- ``<!-- example: gpu -->``, ``<!-- example: cluster -->``, ``<!-- example: host -->``: needs a GPU, a
  cluster, or is about this host or an install (its output is the machine's): checked for flags and syntax
  only, each ``topolink`` command against the real parser, each path it names in the repository.

``python -m tests.docs_support`` writes every generated section from the code.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from exporter import View

REPO = Path(__file__).resolve().parents[1]
KINDS = ("machine", "files", "gpu", "cluster", "host")


def documents() -> list[Path]:
    """Every Markdown file a reader of the repository reads."""
    return [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:start -->\n", f"<!-- {name}:end -->"


def marked(name: str) -> tuple[Path, str]:
    """The one document holding the section ``name``, and the section's text."""
    start, end = _markers(name)
    found = [(p, p.read_text()) for p in documents() if p.exists() and start in p.read_text()]
    assert len(found) == 1, f"section {name!r} is in {len(found)} documents, not one"
    path, text = found[0]
    return path, text.split(start, 1)[1].split(end, 1)[0]


def _metrics() -> str:
    from exporter import metrics_markdown

    return str(metrics_markdown())


def _kube() -> str:
    from exporter.kube import reference_markdown

    return reference_markdown()


def _witnesses() -> str:
    from agent.discovery.assemble import witness_markdown

    return str(witness_markdown())


def _facts() -> str:
    from agent.discovery.assemble import fact_table_markdown

    return str(fact_table_markdown())


def _physics() -> str:
    from topology.fabric._physics import physics_markdown

    return physics_markdown()


def _commands() -> str:
    from agent.cli._reference import commands_markdown

    return commands_markdown()


def _alerts() -> str:
    """The Prometheus operator overlay's alerts, as the rule file has them."""
    import yaml

    rule = yaml.safe_load((REPO / "daemonset/overlays/prometheus-operator/prometheusrule.yaml").read_text())
    rows = ["| alert | fires when | for | says |", "|---|---|---|---|"]
    for group in rule["spec"]["groups"]:
        for r in group["rules"]:
            expr = " ".join(str(r["expr"]).split()).replace("|", "\\|")
            rows.append(f"| `{r['alert']}` | `{expr}` | {r.get('for', '-')} | {r['annotations']['summary']} |")
    return "\n".join(rows) + "\n"


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def _sizes(sizes: tuple[int, ...]) -> str:
    if len(sizes) > 3:
        return f"{_size(sizes[0])} to {_size(sizes[-1])} (x{sizes[1] // sizes[0]})"
    return ", ".join(_size(s) for s in sizes)


def _profiles() -> str:
    """What each probe profile runs and at what size, from ``probes.PROFILES``."""
    import probes

    rows = ["| profile | tests | copies | latency | GPU collectives | cpu collectives (gloo) |",
            "|---|---|---|---|---|---|"]
    for p in probes.PROFILES.values():
        tests = "every test" if p.tests is None else ", ".join(f"`{t}`" for t in p.tests)
        samples = f"median of {p.samples}" if p.samples > 1 else "one sample"
        host = "" if p.host_copy_bytes in (None, p.copy_bytes) else f" ({_size(p.host_copy_bytes)} on the cpu backend)"
        copies = f"{_size(p.copy_bytes)}{host}, {p.copy_warmup} warm-up + {p.copy_iters} timed, {samples}"
        latency = f"{p.latency_accesses:,} accesses over {_size(p.latency_bytes)}, {p.latency_stride} B stride"
        windows = "one window" if p.collective_samples == 1 else f"median of {p.collective_samples} windows"
        how = "graph launches" if p.collective_timing == "graph" else "the stream"
        command = probes.core.nccl_tests_command(
            "all_reduce", p.collective_sizes, "N", iters=p.collective_iters, warmup=p.collective_warmup,
            timing=p.collective_timing, launches=p.collective_graph_launches)
        collectives = (f"{_sizes(p.collective_sizes)}, {p.collective_iters} iterations after {p.collective_warmup} "
                       f"warm-up, {windows} per cell, timed as {how}: `{command}`")
        gloo = f"{_sizes(p.host_collective_sizes)}, {p.host_ranks} ranks"
        rows.append(f"| `{p.name}` | {tests} | {copies} | {latency} | {collectives} | {gloo} |")
    return "\n".join(rows) + "\n"


# Each generated section: its name and the function of the code that writes it.
GENERATED: dict[str, Callable[[], str]] = {"alerts": _alerts, "cli-reference": _commands, "kube-reference": _kube,
                                           "metrics": _metrics, "physics-table": _physics,
                                           "probe-profiles": _profiles, "witness-table": _witnesses,
                                           "fact-table": _facts}


def write_generated() -> list[Path]:
    """Rewrite every generated section from the code; the documents changed."""
    changed = []
    for name, make in GENERATED.items():
        path, old = marked(name)
        new = make()
        if new != old:
            start, end = _markers(name)
            text = path.read_text()
            head, rest = text.split(start, 1)
            path.write_text(head + start + new + end + rest.split(end, 1)[1])
            changed.append(path)
    return changed


@dataclasses.dataclass(frozen=True)
class Command:
    line: int  # where the command starts in its document
    text: str  # as a shell reads it (continuation lines joined)
    output: tuple[str, ...]  # the lines shown after it


@dataclasses.dataclass(frozen=True)
class Example:
    path: Path
    line: int
    kind: str  # one of KINDS
    profile: str | None
    overlay: str | None  # YAML added to the profile
    commands: tuple[Command, ...]

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


_DIRECTIVE = re.compile(r"<!-- example: ([^>]*?) -->\s*$")


def examples(path: Path) -> list[Example]:
    """Every console block of the document, with its directive (an AssertionError names one without)."""
    lines = path.read_text().splitlines()
    out, yaml_block, n = [], None, 0
    while n < len(lines):
        line = lines[n]
        if line.startswith("```yaml"):
            end = lines.index("```", n + 1)
            yaml_block, n = "\n".join(lines[n + 1:end]), end + 1
            continue
        if line.strip() != "```console":
            n += 1
            continue
        end = lines.index("```", n + 1)
        above = lines[n - 1] if n else ""
        found = _DIRECTIVE.match(above)
        assert found, f"{path.relative_to(REPO)}:{n + 1}: a console example without <!-- example: ... --> above it"
        words = found.group(1).split()
        kind, _, profile = words[0].partition("=")
        assert kind in KINDS, f"{path.relative_to(REPO)}:{n}: unknown example kind {kind!r}"
        overlay = yaml_block if "overlay" in words[1:] else None
        out.append(Example(path=path, line=n + 1, kind=kind, profile=profile or None, overlay=overlay,
                           commands=tuple(_commands_of(lines[n + 1:end], n + 2))))
        n = end + 1
    return out


def _commands_of(block: list[str], first: int) -> list[Command]:
    """``$ `` lines (joined over trailing backslashes) and the output under each. A block with no ``$ `` is
    a script: each line is a command with no output shown."""
    prompted = any(line.startswith("$ ") for line in block)
    commands: list[Command] = []
    n = 0
    while n < len(block):
        line = block[n]
        if prompted and not line.startswith("$ "):
            n += 1
            continue
        start, text = n, line[2:] if prompted else line
        while text.endswith("\\") and n + 1 < len(block):
            n += 1
            text = text[:-1] + " " + block[n].strip()
        n += 1
        output: list[str] = []
        while prompted and n < len(block) and not block[n].startswith("$ "):
            output.append(block[n])
            n += 1
        text = re.sub(r"\s+#.*$", "", text).strip() if not prompted else text.strip()
        if text:
            commands.append(Command(line=first + start, text=text, output=tuple(output)))
    return commands


# What varies between runs and machines, and only that: elapsed times, versions, dates.
_VARIES = [
    (re.compile(r"\b\d+\.\d+ s\b"), "<seconds> s"),
    (re.compile(r"\btopolink \d+\.\d+\.\d+\S*"), "topolink <version>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?"), "<date>"),
]


def normalised(lines: list[str] | tuple[str, ...]) -> list[str]:
    out = []
    for line in lines:
        text = line
        for pattern, replacement in _VARIES:
            text = pattern.sub(replacement, text)
        out.append(text.expandtabs(8).rstrip())  # nvidia-smi's tab stops, as a terminal shows them
    while out and not out[-1]:
        out.pop()
    return out


def words(command: str) -> list[str]:
    """The command's words, as the shell splits them (an AssertionError for a line it cannot split)."""
    try:
        return shlex.split(command, comments=True)
    except ValueError as exc:
        raise AssertionError(f"{command!r}: {exc}") from exc


SCREENSHOT = REPO / "docs" / "page-hgx-h100.png"


def screenshot_view(workdir: Path) -> View:
    """What the README's picture shows: the hgx-h100 profile with GPU0's copies measured (one pair slow), as the
    agent serves it: its structure hash and the installed version, as ``serve`` fills them."""
    import topology as t
    from agent.cli._common import version
    from exporter import View
    from tests.serve_machines import discover_profile
    from tests.test_placement_page import copy

    snap = discover_profile("hgx-h100", workdir)[0]
    g = [x.id for x in snap.gpus]
    snap = t.with_measurements(snap, [copy(g[0], g[k], 150.0 if k == 3 else 390.0) for k in range(1, 8)])
    return View(snapshot=snap, generation=1, structure_hash=t.structure_hash(snap), version=version())


def write_screenshot(path: Path = SCREENSHOT) -> Path:
    """The README's picture of the agent's page (:func:`screenshot_view`), as headless Chromium draws the top
    1400 x 1000 pixels of it."""
    import subprocess
    import tempfile

    from tests.test_placement_page import client

    with tempfile.TemporaryDirectory(prefix="topolink-page-") as tmp:
        page = Path(tmp) / "page.html"
        page.write_text(client(screenshot_view(Path(tmp))).get("/").text)
        subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                        f"--user-data-dir={tmp}/profile", "--window-size=1400,1000", "--hide-scrollbars",
                        f"--screenshot={path}", page.as_uri()], capture_output=True, timeout=120, check=True)
    return path


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["screenshot"]:
        print(write_screenshot().relative_to(REPO))
    for changed in write_generated():
        print(changed.relative_to(REPO))
