"""The model's records (topology.Record) keep what the dataclasses they replaced gave: construction by keyword
alone, immutability, equality and hash by type and fields, a checked ``replace``, copy and pickle, order where
a record has one (``Fact``), and a weak reference to a snapshot (``per_snapshot``). Every record class of the
model is checked, found by walking ``topology``'s names."""

from __future__ import annotations

import copy
import gc
import pickle
import typing
import weakref

import pytest

import topology as t
from agent.discovery import DiscoveryContext
from agent.discovery.sources.nvml import NvmlGpuFacts

RECORDS = sorted({v for v in (getattr(t, n) for n in t.__all__) if isinstance(v, type) and issubclass(v, t.Record)
                  and v is not t.Record} | {DiscoveryContext, NvmlGpuFacts}, key=lambda c: c.__name__)
SNAP = t.Snapshot(node="n1", gpus=(t.Gpu(id="0000:01:00.0", index=0),),
                  problems=(t.Problem(source="nvml", subject="0000:01:00.0", message="m",
                                      unknown=(t.Fact(subject="0000:01:00.0", aspect=t.Aspect.NVLINKS),)),))


def test_every_record_of_the_model_is_found() -> None:
    names = {c.__name__ for c in RECORDS}
    assert {"Snapshot", "Gpu", "PciFunction", "Link", "Nic", "NicPort", "Matrix", "Measurement", "Stats", "Problem",
            "SourceOutcome", "Fact", "GdrFacts", "FabricInfo", "PlatformInfo", "MigInstance", "HostBridge",
            "NumaNode", "NvSwitch", "PcieLinkState", "DiscoveryContext", "NvmlGpuFacts"} <= names


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: c.__name__)
def test_fields_are_slots_annotations_and_keyword_parameters(cls: type[t.Record]) -> None:
    """Each field is named once in __match_args__, slotted, annotated and a keyword-only parameter."""
    fields = cls.__match_args__
    hints = typing.get_type_hints(cls)
    params = cls.__init__.__code__.co_varnames[1:cls.__init__.__code__.co_kwonlyargcount + 1]
    assert cls.__init__.__code__.co_argcount == 1  # self alone: nothing positional
    assert set(params) == set(fields) == {h for h in hints if not h.startswith("_")}
    assert set(fields) <= set(cls.__slots__) and not hasattr(cls(**_required(cls)), "__dict__")
    assert cls.__doc__ and not cls.__doc__.startswith(cls.__name__ + "(")


def _required(cls: type[t.Record]) -> dict[str, object]:
    """Values for the fields without a default, from the strategies' kinds of value."""
    defaults = cls.__init__.__kwdefaults__ or {}
    sample = {str: "x", int: 1, float: 1.5, bool: True}
    hints = typing.get_type_hints(cls)
    out: dict[str, object] = {}
    for name in cls.__match_args__:
        if name in defaults:
            continue
        tp = hints[name]
        if tp in sample:
            out[name] = sample[tp]
        elif typing.get_origin(tp) is tuple:
            out[name] = ()
        elif type(None) in typing.get_args(tp):  # optional without a default (a physics row's unknown value)
            out[name] = None
        elif isinstance(tp, type) and issubclass(tp, t.MatrixKind):
            out[name] = t.MatrixKind.MEASURED
        elif isinstance(tp, type) and hasattr(tp, "__members__"):
            out[name] = next(iter(tp.__members__.values()))  # type: ignore[attr-defined]
        else:
            raise AssertionError(f"no sample for {cls.__name__}.{name}: {tp}")
    return out


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: c.__name__)
def test_frozen_equal_hashed_replaced_copied_and_pickled(cls: type[t.Record]) -> None:
    rec = cls(**_required(cls))
    name = cls.__match_args__[0]
    with pytest.raises(t.FrozenRecordError):
        setattr(rec, name, getattr(rec, name))
    with pytest.raises(AttributeError):
        delattr(rec, name)
    with pytest.raises(AttributeError):
        rec.not_a_field = 1  # type: ignore[attr-defined]
    twin = cls(**_required(cls))
    assert rec == twin and hash(rec) == hash(twin) and rec is not twin
    assert rec != object() and (rec == tuple(getattr(rec, f) for f in cls.__match_args__)) is False
    assert t.replace(rec) == rec and t.replace(rec) is not rec
    with pytest.raises(TypeError):
        t.replace(rec, not_a_field=1)
    if cls is not DiscoveryContext:  # its FsRoot (a live reader with caches) is neither copied nor pickled
        for again in (copy.copy(rec), copy.deepcopy(rec), pickle.loads(pickle.dumps(rec))):
            assert again == rec and type(again) is cls
    assert repr(rec).startswith(f"{cls.__qualname__}({name}=")


def test_replace_changes_only_what_it_names_and_equality_follows_fields() -> None:
    gpu = SNAP.gpus[0]
    renamed = t.replace(gpu, name="H100")
    assert renamed.name == "H100" and renamed.id == gpu.id and gpu.name is None and renamed != gpu
    assert t.replace(renamed, name=None) == gpu
    assert {gpu, t.replace(renamed, name=None)} == {gpu}
    assert t.Gpu(id="a") != t.NvSwitch(id="a")  # another record type is never equal, even with the same values
    assert repr(t.PcieLinkState(max_gen=5)) == "PcieLinkState(current_gen=None, current_width=None, max_gen=5, " \
                                               "max_width=None)"


def test_snapshot_is_written_pickled_and_weakly_referenced() -> None:
    assert t.to_dict(t.replace(SNAP)) == t.to_dict(SNAP)  # the codec reads a record by its fields
    assert pickle.loads(pickle.dumps(SNAP)) == SNAP
    snap = t.replace(SNAP, node="n2")
    ref = weakref.ref(snap)
    assert t.per_snapshot(snap, "k", lambda: 1) == 1
    del snap
    gc.collect()
    assert ref() is None


def test_facts_order_as_their_fields() -> None:
    a, b = t.Fact(subject="a", aspect=t.Aspect.PCI), t.Fact(subject="b", aspect=t.Aspect.NUMA)
    assert sorted([b, a]) == [a, b] and a < b and a <= b and b > a and b >= a and not b < a
