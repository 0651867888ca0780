"""The standing fuzz suite: no input may crash, hang or leak, and the snapshot is honest.

Mutated copies of the real hwloc trees and of machine profiles (sysfs mutations, contradictory pairs of
sysfs facts, NVML errors on every call or only its nth, NVML not starting, NVML answers contradicting the
tree, a GPU lost at every call), broken saved snapshots, and non-regular files at every path the commands
write or read (-o, --from, the agent's state directory and features file), each run by ``topolink`` in a
subprocess under a time and memory limit, as an unprivileged user. Every case must end with the exit
status the README promises, no traceback, nothing of the user's changed; every fact that changed must be
marked unknown (tests/fuzz/oracle.py), and no label, ResourceSlice attribute or taint rule computed from
the snapshot may differ from the clean machine's (tests/published.py).

    TOPOLINK_FUZZ_SEED=7 TOPOLINK_FUZZ_CASES=2000 .venv/bin/python -m pytest tests/test_fuzz.py -m slow
    TOPOLINK_FUZZ_ONLY='hgx-h100#17' ...        # re-run the cases whose id contains this text
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fuzz import Suite, fact_values
from tests.fuzz._cases import tally
from tests.fuzz._trees import cleanup_stale
from tests.fuzz.oracle import diff
from tests.fuzz.physics_cases import RULES
from topology import NODE, Aspect, Fact, Gpu, Problem, Snapshot, loads, replace

SEED = int(os.environ.get("TOPOLINK_FUZZ_SEED", "20240607"))
CASES = int(os.environ.get("TOPOLINK_FUZZ_CASES", "200"))
SHOWN = 20
DRAWS = int(os.environ.get("TOPOLINK_FUZZ_DRAWS", "25"))  # per rule and machine, in process


@pytest.fixture(scope="module")
def suite(hwloc_tree: Callable[[str], Path]) -> Iterator[Suite]:
    cleanup_stale()
    s = Suite(SEED, CASES, hwloc_tree)
    try:
        t0 = time.perf_counter()
        s.prepare()
        s.prepare_seconds = time.perf_counter() - t0
        yield s
    finally:
        s.close()


@pytest.mark.slow
def test_fuzz_every_case_ends_cleanly_and_honestly(suite: Suite, capsys: pytest.CaptureFixture[str]) -> None:
    cases = suite.plan()
    only = os.environ.get("TOPOLINK_FUZZ_ONLY")
    if only:
        cases = [c for c in cases if only in c.id]
    t0 = time.perf_counter()
    results = suite.run(cases)
    seconds = time.perf_counter() - t0
    counts = tally(results)
    failed = [r for r in results if r.errors]
    summary = (f"topolink fuzz: seed {SEED}, {len(results)} cases in {seconds:.0f} s "
               f"(+{suite.prepare_seconds:.0f} s of clean runs) as {suite.privileges}: "
               + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
               + f"; {len(failed)} failed")
    with capsys.disabled():
        sys.stderr.write("\n" + summary + "\n")
    by_kind: dict[str, int] = {}
    for r in failed:
        kind = r.case.mutation.kind if r.case.mutation else (
            "nvml-lose" if r.case.fault and r.case.fault.lost_gpu is not None else
            "nvml-contradiction" if r.case.fault and r.case.fault.edit else
            "nvml-error" if r.case.fault else f"snapshot-{r.case.broken.kind}" if r.case.broken else
            f"io-{r.case.io.command}" if r.case.io else f"witness-{r.case.witness.key}" if r.case.witness
            else "clean")
        by_kind[kind] = by_kind.get(kind, 0) + 1
    shown = "\n\n".join(r.report(SEED) for r in failed[:SHOWN])
    if failed:
        pytest.fail(f"{summary}\nfailures by mutation kind: {dict(sorted(by_kind.items()))}\n"
                    f"first {min(SHOWN, len(failed))}:\n\n{shown}", pytrace=False)


# The oracle itself, on hand-made snapshots: it must catch a silent change and accept a declared one.

def _snap(tmp: Snapshot, **kw: object) -> Snapshot:

    return replace(tmp, **kw)


@pytest.mark.slow
def test_oracle_flags_a_silent_change_and_accepts_a_declared_one(suite: Suite) -> None:
    base = suite.baselines["hgx-h100"].snap
    gpu = base.gpus[0]
    changed = _snap(base, gpus=(_snap_gpu(gpu, numa_node=7), *base.gpus[1:]))
    assert any(f"numa of {gpu.id}" in e for e in diff(base, changed))
    declared = _snap(changed, problems=(Problem(source="pci", subject=gpu.id, message="numa_node unreadable",
                                                unknown=(Fact(subject=gpu.id, aspect=Aspect.NUMA),)),))
    assert not [e for e in diff(base, declared) if gpu.id in e and "numa" in e]
    dropped = _snap(base, gpus=base.gpus[1:])
    assert any("gpus of node" in e for e in diff(base, dropped))
    node_unknown = _snap(dropped, problems=(Problem(source="nvml", subject="nvml", message="x",
                                                    unknown=(Fact(subject=NODE, aspect=Aspect.GPUS),)),))
    assert not diff(base, node_unknown), diff(base, node_unknown)
    assert Fact(subject=gpu.id, aspect=Aspect.NVLINKS) in fact_values(base)


def _snap_gpu(gpu: Gpu, **kw: object) -> Gpu:

    return replace(gpu, **kw)


@pytest.mark.slow
def test_fuzz_snapshot_roundtrip_is_stable(suite: Suite) -> None:
    """The baselines the oracle compares against read back as they were written."""
    for b in suite.baselines.values():
        from topology import dumps

        assert fact_values(loads(dumps(b.snap))) == fact_values(b.snap), b.tree.name


@pytest.fixture(scope="module")
def machine_docs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    """Clean snapshot documents of the machine profiles with NVLinks, discovered in this process."""
    from tests.serve_machines import discover_profile
    from topology import to_dict

    docs = {}
    for name in ("hgx-h100", "dgx-a100", "dgx1-v100", "a6000-8x-nvlink-pairs", "gb200-tray"):
        docs[name] = to_dict(discover_profile(name, tmp_path_factory.mktemp(name))[0])
    return docs


@pytest.mark.parametrize("kind", sorted(RULES))
def test_every_rule_refuses_every_draw_of_its_planner(machine_docs: dict[str, dict[str, object]], kind: str) -> None:
    """The physics and saved-document planners, many draws each on several machines: each document is
    refused by the reader with one line naming a field, never a Python signature, and never read as whole."""
    import copy
    import random

    from agent.discovery.assemble import witnessed
    from topology import SchemaError, from_dict

    for name, doc in machine_docs.items():
        witnessed(from_dict(doc))  # the clean document reads
        for draw in range(DRAWS):
            d = copy.deepcopy(doc)
            RULES[kind](d, random.Random(f"{SEED}:{kind}:{name}:{draw}"))
            with pytest.raises(SchemaError) as refused:
                witnessed(from_dict(d))
            message = str(refused.value)
            assert message.startswith("snapshot") and "\n" not in message and "__init__" not in message, message
