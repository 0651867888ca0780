"""The structure hash's text is byte for byte what ``json.dumps(body, sort_keys=True, separators=(",", ":"))``
writes of the structure's JSON values (its hash is published and kept with the agent's state): written by
``msgspec`` where the two writers agree (``topology.codec._hash``), by ``json`` where they do not."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import topology as t
from agent.discovery import discover
from agent.discovery.access import DiscoveryContext, FsRoot
from benchmarks._big import big
from tests.budget import NIGHTLY, examples
from tests.fakenvml import MACHINES
from tests.fakenvml.fixtures import MakeMachine
from topology.codec import _hash

from .strategies import snapshots

PROFILES = sorted(p.stem for p in MACHINES.glob("*.yaml"))
_LISTS = ("host_bridges", "pci", "numa_nodes", "gpus", "nvswitches", "nics", "links")


def _as_written(snap: t.Snapshot) -> bytes:
    """The text the plain way: ``to_dict``'s values, each GPU's fabric health mask and measured matrices left out."""
    doc = t.to_dict(snap)
    body: dict[str, Any] = {name: doc[name] for name in _LISTS}
    for gpu in body["gpus"]:
        if gpu.get("fabric"):
            gpu["fabric"].pop("health_mask", None)
    body["matrices"] = [doc["matrices"][i] for i, m in enumerate(snap.matrices) if t.MatrixKind.MEASURED not in m.kind]
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def _by_msgspec(snap: t.Snapshot) -> bytes:
    """The text as ``msgspec`` writes it, which it must (whatever the snapshot's size)."""
    text = _hash.msgspec_text(snap)
    assert text is not None, "msgspec does not write it"
    return text


def _either(snap: t.Snapshot) -> bytes:
    """The text as the hash takes it, and, where ``msgspec`` writes it, the same by ``msgspec``."""
    text = _hash.structure_text(snap)
    assert _hash.msgspec_text(snap) in (None, text)
    return text


@pytest.mark.parametrize("profile", PROFILES)
def test_every_machine_profile_is_written_by_msgspec_as_json_writes_it(fake_machine: MakeMachine, profile: str) -> None:
    node = fake_machine(profile)
    snap = discover(DiscoveryContext(root=FsRoot(node.root), nvml_library=str(node.nvml_library)))
    assert _by_msgspec(snap) == _as_written(snap)
    assert _by_msgspec(t.loads(t.dumps(snap))) == _as_written(snap)  # records shared as read back


# the PCI and link limits (32,768 each: 12 s together on a loaded 2-core machine) nightly; 4,096 in the standing run
_LIMITS = [{"gpus": 256, "nics": 128}, {"gpus": 8, "nics": 1024}, {"gpus": 8, "pci": 32768 if NIGHTLY else 4096},
           {"gpus": 8, "links": 32768 if NIGHTLY else 4096}]


@pytest.mark.parametrize("size", _LIMITS, ids=str)
def test_the_snapshots_at_each_limit_are_written_by_msgspec_as_json_writes_them(size: dict[str, int]) -> None:
    snap = big(**size)
    read = t.loads(t.dumps(snap, indent=None), validate=False)
    assert _by_msgspec(read) == _as_written(snap)


_EDGES = [0.0, -0.0, 1.0, 63e9, 9999999999999998.0, 1e16, 1e300, 1.7976931348623157e308, 1e-4, 9.999e-5, 1e-5,
          5e-324, -1e16, -1e-5, 0.1, math.nan, math.inf, -math.inf]


@pytest.mark.parametrize("value", _EDGES)
def test_every_float_is_written_as_json_writes_it(value: float) -> None:
    """``msgspec`` writes a float in exponent form, NaN and the infinities otherwise than ``json``: those are
    handed to it as ``json``'s text (a link's rate, a matrix's cell and row)."""
    gpus = (t.Gpu(id="0000:01:00.0"), t.Gpu(id="0000:02:00.0"))
    ids = tuple(g.id for g in gpus)
    matrices = tuple(t.Matrix(name=f"m{i}", kind=t.MatrixKind.THEORETICAL | t.MatrixKind.BANDWIDTH,
                              unit="bytes_per_second", ids=ids, values=rows)
                     for i, rows in enumerate([((0.0, value), (1e9, 0.0)), ((value, value), (value, value))]))
    link = t.Link(a=ids[0], b=ids[1], kind=t.LinkKind.NVLINK, count=2, bytes_per_second=value)
    snap = t.Snapshot(node="n", gpus=gpus, links=(link,), matrices=matrices)
    assert _by_msgspec(snap) == _hash.structure_text(snap) == _as_written(snap)
    # in a list long enough to be written a field at a time (``_dicts``), among rates msgspec writes as json does
    links = tuple(t.Link(a=ids[0], b=f"x{i}", kind=t.LinkKind.NVLINK, count=2, bytes_per_second=value if i == 5
                         else None if i == 6 else 63e9) for i in range(70))
    snap = t.replace(snap, links=links)
    assert _by_msgspec(snap) == _hash.structure_text(snap) == _as_written(snap)


@pytest.mark.parametrize("node_id", ["numa\u00e9", "numa\x7f", "numa\x00\n\"\\", "numa\ud800", "numa\u2028"])
def test_a_text_outside_printable_ascii_is_written_as_json_writes_it(node_id: str) -> None:
    """``json`` escapes it, ``msgspec`` writes UTF-8 (or refuses a lone surrogate): ``json`` writes it."""
    snap = t.Snapshot(node="n", numa_nodes=(t.NumaNode(id=node_id, os_index=2**70, cpus=(0, 1)),))
    if not node_id.isascii() or "\x7f" in node_id:
        assert _hash.msgspec_text(snap) is None
    assert _either(snap) == _as_written(snap)


@settings(max_examples=examples(30, 300), deadline=None)
@given(snapshots, st.sampled_from(_EDGES))
def test_any_snapshot_is_written_as_json_writes_it(snap: t.Snapshot, rate: float) -> None:
    snap = t.replace(snap, links=tuple(t.replace(link, bytes_per_second=rate) for link in snap.links[:1])
                     + snap.links[1:])
    assert _either(snap) == _as_written(snap)


def test_a_small_snapshot_is_written_by_json_until_msgspec_is_loaded() -> None:
    """Loading ``msgspec`` costs more than it saves on a small snapshot: ``json`` writes it in a process that has
    not loaded it, as the agent at 1,024 NICs has not (a process of its own)."""
    code = ("import sys, topology as t\nfrom topology.codec import _hash\nfrom benchmarks._big import big\n"
            "small, large = big(8, pci=1000), big(8, links=4096)\n_hash.structure_text(small)\n"
            "print('msgspec' in sys.modules)\n_hash.structure_text(large)\nprint('msgspec' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1]).stdout.split()
    assert out == ["False", "True"]


def test_the_limit_snapshot_file_hashes_as_before(tmp_path: Path) -> None:
    """The hash of a snapshot as read back from its file: what the agent keeps beside its state."""
    path = tmp_path / "s.json"
    path.write_text(t.dumps(big(8, links=2048)))
    snap = t.loads(path.read_bytes())
    import hashlib

    assert t.structure_hash(snap) == hashlib.sha256(_as_written(snap)).hexdigest()
