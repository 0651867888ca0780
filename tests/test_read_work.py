"""Reading a saved snapshot checks each PCI function and link in a bounded number of steps: the checks of a value
that passes build no text (a field's name is written only for the value refused) and compare records in one C call
each, so the work of ``from_dict``'s checks per entry stays the same at any size. Counted (Python calls), not timed
(benchmarks/limits.py times the commands at the limits)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import topology as t
from agent.discovery.assemble import witnessed
from benchmarks._big import big
from tests.budget import examples
from topology.codec._structure import _canonical

# Python calls of the checks per PCI function or link of a big board (measured: about 7.6 per link and 10.2 per
# function; 13.1 per link when each link's PCIe state was judged and compared again rather than each distinct state
# once, 15.7 before that, 28.6 when every check wrote its field's name and compared records field by field)
CALLS_PER_ENTRY = 11


def _calls(run: Callable[[], object]) -> int:
    count = [0]

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            count[0] += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return count[0]


@pytest.mark.parametrize("size", [{"links": 2048}, {"pci": 2048}])
def test_the_checks_of_a_read_cost_a_bounded_number_of_calls_per_entry(size: dict[str, int]) -> None:
    doc = t.parse_json(t.dumps(big(8, **size), indent=None))
    snap = t.from_dict(doc)
    entries = len(snap.pci) + len(snap.links)
    checks = _calls(lambda: t.from_dict(doc)) - _calls(lambda: t.from_dict(doc, validate=False))
    assert checks <= CALLS_PER_ENTRY * entries, f"{checks} calls for {entries} entries"
    assert t.dumps(t.from_dict(doc), indent=None) == t.dumps(snap, indent=None)  # what the checks pass, unchanged


def test_records_compare_and_hash_by_their_fields() -> None:
    a = t.PcieLinkState(current_gen=5, current_width=16, max_gen=5, max_width=16)
    same = t.PcieLinkState(current_gen=5, current_width=16, max_gen=5, max_width=16)
    other = t.PcieLinkState(current_gen=4, current_width=16, max_gen=5, max_width=16)
    assert a == same and hash(a) == hash(same) and a != other
    assert t.NumaNode(id="numa0", os_index=0, cpus=(0,)) != t.NumaNode(id="numa0", os_index=0, cpus=(1,))


def _chain() -> t.Snapshot:
    """A chain of 255 bridges, one a bus (the deepest a PCI domain holds), and 256 functions under the last."""
    hb = t.HostBridge(id="pci0000:00", domain=0, bus=0, numa_node=0)
    pci = [t.PciFunction(id="0000:00:01.0", parent=hb.id, vendor_id=0x8086, device_id=1, class_code=0x060400,
                         numa_node=0)]
    for bus in range(1, 0xFF):
        pci.append(t.PciFunction(id=f"0000:{bus:02x}:00.0", parent=pci[-1].id, vendor_id=0x10B5, device_id=2,
                                 class_code=0x060400, numa_node=0))
    pci += [t.PciFunction(id=f"0000:ff:{dev:02x}.{fn}", parent=pci[-1].id, vendor_id=0x15B3, device_id=4,
                          class_code=0x020000, numa_node=0) for dev in range(32) for fn in range(8)]
    return t.Snapshot(node="chain", host_bridges=(hb,), pci=tuple(pci),
                      numa_nodes=(t.NumaNode(id="numa0", os_index=0, cpus=(0,)),),
                      sources=(t.SourceOutcome(name="pci", status=t.SourceStatus.OK, duration_seconds=0.001),))


def _lines(run: Callable[[], object], within: str = "") -> int:
    """Lines run (of files whose name ends with ``within``, when given)."""
    count = [0]

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        if not frame.f_code.co_filename.endswith(within):
            return None
        if event == "line":
            count[0] += 1
        return trace

    sys.settrace(trace)
    try:
        run()
    finally:
        sys.settrace(None)
    return count[0]


def test_each_chain_of_parents_is_walked_once() -> None:
    """Every function's chain of parents up to its host bridge is checked for a cycle, each link of it once: 511
    functions under 255 bridges cost lines in proportion to the functions (measured: about 64 lines each; 641
    when each function walked its whole chain again)."""
    doc = t.parse_json(t.dumps(_chain(), indent=None))
    lines = _lines(lambda: t.from_dict(doc)) - _lines(lambda: t.from_dict(doc, validate=False))
    assert lines <= 100 * len(doc["pci"]), f"{lines} lines for {len(doc['pci'])} functions"


def test_the_witness_rules_walk_the_links_once_not_once_per_gpu() -> None:
    """The witness table's rules on a snapshot read back (``--from``): a GPU's NVLinks to switches off the node
    are found in one pass over the links, not one pass per GPU (measured at 64 GPUs and 2,048 links: about 32
    lines per GPU, PCI function and link; 98 when each GPU walked every link)."""
    snap = big(64, links=2048)
    entries = len(snap.gpus) + len(snap.pci) + len(snap.links)
    lines = _lines(lambda: witnessed(snap))
    assert lines <= 50 * entries, f"{lines} lines for {entries} GPUs, PCI functions and links"


def _inits(cls: type, run: Callable[[], object]) -> int:
    """How many records of ``cls`` ``run`` builds (calls of its ``__init__``)."""
    return _code_calls(cls.__init__.__code__, run)


def _code_calls(code: CodeType, run: Callable[[], object]) -> int:
    """How many times ``run`` calls the function of ``code``."""
    count = [0]

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is code:
            count[0] += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return count[0]


def test_a_record_of_scalars_read_many_times_is_built_once() -> None:
    """Every PCI function and PCIe link of a board holds a link state, nearly all of them equal: reading one back
    builds each distinct state once (measured: 4,040 built for 2,048 links; 0 or 1 now), and the others are
    that record itself. Keys, values and JSON types are the key: ``true`` is not taken for ``1``."""
    # a state no other test reads, so that this one builds it
    state = {"current_gen": 3, "current_width": 7, "max_gen": 4, "max_width": 7}
    snap = big(8, links=2048)
    doc = t.parse_json(t.dumps(snap, indent=None))
    states = 0
    for entry in (*doc["gpus"], *doc["pci"], *doc["links"]):
        for key in ("link", "pcie"):
            if entry.get(key) is not None:
                entry[key] = dict(state)
                states += 1
    read: list[t.Snapshot] = []
    built = _inits(t.PcieLinkState, lambda: read.append(t.from_dict(doc, validate=False)))
    assert built == 1, f"{built} link states built for {states} equal ones"
    assert read[0].pci[-1].link == t.PcieLinkState(**state) and read[0].pci[-1].link is read[0].links[-1].pcie
    assert t.dumps(read[0], indent=None) == t.dumps(t.from_dict(t.parse_json(t.dumps(read[0], indent=None)),
                                                               validate=False), indent=None)
    for bad, said in ((True, "expected int"), (7.0, "expected int"), ("7", "expected int"), ([7], "expected int")):
        doc["pci"][0]["link"] = {**state, "current_width": bad}
        with pytest.raises(t.SchemaError, match=r"snapshot\.pci\[0\]\.link\.current_width: " + said):
            t.from_dict(doc, validate=False)
    doc["pci"][0]["link"] = {**state, "surprise": 1}
    with pytest.raises(t.SchemaError, match=r"snapshot\.pci\[0\]\.link: unknown keys \['surprise'\]"):
        t.from_dict(doc, validate=False)


@pytest.mark.parametrize("size", [{"links": 2048}, {"pci": 2048}])
def test_the_structure_hash_encodes_each_record_once(size: dict[str, int]) -> None:
    """The hash of a snapshot read back encodes the link state its functions and links share once, and writes each
    record's keys in order (no sort): fewer than 4 Python calls per PCI function or link (measured: 3.1 to 3.5;
    4.1 to 5.5 when each entry encoded its own copy of the state)."""
    snap = t.from_dict(t.parse_json(t.dumps(big(8, **size), indent=None)))
    entries = len(snap.pci) + len(snap.links)
    calls = _calls(lambda: t.structure_hash(snap))
    assert calls < 4 * entries, f"{calls} calls for {entries} entries"


@settings(max_examples=examples(200, 2000), deadline=None)
@given(st.one_of(st.text(alphabet="0123456789abcdefABCDEF:.x \n", max_size=16),
                 st.builds(lambda d, b, v, f: f"{d:04x}:{b:02x}:{v:02x}.{f}", st.integers(0, (1 << 32) - 1),
                           st.integers(0, 255), st.integers(0, 31), st.integers(0, 7))))
def test_the_one_pass_over_bus_ids_takes_what_canonical_bdf_writes(text: str) -> None:
    from topology.codec._structure import _CANONICAL_BDF

    assert (_CANONICAL_BDF.fullmatch(text) is not None) == _canonical(text)


def test_bus_ids_are_checked_in_one_pass() -> None:
    """Every PCI function's and GPU's bus id is matched by the regular expression engine in one pass: no Python
    call per function (measured: 0; 2 each when each was parsed and written again)."""
    doc = t.parse_json(t.dumps(big(8, pci=2048), indent=None))
    for code in (_canonical.__code__, t.canonical_bdf.__code__):
        assert _code_calls(code, lambda: t.from_dict(doc)) == 0
    doc["pci"][-1]["id"] = doc["pci"][-1]["id"].upper().replace("0001", "1")  # a bus id, not as discovery writes one
    with pytest.raises(t.SchemaError, match=rf"snapshot\.pci\[{len(doc['pci']) - 1}\]\.id: .* is no PCI address"):
        t.from_dict(doc)


def test_a_page_looks_up_each_switch_in_one_map_per_snapshot() -> None:
    """The page asks for the PCIe switch above each GPU and NIC: the map of parents it walks is built once per
    snapshot, not once per device (measured at 256 NICs and 270 functions: 7,147 lines; 79,205 when each device
    built it again)."""
    import exporter

    snap = big(8, nics=256)
    view = exporter.View(snapshot=snap, structure_hash="x")
    lines = _lines(lambda: exporter.page(view, now=0.0, svg=None, svg_reason="linked", measured_matrix=""),
                   "_pcie_switch.py")
    assert lines <= 40 * (len(snap.nics) + len(snap.pci)), f"{lines} lines for {len(snap.nics)} NICs"


def test_a_page_and_its_picture_pass_over_the_links_for_degradations_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's picture, layout and table each list the degraded GPUs and NICs: found once per snapshot (a pass
    over every link, 32,768 at the link limit), not once per part (three before)."""
    import exporter
    from exporter._core import _derive

    passes = [0]
    found = _derive._degraded

    def counted(*args: Any) -> tuple[tuple[str, str, str], ...]:
        passes[0] += 1
        return found(*args)

    monkeypatch.setattr(_derive, "_degraded", counted)
    snap = big(8, links=256)
    view = exporter.View(snapshot=snap, structure_hash="x")
    exporter.picture_dot(snap)
    exporter.page(view, now=0.0, svg=None, svg_reason="linked", measured_matrix="")
    assert passes[0] == 1


def _collections(run: Callable[[], object]) -> int:
    """How many passes of the cyclic garbage collector ``run`` starts."""
    import gc

    count = [0]

    def note(phase: str, info: dict[str, int]) -> None:
        count[0] += phase == "start"

    gc.callbacks.append(note)
    try:
        run()
    finally:
        gc.callbacks.remove(note)
    return count[0]


def test_reading_a_snapshot_starts_no_pass_of_the_cycle_collector() -> None:
    """Parsing, decoding and hashing a snapshot make only trees (no cycle to find): the passes of the cyclic collector
    wait for the end of each (measured at 2,048 links: at most the one pass put off; 11 to 63 when they ran as the
    objects were made). It is on again after, and stays off for a process that turned it off."""
    import gc

    text = t.dumps(big(8, links=2048), indent=None)
    doc = t.parse_json(text)
    snap = t.from_dict(doc, validate=False)
    assert gc.isenabled()
    for run in (lambda: t.parse_json(text), lambda: t.from_dict(doc, validate=False),
                lambda: t.structure_hash(t.replace(snap, node="other"))):
        gc.collect()  # what the objects made before would start
        assert _collections(run) <= 1  # the one pass put off to the end of the build, if any
        assert gc.isenabled()
    gc.disable()
    try:
        t.parse_json(text)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_collector_is_on_again_once_every_thread_has_read() -> None:
    import gc
    import threading

    from topology.codec._collector import Building

    inside, release = threading.Event(), threading.Event()

    def reader() -> None:
        with Building():
            inside.set()
            release.wait(30)

    other = threading.Thread(target=reader)
    other.start()
    assert inside.wait(30)
    with Building():
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread still builds
    release.set()
    other.join(30)
    assert gc.isenabled()


def test_the_metrics_look_up_each_gpus_host_bridge_in_one_map_per_snapshot() -> None:
    """The first ``/metrics`` asks for the host bridge above each GPU: the map of parents it walks is built once per
    snapshot, not once per GPU (measured at 256 GPUs and 2,048 functions: 14,226 lines; 536,720 when each GPU
    built it again)."""
    from exporter._core._derive import gpu_rows

    snap = big(256, pci=2048)
    lines = _lines(lambda: gpu_rows(snap), "_derive.py")
    assert lines <= 10 * (len(snap.gpus) + len(snap.pci)), f"{lines} lines for {len(snap.gpus)} GPUs"


def test_the_witness_rules_walk_each_chain_of_parents_once() -> None:
    """The root complex of each function (the rule that functions under one root are on one NUMA node) is found
    walking each chain of parents once, not once per function below it: 511 functions under 255 bridges (measured:
    19,116 lines; 311,088 when each function walked its whole chain)."""
    snap = _chain()
    lines = _lines(lambda: witnessed(snap))
    assert lines <= 60 * len(snap.pci), f"{lines} lines for {len(snap.pci)} functions"
