"""The sweep over saved documents (issue 48, item 4; the rule is in ``tests/saved_sweep.py``): every value of
each test machine's snapshot, edited (empty, garbage, wrong type, another device's value, out of range,
inconsistent with its sibling) and read by ``--from`` (on the document and on a probe report holding it)
and by the agent's state (snapshot file and probe report), is refused naming a field, or read with the
unedited document's answers, or is one of the few values (``FREE``) an answer shows and no rule ties.

The standing part edits one value of each field of four machines, one seeded kind, and asks the state and
report readers about every third edit (about 30 s on a loaded 2-core machine); ``TOPOLINK_SWEEP_ALL=1`` edits
every value (long lists of plain values: their first, middle and last) of seven machines with every kind and
asks every reader (hours: the nightly)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent.discovery.assemble import witnessed
from tests.saved_sweep import Edit, every_edit, judge, named, put, read_all, refusals, sample
from tests.serve_machines import discover_profile
from topology import SchemaError, from_dict

ALL = os.environ.get("TOPOLINK_SWEEP_ALL") == "1"
MACHINES = ("hgx-h100", "gb200-tray", "dgx1-v100", "gh200",
            *(("rtx4090-8x", "a30-4x-nvlink-pairs", "dgx-a100") if ALL else ()))
REPO = Path(__file__).resolve().parents[1]
# Values an answer shows that a reading could hold whatever they are (each one witness, no rule ties them):
FREE = frozenset({
    ".node",  # the node's name, as the host says it
    ".taken_at",  # when it was read (a date ahead of the reader's clock is refused)
    ".nics",  # which NICs exist is the net and RDMA listings' alone (a function need not have an interface)
    ".nics[].name",  # the kernel's name of the RDMA device or interface (unique: refused when shared)
    ".nics[].rdma",  # whether the RDMA listing names it (an InfiniBand function without one is refused)
    ".gpus[].mig_enabled",  # NVML's MIG mode alone: on with no instance is a GPU whose instances are not made
    ".gpus[].gpu_numa_id",  # NVML may not say while the driver marks the node (a dispute of the two is refused)
})


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    out = {}
    for name in MACHINES:
        snap, _ = discover_profile(name, tmp_path_factory.mktemp(name))
        out[name] = json.loads(json.dumps({"schema": "topolink.topology/v2", **_plain(snap)}))
    return out


def _plain(snap: Any) -> dict[str, Any]:
    from topology import to_dict

    body = to_dict(snap)
    body.pop("schema")
    return body


def _sweep(doc: dict[str, Any], edits: list[Edit], work: Path) -> list[str]:
    base = read_all(doc, work, all_readers=True)
    assert all(v.refused is None for v in base.values()), base
    ref = base["--from"].answer
    assert ref is not None
    failures = []
    for n, edit in enumerate(edits):
        edited = put(doc, edit.path, edit.value)  # the state and report readers share --from's rules: a third
        why = judge(edit, edited, ref, read_all(edited, work, all_readers=ALL or n % 3 == 0), FREE)
        if why:
            failures.append(f"{edit}: {why}")
    return failures


@pytest.mark.parametrize("name", MACHINES)
def test_every_field_edited_is_refused_naming_it_or_answers_as_before(docs: dict[str, dict[str, Any]], name: str,
                                                                       tmp_path: Path) -> None:
    doc = docs[name]
    edits = every_edit(doc) if ALL else sample(doc, random.Random(f"saved-sweep {name}"))
    assert len(edits) >= 60, f"{name}: {len(edits)} edits prove little"
    failures = _sweep(doc, edits, tmp_path)
    assert not failures, f"{name}: {len(failures)} of {len(edits)} edits:\n" + "\n".join(failures[:40])


@pytest.mark.parametrize("name", MACHINES)
def test_wrong_types_and_numbers_out_of_range_are_refused_naming_the_field(docs: dict[str, dict[str, Any]],
                                                                          name: str) -> None:
    """Every field (one value each), every edit no reader may take, through the rules every reader runs."""
    doc = docs[name]
    edits = refusals(doc, random.Random(f"saved-sweep refusals {name}"))
    assert len(edits) >= 100, f"{name}: {len(edits)} edits prove little"
    failures = []
    for edit in edits:
        edited = put(doc, edit.path, edit.value)
        try:
            witnessed(from_dict(edited))
        except SchemaError as exc:
            if named(str(exc), edited) is None or "\n" in str(exc):
                failures.append(f"{edit}: refused without naming a field: {exc}")
            continue
        failures.append(f"{edit}: read")
    assert not failures, f"{name}: {len(failures)} of {len(edits)} edits:\n" + "\n".join(failures[:40])


@pytest.mark.parametrize("name", MACHINES)
def test_every_link_agrees_with_what_it_describes(docs: dict[str, dict[str, Any]], name: str) -> None:
    """Each link of each machine, listed twice, at another rate, or carrying another kind's number, is refused
    naming that link (rates and distances are the table's and the matrix's: the sample may miss them)."""
    doc = docs[name]
    failures = []
    for i, link in enumerate(doc["links"]):
        edits: list[tuple[str, Any]] = [("links", [*doc["links"], link])]
        if link["bytes_per_second"] is not None:
            edits.append((f"links[{i}].bytes_per_second", link["bytes_per_second"] + 1))
        if link["numa_distance"] is not None:
            edits.append((f"links[{i}].numa_distance", link["numa_distance"] + 1))
        if link["kind"] != "pcie":
            edits.append((f"links[{i}].pcie", {"current_gen": 4, "current_width": 16}))
        for what, value in edits:
            field = what.split(".")[0]
            edited = put(doc, ("links",) if field == "links" else ("links", i, what.split(".")[1]), value)
            try:
                witnessed(from_dict(edited))
            except SchemaError as exc:
                want = "snapshot." if field == "links" else "snapshot.links["  # a GPU's NVLinks over its family's
                if want not in str(exc) or named(str(exc), edited) is None:
                    failures.append(f"{what}: refused without naming the link: {exc}")
                continue
            failures.append(f"{what} = {repr(value)[:80]}: read")
    assert doc["links"] and not failures, f"{name}:\n" + "\n".join(failures[:20])


def test_place_from_exits_3_naming_the_field(docs: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    doc = put(docs["dgx1-v100"], ("links", 1, "bytes_per_second"), 1.0)
    saved = tmp_path / "snap.json"
    saved.write_text(json.dumps(doc))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_")}
    for command in (["topo"], ["place", "--gpus", "2"]):
        run = subprocess.run([sys.executable, "-m", "agent.cli", *command, "--from", str(saved)], capture_output=True,
                             cwd=REPO, env=env, timeout=60, check=False, text=True)
        assert run.returncode == 3, (command, run.returncode, run.stderr)
        assert "snapshot.links[1].bytes_per_second" in run.stderr and "Traceback" not in run.stderr, run.stderr
