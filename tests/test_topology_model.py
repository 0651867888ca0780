"""The model's JSON, ids, hash and rate tables."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given, settings

import topology as t
from tests.budget import examples
from topology import replace

from .strategies import snapshots


@settings(max_examples=examples(60, 600), deadline=None)
@given(snapshots)
def test_json_round_trips_losslessly(snap: t.Snapshot) -> None:
    assert t.loads(t.dumps(snap), validate=False) == snap
    assert t.loads(t.dumps(snap, indent=None), validate=False) == snap


@settings(max_examples=examples(25, 240), deadline=None)
@given(snapshots)
def test_structure_hash_ignores_time_measurements_and_problems(snap: t.Snapshot) -> None:
    moved = replace(
        snap,
        taken_at=(snap.taken_at or 0.0) + 60.0,
        measurements=(),
        problems=(t.Problem(source="x", subject="y", message="z"),),
        sources=(),
    )
    assert t.structure_hash(moved) == t.structure_hash(snap)


def test_structure_hash_changes_with_wiring() -> None:
    gpu_a, gpu_b = t.Gpu(id="0000:01:00.0"), t.Gpu(id="0000:02:00.0")
    base = t.Snapshot(node="n", gpus=(gpu_a, gpu_b))
    wired = replace(base, links=(t.Link(a=gpu_a.id, b=gpu_b.id, kind=t.LinkKind.NVLINK, count=4),))
    assert t.structure_hash(base) != t.structure_hash(wired)
    rewired = replace(wired, links=(replace(wired.links[0], count=2),))
    assert t.structure_hash(rewired) != t.structure_hash(wired)


def _hash_as_written(snap: t.Snapshot) -> str:
    """The structure hash as published (labels, ``/metrics``) and kept with the agent's state: sha256 of the JSON
    of the structure's lists with sorted keys and no spaces, each GPU's fabric health mask and measured matrices
    left out. Written out here so that a faster way of computing it cannot change it."""
    body = {name: t.to_dict(snap)[name] for name in ("host_bridges", "pci", "numa_nodes", "gpus", "nvswitches",
                                                     "nics", "links")}
    for gpu in body["gpus"]:
        if gpu.get("fabric"):
            gpu["fabric"].pop("health_mask", None)
    body["matrices"] = [t.to_dict(snap)["matrices"][i] for i, m in enumerate(snap.matrices)
                        if t.MatrixKind.MEASURED not in m.kind]
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@settings(max_examples=examples(25, 240), deadline=None)
@given(snapshots)
def test_structure_hash_is_the_one_published(snap: t.Snapshot) -> None:
    assert t.structure_hash(snap) == _hash_as_written(snap)
    read = t.loads(t.dumps(snap), validate=False)  # records shared as reading shares them
    assert t.structure_hash(read) == _hash_as_written(snap)


def test_structure_hash_of_a_known_snapshot_stays() -> None:
    """Its value is kept beside the agent's state and published in a Node label: it must not change."""
    from benchmarks._big import big

    snap = big(8, links=1024)
    assert t.structure_hash(snap) == "3a22d73ad0edc9aa6b7dc06de114f0f7aabc3ac7096f20918dc125372dbc2d7a"
    assert t.structure_hash(t.loads(t.dumps(snap))) == t.structure_hash(snap) == _hash_as_written(snap)


@pytest.mark.parametrize("doc, fragment", [
    ({"schema": "other/v9", "node": "n"}, "not a topolink.topology/v2"),
    ({"schema": t.SCHEMA, "node": "n", "surprise": 1}, "unknown keys"),
    ({"schema": t.SCHEMA, "node": 3}, "expected str"),
    ({"schema": t.SCHEMA, "node": "n", "gpus": [{"id": "x", "index": "0"}]}, "snapshot.gpus[0].index"),
    ({"schema": t.SCHEMA, "node": "n", "links": [{"a": "x", "b": "y", "kind": "warp"}]}, "not a LinkKind"),
    ({"schema": t.SCHEMA, "gpus": []}, "missing"),
])
def test_bad_documents_are_rejected_with_where(doc: dict[str, object], fragment: str) -> None:
    with pytest.raises(t.SchemaError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        t.from_dict(doc)


def test_not_json_is_a_schema_error() -> None:
    with pytest.raises(t.SchemaError):
        t.loads("{not json")


def test_json_is_plain_and_stable() -> None:
    snap = t.Snapshot(node="n", matrices=(t.Matrix(
        name="numa_distance", kind=t.MatrixKind.FROM_OS | t.MatrixKind.LATENCY, unit="slit",
        ids=("numa0", "numa1"), values=((10.0, 21.0), (21.0, 10.0))),))
    doc = json.loads(t.dumps(snap))
    assert doc["schema"] == "topolink.topology/v2"
    assert doc["matrices"][0]["kind"] == ["FROM_OS", "LATENCY"]
    assert snap.matrix("numa_distance") is not None
    assert snap.matrices[0].get("numa0", "numa1") == 21.0
    assert snap.matrices[0].get("numa0", "numa9") is None


@pytest.mark.parametrize("raw, canonical", [
    ("00000000:3B:00.0", "0000:3b:00.0"),
    ("0000:3b:00.0", "0000:3b:00.0"),
    ("3b:00.1", "0000:3b:00.1"),
    ("10000:00:04.0", "10000:00:04.0"),
    ("00000009:01:00.0", "0009:01:00.0"),
    (" 0002:01:00.1\n", "0002:01:00.1"),
])
def test_canonical_bdf(raw: str, canonical: str) -> None:
    assert t.canonical_bdf(raw) == canonical


@pytest.mark.parametrize("raw", ["", "FFFFFFFF:FF:FF.8", "0000:3b:20.0", "gpu0", "0000:3b:00"])
def test_canonical_bdf_rejects(raw: str) -> None:
    with pytest.raises(t.BadPciAddress):
        t.canonical_bdf(raw)


def test_cpulists() -> None:
    assert t.parse_cpulist("0-47,96-143") == tuple(range(48)) + tuple(range(96, 144))
    assert t.parse_cpulist("") == ()
    assert t.format_cpulist(t.parse_cpulist("0,3-9,11-17")) == "0,3-9,11-17"
    assert t.parse_cpumask("00000000,0000000f") == (0, 1, 2, 3)
    assert t.parse_cpumask("ff,00000000") == tuple(range(32, 40))
    with pytest.raises(ValueError):
        t.parse_cpulist("3-1")
    with pytest.raises(ValueError):
        t.parse_cpulist("a-b")


def test_rates_follow_the_published_tables() -> None:
    assert t.nvlink_gen_from_nvml(6) == 4 and t.nvlink_gen_from_nvml(7) == 5 and t.nvlink_gen_from_nvml(99) is None
    assert t.nvlink_bytes_per_second(4, 18) == pytest.approx(450e9)
    assert t.nvlink_bytes_per_second(5, 18) == pytest.approx(900e9)
    assert t.nvlink_bytes_per_second(None) is None
    assert t.pcie_bytes_per_second(4, 16) == pytest.approx(31.5e9)
    assert t.pcie_bytes_per_second(5, 16) == pytest.approx(63.0e9)
    assert t.pcie_bytes_per_second(3, 16) == pytest.approx(15.75e9)
    assert t.pcie_bytes_per_second(None, 16) is None
    assert t.pcie_gen_from_gts(16.0) == 4 and t.pcie_gen_from_gts(2.5) == 1 and t.pcie_gen_from_gts(7.0) is None


def test_pcie_downtrained_and_fabric_clique() -> None:
    assert t.PcieLinkState(current_gen=4, current_width=8, max_gen=4, max_width=16).downtrained
    assert not t.PcieLinkState(current_gen=5, current_width=16, max_gen=5, max_width=16).downtrained
    assert not t.PcieLinkState(current_gen=None, max_gen=5).downtrained
    done = t.FabricInfo(state=t.FabricState.COMPLETED, cluster_uuid="ab-cd", clique_id=7)
    assert done.clique == "ab-cd.7"
    assert replace(done, state=t.FabricState.IN_PROGRESS).clique is None


def test_complete_only_when_no_source_failed() -> None:
    ok = t.SourceOutcome(name="pci", status=t.SourceStatus.OK, duration_seconds=0.1)
    absent = t.SourceOutcome(name="nvml", status=t.SourceStatus.ABSENT, duration_seconds=0.0)
    failed = t.SourceOutcome(name="numa", status=t.SourceStatus.FAILED, duration_seconds=0.0)
    assert t.Snapshot(node="n", sources=(ok, absent)).complete
    assert not t.Snapshot(node="n", sources=(ok, failed)).complete


def test_public_surface_is_exactly_all() -> None:
    public = {n for n in dir(t) if not n.startswith("_")}
    assert public == set(t.__all__)
