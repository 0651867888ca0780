"""``--from``: only a regular file (or ``-``) of at most 64 MiB, whose meaning holds together as well as its
shape; anything else is exit 3 with one line naming the field, and nothing ever hangs on a FIFO."""

from __future__ import annotations

import copy
import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import topology as t
from agent.discovery import discover
from agent.discovery.access import DiscoveryContext, FsRoot
from tests.fakenvml.fixtures import MakeMachine

REPO = Path(__file__).resolve().parents[1]
Doc = dict[str, Any]


def topo_from(path: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_")}
    return subprocess.run([sys.executable, "-m", "agent.cli", "topo", "--from", path], capture_output=True,
                          cwd=REPO, env=env, timeout=60, check=False, input=stdin.decode() if stdin else None,
                          text=True)


@pytest.fixture(scope="module")
def hgx(tmp_path_factory: pytest.TempPathFactory) -> Doc:
    """A whole HGX H100 snapshot with one measured host copy, as a document."""
    from tests.fakenvml import materialize

    node = materialize("hgx-h100", tmp_path_factory.mktemp("hgx"))
    os.environ["TOPOLINK_FAKENVML_PROFILE"] = str(node.nvml_profile)
    try:
        snap = discover(DiscoveryContext(root=FsRoot(node.root), nvml_library=str(node.nvml_library)))
    finally:
        del os.environ["TOPOLINK_FAKENVML_PROFILE"]
    gpu = snap.gpus[0].id
    copy_ = t.Measurement(test="host_to_device_memcpy_ce", subjects=("numa0", gpu), direction="a->b", value=55e9,
                          unit="bytes_per_second", source=t.Source.MEASURED, method="ce", size_bytes=1 << 29,
                          stats=t.Stats(median=55e9, p5=54e9, p95=56e9, cv=0.01, samples=(54e9, 55e9, 56e9)))
    return t.to_dict(t.with_measurements(snap, (copy_,)))


def test_the_document_itself_reads(hgx: Doc, tmp_path: Path) -> None:
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(hgx))
    run = topo_from(str(path))
    assert run.returncode == 0, run.stderr
    assert topo_from("-", json.dumps(hgx).encode()).returncode == 0


def _edit(fn: Callable[[Doc], None]) -> Callable[[Doc], Doc]:
    def make(doc: Doc) -> Doc:
        d = copy.deepcopy(doc)
        fn(d)
        return d
    return make


def _gpu_lost(d: Doc) -> None:
    d["gpus"][2]["lost"] = True


def _partial_without_problems(d: Doc) -> None:
    d["sources"][0]["status"] = "partial"
    d["problems"] = []


def _p2p_without_nvlink(d: Doc) -> None:
    d["links"] = [lk for lk in d["links"] if lk["kind"] != "nvlink"]


def _nvml_absent(d: Doc) -> None:
    nvml = next(o for o in d["sources"] if o["name"] == "nvml")
    assert d["sources"].index(nvml) == 4
    nvml["status"] = "absent"
    d["links"] = [lk for lk in d["links"] if lk["kind"] != "nvlink"]
    d["matrices"] = [m for m in d["matrices"] if not m["name"].startswith("nvml_")]
    for g in d["gpus"]:
        g["index"] = None


def _measurement(**kw: Any) -> Callable[[Doc], None]:
    def fn(d: Doc) -> None:
        d["measurements"][0].update(kw)
    return fn


def _stats(**kw: Any) -> Callable[[Doc], None]:
    def fn(d: Doc) -> None:
        d["measurements"][0]["stats"].update(kw)
    return fn


def _link_rate(d: Doc) -> None:
    next(lk for lk in d["links"] if lk["kind"] == "pcie")["bytes_per_second"] = 0.0


def _gpu_off_the_tree(d: Doc) -> None:
    gpu = d["gpus"][0]["id"]
    d["pci"] = [f for f in d["pci"] if f["id"] != gpu]
    d["links"] = [lk for lk in d["links"] if gpu not in (lk["a"], lk["b"])]


def _nic_on_a_gpu(d: Doc) -> None:
    d["nics"][0]["pci_bus_id"] = d["gpus"][5]["id"]


EDITS: dict[str, tuple[Callable[[Doc], None], str]] = {
    "a gpu on a PCI function the snapshot lacks": (_gpu_off_the_tree, "snapshot.gpus[0].id"),
    "a nic on a PCI function the snapshot lacks": (lambda d: d["nics"][0].update(pci_bus_id="0000:ee:00.0"),
                                                   "snapshot.nics[0].pci_bus_id"),
    "a nic on a gpu's PCI function": (_nic_on_a_gpu, "snapshot.nics[0]"),
    "a PCI function under a parent not there": (lambda d: d["pci"][3].update(parent="0000:ee:00.0"),
                                                "snapshot.pci[3].parent"),
    "a gpu on a NUMA node not there": (lambda d: d["gpus"][1].update(numa_node=9), "snapshot.gpus[1]"),
    "a matrix over a device not there": (lambda d: d["matrices"][1]["ids"].__setitem__(0, "0000:ee:00.0"),
                                         "snapshot.matrices[1]"),
    "no sources": (lambda d: d.update(sources=[]), "snapshot.sources"),
    "problems emptied while a source is partial": (_partial_without_problems, "snapshot.sources[0].status"),
    "a lost gpu no problem covers": (_gpu_lost, "snapshot.gpus[2].lost"),
    "nvlinks emptied while nvml says p2p over nvlink": (_p2p_without_nvlink, "nvml_p2p_nvlink"),
    "a negative size": (_measurement(size_bytes=-5), "snapshot.measurements[0].size_bytes"),
    "a rate of 1e308": (_measurement(value=1e308), "snapshot.measurements[0].value"),
    "four times the link's rate": (_measurement(value=4 * 63e9), "snapshot.measurements[0].value"),
    "a zero rate": (_measurement(value=0.0), "snapshot.measurements[0].value"),
    "a negative duration": (_measurement(unit="seconds", value=-1e-6), "snapshot.measurements[0].value"),
    "statistics out of order": (_stats(p5=60e9), "snapshot.measurements[0].stats"),
    "a link of rate 0": (_link_rate, "bytes_per_second"),
    "1e308 B/s where no link bounds it": (_measurement(test="host_memcpy", subjects=["numa0", "numa0"],
                                                       method="memcpy", value=1e308),
                                          "snapshot.measurements[0].value"),
    "a measurement of a device not there": (_measurement(subjects=["numa0", "0000:ee:00.0"]),
                                            "snapshot.measurements[0].subjects"),
    "a source that took -1 s": (lambda d: d["sources"][0].update(duration_seconds=-1.0),
                                "snapshot.sources[0].duration_seconds"),
    "nvml absent beside gpus whose nvlinks are said known": (_nvml_absent, "snapshot.sources[4].status"),
    "a gpu nvml did not number, said known": (lambda d: d["gpus"][3].update(index=None), "snapshot.gpus[3].index"),
}


@pytest.mark.parametrize("case", sorted(EDITS))
def test_a_document_that_does_not_hold_together_is_refused(hgx: Doc, tmp_path: Path, case: str) -> None:
    edit, field = EDITS[case]
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(_edit(edit)(hgx)))
    run = topo_from(str(path))
    assert run.returncode == 3, (run.returncode, run.stderr, run.stdout[:300])
    assert len(run.stderr.strip().splitlines()) == 1 and field in run.stderr, run.stderr
    assert run.stdout == ""


def test_a_snapshot_no_source_read_is_not_complete() -> None:
    assert not t.Snapshot(node="n").complete


@pytest.mark.parametrize("make", ["fifo", "dir", "chardev", "big", "link-to-fifo"])
def test_only_a_regular_file_is_read(tmp_path: Path, make: str) -> None:
    path = tmp_path / "snap.json"
    if make == "fifo":
        os.mkfifo(path)
    elif make == "link-to-fifo":
        os.mkfifo(tmp_path / "fifo")
        path.symlink_to("fifo")
    elif make == "dir":
        path.mkdir()
    elif make == "chardev":
        if os.geteuid() != 0:
            pytest.skip("mknod needs root: the character device case runs as root (CI does)")
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero: endless
    else:
        with open(path, "wb") as f:
            f.truncate(t.MAX_DOCUMENT_BYTES + 1)  # sparse: refused by its size, never read
    run = topo_from(str(path))  # a FIFO must not hang: the 60 s limit would fail the test
    assert run.returncode == 3 and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert ("not a regular file" in run.stderr) == (make != "big")


def test_another_hosts_probe_report_reads_as_its_snapshot(fake_machine: MakeMachine, tmp_path: Path) -> None:
    """``topo --from`` reads the snapshot inside a probe report too; the same checks apply to it."""
    node = fake_machine("dgx-a100")
    snap = discover(DiscoveryContext(root=FsRoot(node.root), nvml_library=str(node.nvml_library)))
    doc = {"schema": "topolink.probe/v1", "snapshot": t.to_dict(snap)}
    doc["snapshot"]["sources"] = []
    path = tmp_path / "report.json"
    path.write_text(json.dumps(doc))
    run = topo_from(str(path))
    assert run.returncode == 3 and "snapshot.sources" in run.stderr


def test_a_repeated_key_is_refused_and_named(hgx: Doc, tmp_path: Path) -> None:
    text = json.dumps(hgx)
    gpu = json.dumps(hgx["gpus"][0])
    path = tmp_path / "snap.json"
    path.write_text(text.replace(gpu, gpu[:-1] + ', "numa_node": 1}', 1))
    run = topo_from(str(path))
    assert run.returncode == 3 and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert "'numa_node' appears twice" in run.stderr


@pytest.mark.parametrize("field", sorted(t.SNAPSHOT_LIMITS))
def test_a_list_beyond_its_limit_is_refused_before_its_entries_are_read(field: str) -> None:
    limit = t.SNAPSHOT_LIMITS[field]
    with pytest.raises(t.SchemaError, match=rf"^snapshot\.{field}: {limit + 1} entries, more than the {limit}"):
        t.from_dict({"schema": t.SCHEMA, "node": "n", field: [{}] * (limit + 1)})


def test_more_gpus_than_the_limit_is_exit_3(tmp_path: Path) -> None:
    path = tmp_path / "snap.json"
    path.write_text(json.dumps({"schema": t.SCHEMA, "node": "n", "gpus": [{}] * (t.SNAPSHOT_LIMITS["gpus"] + 1)}))
    run = topo_from(str(path))
    assert run.returncode == 3 and f"snapshot.gpus: {t.SNAPSHOT_LIMITS['gpus'] + 1} entries" in run.stderr, run.stderr


def _objects(value: Any, path: str = "snapshot") -> list[tuple[str, Doc]]:
    """Every object of a document with its path, the first of each list only (its siblings have its keys)."""
    if isinstance(value, dict):
        return [(path, value)] + [o for k, v in value.items() for o in _objects(v, f"{path}.{k}")]
    if isinstance(value, list) and value:
        return _objects(value[0], f"{path}[0]")
    return []


def test_a_missing_field_is_named_never_a_python_signature(hgx: Doc) -> None:
    tried = 0
    for path, obj in _objects(hgx):
        for key in list(obj):
            if key == "schema":
                continue
            value = obj.pop(key)
            try:
                t.from_dict(hgx)
            except t.SchemaError as exc:
                tried += 1
                assert "__init__" not in str(exc) and "argument" not in str(exc), (path, key, str(exc))
                if "missing" in str(exc):
                    assert str(exc).startswith(f"{path}.{key}: missing"), (path, key, str(exc))
            finally:
                obj[key] = value
    assert tried > 20  # required fields of the snapshot, GPUs, links, sources, problems, measurements


@pytest.mark.parametrize("ahead", [301.0, 86400.0, 100 * 365 * 86400.0, 1e15])
@pytest.mark.parametrize("field", ["taken_at", "measurement"])
def test_a_document_dated_in_the_future_is_refused_with_its_field_and_time(hgx: Doc, field: str,
                                                                          ahead: float) -> None:
    import time

    d = copy.deepcopy(hgx)
    target = d if field == "taken_at" else d["measurements"][0]
    target["taken_at"] = time.time() + ahead
    where = "snapshot.taken_at" if field == "taken_at" else "snapshot.measurements[0].taken_at"
    with pytest.raises(t.SchemaError, match=rf"^{re.escape(where)}: \d+ \(.*\) is in the future"):
        t.from_dict(d)
    target["taken_at"] = time.time() + 60  # within the clock skew two machines may have
    t.from_dict(d)


def _nvlinks(d: Doc) -> list[Doc]:
    return [lk for lk in d["links"] if lk["kind"] == "nvlink"]


def _port_of_gpu(d: Doc) -> Doc:
    parent = next(f["parent"] for f in d["pci"] if f["id"] == d["gpus"][0]["id"])
    return next(f for f in d["pci"] if f["id"] == parent)


def _versions(d: Doc, version: int) -> None:
    for lk in _nvlinks(d):
        lk["nvlink_version"], lk["bytes_per_second"] = version, 25e9 * lk["count"]


# A rule live discovery keeps, broken in a saved document: (edit, what the refusal names)
RULES: dict[str, tuple[Callable[[Doc], None], str]] = {
    "an NVLink rate 10 times its links": (lambda d: _nvlinks(d)[0].update(bytes_per_second=_nvlinks(d)[0][
        "bytes_per_second"] * 10), "bytes_per_second: "),
    "an NVLink to a PCIe bridge": (lambda d: _nvlinks(d)[0].update(b=_port_of_gpu(d)["id"]),
                                   "which is neither a GPU nor an NVSwitch"),
    "40 NVLinks in one bundle": (lambda d: _nvlinks(d)[0].update(count=40, bytes_per_second=None),
                                 "and a GPU of the H100 family has at most 18"),
    "an NVLink generation no table row has": (lambda d: _nvlinks(d)[0].update(nvlink_version=7,
                                              bytes_per_second=None), "NVLink 7: unknown generation"),
    "an NVLink generation not the family's": (lambda d: _versions(d, 3), "has NVLink 4"),
    "a PCIe generation no table row has": (lambda d: d["gpus"][0]["pcie"].update(max_gen=8),
                                           "snapshot.gpus[0].pcie.max_gen: PCIe Gen8: unknown generation"),
    "a PCIe width no link has": (lambda d: d["gpus"][0]["pcie"].update(current_width=3),
                                 "snapshot.gpus[0].pcie.current_width: x3 is no PCIe link width"),
    "a PCIe rate above its link": (lambda d: next(lk for lk in d["links"] if lk["kind"] == "pcie" and lk.get(
        "bytes_per_second")).update(bytes_per_second=1e12), "over PCIe: at most"),
    "an H100's device id with an H200's name": (lambda d: d["gpus"][0].update(name="NVIDIA H200 141GB HBM3e"),
                                                "what model a GPU is: "),
    "the two ends of a PCIe link at other widths": (lambda d: _port_of_gpu(d)["link"].update(current_width=4),
                                                    "a PCIe link's trained state: "),
}


@pytest.mark.parametrize("case", sorted(RULES))
def test_a_saved_snapshot_is_held_to_the_rules_discovery_keeps(hgx: Doc, case: str) -> None:
    from agent.discovery.assemble import witnessed

    edit, named = RULES[case]
    d = copy.deepcopy(hgx)
    edit(d)
    with pytest.raises(t.SchemaError, match=re.escape(named)):
        witnessed(t.from_dict(d))
    witnessed(t.from_dict(hgx))


def test_topo_from_refuses_a_rule_broken_with_exit_3(hgx: Doc) -> None:
    d = copy.deepcopy(hgx)
    RULES["an H100's device id with an H200's name"][0](d)
    run = topo_from("-", json.dumps(d).encode())
    assert run.returncode == 3 and "what model a GPU is" in run.stderr and run.stderr.count("\n") == 1, run.stderr
