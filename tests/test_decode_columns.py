"""A list of records decoded a field at a time (``topology.codec._columns``) gives what decoding it entry by entry
gives: the same records, or the same refusal at the same place, whatever one field of one entry holds."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import topology as t
from benchmarks._big import big
from tests.budget import examples
from topology.codec._decode import Bad, decoder
from topology.model._record import fields

_SNAP = json.loads(t.dumps(big(8, nics=12, pci=80, links=90), indent=None))
_NUMA = {**_SNAP["numa_nodes"][0], "memory_bytes": None}
_LISTS = {"pci": t.PciFunction, "links": t.Link, "gpus": t.Gpu, "nics": t.Nic, "numa_nodes": t.NumaNode,
          "host_bridges": t.HostBridge, "nvswitches": t.NvSwitch, "sources": t.SourceOutcome}
_values = st.none() | st.booleans() | st.integers(-(1 << 64), 1 << 64) | st.sampled_from(
    [1 << 63, -(1 << 63), (1 << 63) - 1, 0, 1, 2, 5, 16, 4318]) | st.floats() | st.text(max_size=6) | st.sampled_from(
    ["x" * 4097, "x" * 4096, "nvlink", "pcie", "ok", "0001:00:01.0", "numa0"]) | st.lists(
    st.integers(-2, 3), max_size=3) | st.just({}) | st.just({"current_gen": 5}) | st.just(_NUMA)


def _entry_by_entry(cls: type, items: list[Any]) -> Any:
    one = decoder(cls)
    for i, item in enumerate(items):
        try:
            one(item)
        except Bad as bad:
            return f"[{i}]{''.join(reversed(bad.path))}: {bad.message}"
    return tuple(one(item) for item in items)


def _as_a_list(cls: type, items: list[Any]) -> Any:
    try:
        return decoder(tuple[cls, ...])(items)  # type: ignore[valid-type]
    except Bad as bad:
        return f"{''.join(reversed(bad.path))}: {bad.message}"


@settings(max_examples=examples(300, 3000), deadline=None)
@given(st.sampled_from(sorted(_LISTS)), st.data())
def test_one_field_of_one_entry_changed_decodes_as_entry_by_entry(name: str, data: st.DataObject) -> None:
    items = [dict(item) for item in _SNAP[name]]
    i = data.draw(st.integers(0, len(items) - 1))
    cls = _LISTS[name]
    change = data.draw(st.sampled_from(["set", "drop", "add", "not an object"]))
    if change == "not an object":
        items[i] = data.draw(_values)
    elif change == "add":
        items[i]["surprise"] = 1
    else:
        key = data.draw(st.sampled_from(fields(cls)))
        if change == "drop":
            items[i].pop(key, None)
        else:
            items[i][key] = data.draw(_values)
    assert _as_a_list(cls, items) == _entry_by_entry(cls, items)


@pytest.mark.parametrize("name", sorted(_LISTS))
def test_every_list_decodes_as_entry_by_entry(name: str) -> None:
    items = _SNAP[name]
    got = _as_a_list(_LISTS[name], items)
    assert got == _entry_by_entry(_LISTS[name], items) and isinstance(got, tuple) and len(got) == len(items)
    as_ints = [{k: int(v) if type(v) is float and v.is_integer() and abs(v) < 1e15 else v for k, v in item.items()}
               for item in items]  # a float field's value written as an int is read as the float
    assert _as_a_list(_LISTS[name], as_ints) == got


_EDGES: list[Any] = [None, True, False, 0, 1, -1, 5, (1 << 63) - 1, 1 << 63, -(1 << 63) + 1, -(1 << 63), 1 << 70, 0.0,
                     -0.0, 2.5, 1e300, float("nan"), float("inf"), "", "x" * 4096, "x" * 4097, "nvlink", "ok", [], [1],
                     [-1], {}, {"current_gen": 5}]


def test_every_field_of_every_list_holding_each_edge_decodes_as_entry_by_entry() -> None:
    """Each field of an entry in turn set to each value at an edge of what a field takes (1,800 lists)."""
    for name, cls in _LISTS.items():
        for key in fields(cls):
            for value in _EDGES:
                items = [dict(item) for item in _SNAP[name][:6]]
                items[min(2, len(items) - 1)][key] = value
                assert _as_a_list(cls, items) == _entry_by_entry(cls, items), (name, key, value)
