"""The witness table's generator: one witness of every row perturbed on every machine profile and real tree.

Each case changes one reading (tests/fuzz/witness_cases.py) and discovers the tree again: the row's
problem must name both readings and leave the row's facts unknown, so the snapshot is not complete (the
CLI's exit 1), or, where the row states a winner, the winner's reading stands and a problem says so. Either
way every fact that changed is marked unknown (tests/fuzz/oracle.py) and no label, ResourceSlice attribute
or taint rule differs from the clean machine's beyond facts withheld (tests/published.py).

By default each row runs on one tree that has its pair (``HOME``); ``TOPOLINK_WITNESS_ALL=1`` runs every
row on every profile and tree (a tree without the row's pair is skipped there, counted as nothing).
"""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.discovery import discover
from agent.discovery.access import DiscoveryContext, FsRoot
from agent.discovery.assemble import WITNESSES, Witness
from tests.fakenvml import ENV_PROFILE, MACHINES
from tests.fakenvml.fixtures import MakeMachine
from tests.fuzz.oracle import diff
from tests.fuzz.witness_cases import PLANNERS, Edit, WitnessCase
from tests.published import more_than_known
from tests.reference_data import hwloc_tarballs
from topology import Snapshot

PROFILES = sorted(p.stem for p in MACHINES.glob("*.yaml"))
TREES = [p.name.removesuffix(".tar.bz2") for p in hwloc_tarballs()]
ALL = os.environ.get("TOPOLINK_WITNESS_ALL") == "1"
SEED = int(os.environ.get("TOPOLINK_FUZZ_SEED", "20240607"))


def test_every_row_has_a_generator() -> None:
    assert sorted(PLANNERS) == sorted(w.key for w in WITNESSES)


def _apply(root: Path, nvml_profile: Path | None, key: str, edit: Edit) -> None:
    WitnessCase(key, edit).apply(root)
    if edit.nvml is not None:
        assert nvml_profile is not None
        nvml_profile.write_text("\n".join(edit.nvml) + "\n")


def _judge(row: Witness, edit: Edit, clean: Snapshot, snap: Snapshot) -> list[str]:
    mine = [p for p in snap.problems if p.source == row.source and p.message.startswith(row.fact + ":")
            and p not in clean.problems]
    errors = []
    if not mine:
        errors.append(f"no {row.key} problem; problems: {[p.message for p in snap.problems][:6]}")
    elif edit.winner:
        if any(p.unknown for p in mine):
            errors.append(f"the stated winner should stand, yet {mine[0].message}")
    elif not all(p.unknown for p in mine) or snap.complete:
        errors.append(f"a disagreement left nothing unknown (complete: {snap.complete})")
    errors += diff(clean, snap)
    errors += [f"would publish {e}" for e in more_than_known(clean, snap)]
    return errors


# Where each row runs by default: a tree that has its pair.
HOME = {"gpu-pcie": "dgx1-v100-vm", "gpu-memory-node": "gb200-tray", "fabric": "gb200-tray",
        "nvlink-ends": "dgx1-v100", "nvml-p2p-nvlink": "rtx4090-8x",
        "nvlink-remote-type": "a6000-8x-nvlink-pairs", "numa-distance": "40intel64-2g2n4c+pcilocality",
        "gpu-memory-numa": "gh200", "fabric-domain": "gb200-tray"}


def _cases() -> list[tuple[str, str]]:
    if ALL:
        return [(k, t) for k in sorted(PLANNERS) for t in [*PROFILES, *TREES]]
    return [(k, HOME.get(k, "hgx-h100")) for k in sorted(PLANNERS)]


@pytest.mark.parametrize(("key", "where"), _cases())
def test_a_perturbed_witness_is_disputed_or_overruled(fake_machine: MakeMachine, hwloc_tree: Callable[[str], Path],
                                                      tmp_path: Path, key: str, where: str) -> None:
    row = next(w for w in WITNESSES if w.key == key)
    tree = where
    rng = random.Random(f"{SEED}:{key}:{tree}")
    if tree in PROFILES:
        node = fake_machine(tree)
        root, nvml_profile, library = node.root, node.nvml_profile, str(node.nvml_library)
    else:
        root = tmp_path / tree
        shutil.copytree(hwloc_tree(f"{tree}.tar.bz2"), root, symlinks=True)
        nvml_profile, library = None, None

    def read() -> Snapshot:
        return discover(DiscoveryContext(root=FsRoot(root), node_name=tree, nvml_library=library))

    clean = read()
    edit = PLANNERS[key](rng, clean, root, nvml_profile.read_text().splitlines() if nvml_profile else None)
    if edit is None:
        assert ALL, f"{tree} has no {key} pair to perturb"
        return
    _apply(root, nvml_profile, key, edit)
    if nvml_profile is not None:
        os.environ[ENV_PROFILE] = str(nvml_profile)
    errors = _judge(row, edit, clean, read())
    assert not errors, f"{key} on {tree} ({edit.note}):\n" + "\n".join(errors[:8])
