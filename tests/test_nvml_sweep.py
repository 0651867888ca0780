"""The truth sweep over NVML answers (issue 48): on every machine profile, every NVML call the recorder saw a
discovery make has its answer edited in the test NVML (tests/nvml_sweep.py: an error return, another GPU's
value, a value out of range, one that disagrees with its sysfs sibling, garbage or empty text), and each edit
must end as a file edit must: a named problem with the fact unknown, an identical answer, or a change only to
a fact the facts table says has one witness. Each call must be named by a row of the facts table.

Budget: the standing suite makes, per profile and per call, ``TOPOLINK_NVML_SWEEP_EDITS`` edits (default 1)
drawn with a seed from that call's edits at one drawn GPU (link, pair): about 370 discoveries in this process,
about 30 s on a loaded 2-core machine. ``TOPOLINK_SWEEP_ALL=1`` makes every edit at every GPU, link and pair
(the nightly).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from agent.discovery.assemble import SESSION_CALLS, rows_calling
from tests.fakenvml import ENV_PROFILE, MACHINES, FakeNode, materialize
from tests.nvml_sweep import NvmlEdit, Profile, edits_of, unanswered
from tests.truth_sweep import Outcome, Tree, verdict

PROFILES = sorted(p.stem for p in MACHINES.glob("*.yaml"))
ALL = os.environ.get("TOPOLINK_SWEEP_ALL") == "1"
PER_CALL = int(os.environ.get("TOPOLINK_NVML_SWEEP_EDITS", "1"))
SEED = os.environ.get("TOPOLINK_FUZZ_SEED", "20240607")


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, FakeNode]:
    """The profiles written out once for this module's tests (each test edits answers and puts them back)."""
    return {}


@pytest.fixture
def machine(request: pytest.FixtureRequest, written: dict[str, FakeNode], tmp_path_factory: pytest.TempPathFactory,
            monkeypatch: pytest.MonkeyPatch) -> tuple[Tree, Path]:
    """The profile ``request.param`` written out: its tree, and the test NVML's answer file to edit."""
    name = request.param
    node = written.get(name) or written.setdefault(name, materialize(name, tmp_path_factory.mktemp(name)))
    monkeypatch.setenv(ENV_PROFILE, str(node.nvml_profile))
    return Tree(name, node.root, str(node.nvml_library)), node.nvml_profile


def _calls(tree: Tree) -> list[str]:
    _, reads = tree.discover()
    return list(dict.fromkeys(reads.calls))


@pytest.mark.parametrize("machine", PROFILES, indirect=True)
def test_every_nvml_call_is_in_the_facts_table_and_has_edits(machine: tuple[Tree, Path]) -> None:
    tree, answers = machine
    calls = _calls(tree)
    assert "nvmlDeviceGetPciInfo_v3" in calls, "the recorder missed the NVML calls"
    unnamed = [c for c in calls if not rows_calling(c) and c not in SESSION_CALLS]
    assert not unnamed, f"{tree.name}: NVML calls no row of the facts table names: {unnamed}"
    profile = Profile(answers.read_text(), tree.root)
    values = {c for c in calls for e in edits_of(profile, c, random.Random(0), every=True)
              if not e.edit.startswith("error ")}
    no_value = {*SESSION_CALLS, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetIndex"}  # they answer no value
    never = [c for c in calls if c not in values and c not in no_value and not unanswered(profile, c)]
    assert not never, f"{tree.name}: NVML calls whose answered values the sweep never edits: {never}"


def _run(tree: Tree, answers: Path, clean: object, edit: NvmlEdit) -> Outcome:
    edit.write(answers)
    try:
        snap, _ = tree.discover()
    except Exception as exc:  # a crash is a finding, named like the rest
        return Outcome(f"{edit.call} at {edit.target}", edit.edit, "failed", (f"discovery raised {exc!r}",))
    said, errors = verdict(clean, snap)  # type: ignore[arg-type]
    if said == "one-witness" and edit.edit == "out-of-range":  # no hardware gives it: never published, alone or not
        said, errors = "failed", ("a fact of one witness took a value out of range and is said known",)
    return Outcome(f"{edit.call} at {edit.target}", edit.edit, said, errors)


@pytest.mark.parametrize("machine", PROFILES, indirect=True)
def test_every_nvml_answer_edited_ends_in_a_problem_the_same_answer_or_a_one_witness_change(
        machine: tuple[Tree, Path]) -> None:
    tree, answers = machine
    text = answers.read_text()
    clean, reads = tree.discover()
    assert clean.complete, f"{tree.name}: the clean pass has problems: {clean.problems[:3]}"
    profile = Profile(text, tree.root)
    rng = random.Random(f"{SEED}:nvml:{tree.name}")
    outcomes = []
    try:
        for call in dict.fromkeys(reads.calls):
            edits = edits_of(profile, call, rng, every=ALL)
            for edit in edits if ALL else rng.sample(edits, min(PER_CALL, len(edits))):
                outcomes.append(_run(tree, answers, clean, edit))
    finally:
        answers.write_text(text)
    failed = [o for o in outcomes if o.verdict == "failed"]
    assert outcomes, f"{tree.name}: no edit was made"
    assert not failed, f"{tree.name}: {len(failed)} of {len(outcomes)} NVML edits end otherwise:\n" + "\n".join(
        o.report()[:600] for o in failed[:10])
