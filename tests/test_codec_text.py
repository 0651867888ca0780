"""The snapshot's JSON text is byte for byte what the standard library writes for the same document.

``topology.dumps`` builds the document with a fast path over the model's types and writes indented text
with its own encoder (``topology.codec._jsontext``); both are checked here against the plain ways: the generic
encoder below (the model walked by its records' fields, ``__match_args__``) and ``json.dumps(..., indent=2)``.
"""

from __future__ import annotations

import enum
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import topology as t
from agent.discovery import discover
from agent.discovery.access import DiscoveryContext, FsRoot
from tests.budget import examples
from tests.fakenvml import ENV_CALLS, ENV_PROFILE, MACHINES, FakeNode, materialize, write_scaled
from tests.fakenvml.fixtures import MakeMachine
from topology.codec._jsontext import dumps_indented

from .strategies import snapshots

PROFILES = sorted(p.stem for p in MACHINES.glob("*.yaml"))


def _generic(value: Any) -> Any:
    """The model's JSON value, the plain way (what ``to_dict`` did before its fast path)."""
    if isinstance(value, t.MatrixKind):
        return sorted(m.name for m in t.MatrixKind if m in value and m.name)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, t.Record):
        return {name: _generic(getattr(value, name)) for name in value.__match_args__}
    if isinstance(value, tuple | list):
        return [_generic(v) for v in value]
    return value


def _assert_same_text(snap: t.Snapshot) -> None:
    doc = {"schema": t.SCHEMA, **_generic(snap)}
    # compact text tells 1 from 1.0 from true, which == on documents does not
    assert json.dumps(t.to_dict(snap), allow_nan=False) == json.dumps(doc, allow_nan=False)
    assert t.dumps(snap) == json.dumps(t.to_dict(snap), indent=2, allow_nan=False)
    assert t.dumps(snap, indent=None) == json.dumps(doc, allow_nan=False)


def _discovered(node: FakeNode) -> t.Snapshot:
    return discover(DiscoveryContext(root=FsRoot(node.root), nvml_library=str(node.nvml_library)))


@pytest.mark.parametrize("profile", PROFILES)
def test_every_machine_profile_is_written_as_json_dumps_writes_it(fake_machine: MakeMachine, profile: str) -> None:
    _assert_same_text(_discovered(fake_machine(profile)))


def test_a_64_gpu_machine_is_written_as_json_dumps_writes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    node = materialize(write_scaled(MACHINES / "hgx-h100.yaml", 64, tmp_path), tmp_path / "node")
    monkeypatch.setenv(ENV_PROFILE, str(node.nvml_profile))
    monkeypatch.setenv(ENV_CALLS, str(node.calls_file))
    snap = _discovered(node)
    assert len(snap.gpus) == 64
    _assert_same_text(snap)


@settings(max_examples=examples(60, 600), deadline=None)
@given(snapshots)
def test_any_snapshot_is_written_as_json_dumps_writes_it(snap: t.Snapshot) -> None:
    _assert_same_text(snap)


# strings with what the number-list shortcut must not mistake for structure
_text = st.text(st.sampled_from(',[]{}":\\ aé\x00\u2028\U0001f600'), max_size=6) | st.text(max_size=6)
_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _text
_documents = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=5) | st.lists(inner, max_size=3).map(tuple)
                          | st.dictionaries(_text, inner, max_size=5), max_leaves=40)


@settings(max_examples=examples(150, 1500), deadline=None)
@given(_documents, st.integers(min_value=0, max_value=4))
def test_any_json_document_is_indented_as_json_dumps_indents_it(doc: Any, indent: int) -> None:
    assert dumps_indented(doc, indent) == json.dumps(doc, indent=indent, allow_nan=False)


@pytest.mark.parametrize("doc", [[1.7e308, 1.7e308], [-1.7e308, -1.7e308, 5e-324], [0.1, 2, True, None, -0.0],
                                 [3, 2**70, -1], (2.5,), [1e16, -0.0]])
def test_number_lists_are_written_as_json_dumps_writes_them(doc: Any) -> None:
    """Lists of numbers are joined in one call; a sum too big for a float is still no infinity in them."""
    assert dumps_indented(doc, 2) == json.dumps(doc, indent=2, allow_nan=False)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("where", ["alone", "in an object", "in a number list", "after a string", "in a row",
                                   "in a float list"])
def test_nan_and_infinity_are_refused(bad: float, where: str) -> None:
    doc = {"alone": bad, "in an object": {"x": bad}, "in a number list": [1, 2.5, bad],
           "after a string": ["a", bad], "in a row": [[0.0, 1.0], [bad, 0.0]],
           "in a float list": [1e308, bad, -1e308]}[where]
    with pytest.raises(ValueError, match="not JSON compliant"):
        dumps_indented(doc, 2)


def test_a_snapshot_with_nan_is_refused_indented_or_not() -> None:
    gpus = (t.Gpu(id="0000:01:00.0"), t.Gpu(id="0000:02:00.0"))
    matrix = t.Matrix(name="nvlink_bandwidth", kind=t.MatrixKind.MEASURED | t.MatrixKind.BANDWIDTH,
                      unit="bytes_per_second", ids=tuple(g.id for g in gpus), values=((0.0, math.nan), (1e9, 0.0)))
    snap = t.Snapshot(node="n", gpus=gpus, matrices=(matrix,))
    for indent in (2, None):
        with pytest.raises(ValueError, match="not JSON compliant"):
            t.dumps(snap, indent=indent)
