"""The sweep over saved documents (issue 48, item 4): every value of a snapshot's JSON, edited the ways the
live sweep edits a file (empty, garbage, the wrong type, another device's value, out of physical range,
inconsistent with its sibling), fed to every reader of a saved snapshot, each held to one rule:

- refused with one line naming a field of the document (``topo --from`` and ``place --from`` exit 3), or
- read back whole (lossless: what is read writes the edited document again) with the same answers as the
  unedited document (``topo``'s matrix and ``place``'s choice): the edit was to a value no answer depends on
  and which no rule ties to another.

The readers: ``load_snapshot`` (what ``topo --from`` and ``place --from`` run) on the document and on a probe
report holding it, and the agent's state directory (``StateDir.load``) holding it as its snapshot and inside
its probe report. They must agree. A wrong type and a number out of physical range are never read.
"""

from __future__ import annotations

import contextlib
import copy
import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.cli._common import InputError, load_snapshot
from agent.serve._state import REPORT_FILE, SNAPSHOT_FILE, StateDir
from exporter import BusyInfo, placement_answer, query_from_params
from topology import SchemaError, Snapshot, matrix, to_dict

Path_ = tuple[str | int, ...]
KINDS = ("empty", "garbage", "type", "other", "range-low", "range-high", "sibling")
MUST_REFUSE = frozenset({"type", "range-low", "range-high"})
GARBAGE = "\x00\ufffd\u202e\x1b[31mgarbage"
_NAMED = re.compile(r"snapshot((?:\.[a-z_]+|\[\d+\])+)")
_QUERY = query_from_params({"gpus": "2", "size": "1048576", "top": "3", "exclude": "", "collective": "all_reduce",
                            "include_busy": "1"})
_BUSY = BusyInfo(known=False, detail="read from a saved snapshot")


@dataclass(frozen=True)
class Edit:
    path: Path_
    kind: str
    value: Any

    def __str__(self) -> str:
        return f"{shown(self.path)} {self.kind} = {json.dumps(self.value)[:60]}"


def shown(path: Path_) -> str:
    return "snapshot" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def schema_path(path: Path_) -> str:
    return "".join("[]" if isinstance(p, int) else f".{p}" for p in path)


def values(doc: Any, path: Path_ = (), *, every: bool = True) -> Iterator[tuple[Path_, Any]]:
    """(path, value) for every value under ``doc``, containers too; a long list of plain values (CPU lists,
    matrix rows) gives itself and its first, middle and last item unless ``every``."""
    if path:
        yield path, doc
    if isinstance(doc, dict):
        for k, v in doc.items():
            if not path and k == "schema":
                continue
            yield from values(v, (*path, k), every=every)
    elif isinstance(doc, list):
        plain = all(not isinstance(v, dict | list) for v in doc)
        picks = range(len(doc)) if every or not plain or len(doc) <= 3 else sorted({0, len(doc) // 2, len(doc) - 1})
        for i in picks:
            yield from values(doc[i], (*path, i), every=every)


def get(doc: Any, path: Path_) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def put(doc: Any, path: Path_, value: Any) -> Any:
    out = copy.deepcopy(doc)
    get(out, path[:-1])[path[-1]] = value
    return out


def _others(doc: Any, path: Path_) -> list[Any]:
    """The values at the same place of the other entities of the same list (another device's value)."""
    out = []
    for i, p in enumerate(path):
        if isinstance(p, int):
            parent = get(doc, path[:i])
            for j in range(len(parent)):
                if j != p:
                    with contextlib.suppress(KeyError, IndexError, TypeError):
                        out.append(get(doc, (*path[:i], j, *path[i + 1:])))
    return out


def edits(doc: Any, path: Path_, value: Any) -> list[Edit]:
    """Every edit of the value at ``path``, one per kind that applies."""
    out: list[tuple[str, Any]] = []
    number = type(value) in (int, float)
    out.append(("empty", {str: "", list: [], dict: {}}.get(type(value))))
    out.append(("garbage", GARBAGE))
    out.append(("type", {int: str(value), float: str(value), str: 12345, bool: "true", list: {"0": 1},
                         dict: [1], type(None): {"garbage": 1}}[type(value)]))
    other = next((o for o in _others(doc, path) if o != value), None)
    if other is not None:
        out.append(("other", other))
    if number:  # -1 is a matrix's "not read"
        high = 2**62 + 7 if type(value) is int else 1e300
        out += [("range-low", -2 if "matrices" in path else -1), ("range-high", high)]
        out.append(("sibling", value + 1))
    elif type(value) is bool:
        out.append(("sibling", not value))
    elif type(value) is str and len(path) > 1:
        record = get(doc, path[:-1])
        sibs = [v for k, v in record.items() if type(v) is str and v != value] if isinstance(record, dict) else []
        out.append(("sibling", sibs[0] if sibs else value + "x"))
    elif type(value) is list and value:
        out.append(("sibling", value[:-1] if len(value) > 1 else value + value))
    return [Edit(path, kind, new) for kind, new in out if new != value or type(new) is not type(value)]


@dataclass(frozen=True)
class Verdict:
    refused: str | None  # the one line, when refused
    answer: str | None  # the document read back, topo's matrix and place's choice, when read


def answer(snap: Snapshot) -> str:
    """What the commands that read a saved snapshot answer: its matrix and a placement."""
    return matrix(snap) + json.dumps(placement_answer(snap, _QUERY, _BUSY), sort_keys=True)


def _verdict(read: Any) -> Verdict:
    try:
        snap = read()
    except (InputError, SchemaError) as exc:
        return Verdict(str(exc), None)
    return Verdict(None, json.dumps(to_dict(snap), sort_keys=True) + "\x00" + answer(snap))


def read_all(doc: Any, work: Path, *, all_readers: bool) -> dict[str, Verdict]:
    """Each reader's verdict on ``doc``: --from on it and on a report holding it, and (``all_readers``) the
    agent's state holding it as snapshot and in its report."""
    text = json.dumps(doc)
    report = json.dumps({"schema": "topolink.probe/v2", "snapshot": doc})
    (work / "snap.json").write_text(text)
    out = {"--from": _verdict(lambda: load_snapshot(str(work / "snap.json")))}
    if not all_readers:
        return out
    (work / "report.json").write_text(report)
    out["--from report"] = _verdict(lambda: load_snapshot(str(work / "report.json")))
    for name, file, body in (("state", SNAPSHOT_FILE, text), ("state report", REPORT_FILE, report)):
        state = work / name.replace(" ", "-")
        state.mkdir(exist_ok=True)
        for f in (SNAPSHOT_FILE, REPORT_FILE):
            (state / f).unlink(missing_ok=True)
        (state / file).write_text(body)
        out[name] = _state_verdict(StateDir(state), file)
    return out


def _state_verdict(state: StateDir, file: str) -> Verdict:
    """The agent's state reader: refused is an error for the file; read is a snapshot (or a report) it
    keeps, or a note that it is another machine's (the edit changed the structure: not used, not refused)."""
    loaded = state.load(expected_hash="")
    if loaded.errors:
        return Verdict(loaded.errors[0][1].split(": ", 1)[1], None)
    return Verdict(None, "")


def named(message: str, doc: Any) -> str | None:
    """The document field a refusal names, when it names one that exists (or a missing key of an object
    that exists: "required")."""
    for m in _NAMED.finditer(message):
        parts = re.findall(r"\.([a-z_]+)|\[(\d+)\]", m.group(1))
        path: Path_ = tuple(int(i) if i else k for k, i in parts)
        for whole in (path, path[:-1]):
            try:
                get(doc, whole)
            except (KeyError, IndexError, TypeError):
                continue
            return shown(path)
    return None


def judge(edit: Edit, doc: Any, base: str, verdicts: dict[str, Verdict], free: frozenset[str]) -> str | None:
    """Why the readers' ``verdicts`` on ``doc`` (``edit`` applied) break the rule; None when they keep it.
    ``base``: the unedited document's answer; ``free``: the schema paths whose every value of their type is a
    reading discovery could make and an answer shows (names, one witness: see the test)."""
    first = verdicts["--from"]
    for reader, v in verdicts.items():
        if (v.refused is None) != (first.refused is None):
            return f"{reader} {'refused' if v.refused else 'read'} what --from {'refused' if first.refused else 'read'}"
    if first.refused is not None:
        if "\n" in first.refused or "Traceback" in first.refused:
            return f"refused in more than one line: {first.refused[:300]}"
        if named(first.refused, doc) is None:
            return f"refused without naming a field of the document: {first.refused[:300]}"
        return None
    if edit.kind in MUST_REFUSE:
        return "read a value of the wrong type or out of physical range"
    assert first.answer is not None
    if answer_of(first.answer) != answer_of(base) and schema_path(edit.path) not in free:
        return "read, and answers differently from the unedited document"
    return None


def answer_of(verdict_answer: str) -> str:
    return verdict_answer.split("\x00", 1)[1]


def sample(doc: Any, rng: random.Random) -> list[Edit]:
    """The standing sample: for each schema path, one value (seeded) and one edit kind (seeded)."""
    by_schema: dict[str, list[Path_]] = {}
    for path, _ in values(doc, every=False):
        by_schema.setdefault(schema_path(path), []).append(path)
    out = []
    for paths in by_schema.values():
        path = rng.choice(paths)
        choices = edits(doc, path, get(doc, path))
        if choices:
            out.append(rng.choice(choices))
    return out


def refusals(doc: Any, rng: random.Random) -> list[Edit]:
    """For each schema path, one value (seeded) given each edit no reader may take: the wrong type, a number
    out of range."""
    by_schema: dict[str, list[Path_]] = {}
    for path, _ in values(doc, every=False):
        by_schema.setdefault(schema_path(path), []).append(path)
    return [e for paths in by_schema.values() for path in [rng.choice(paths)]
            for e in edits(doc, path, get(doc, path)) if e.kind in MUST_REFUSE]


def every_edit(doc: Any) -> list[Edit]:
    return [e for path, value in values(doc, every=False) for e in edits(doc, path, value)]


__all__ = ["KINDS", "MUST_REFUSE", "Edit", "Verdict", "answer", "every_edit", "judge", "named", "put", "read_all",
           "refusals", "sample", "schema_path"]
