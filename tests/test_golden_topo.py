"""Golden tests from real machines: `topolink topo` on each machine profile, run as a user runs it, against
the real `nvidia-smi topo -m` output the profile was modelled on (tests/data/topo, never edited).

Both outputs go through the same tolerant reader; devices are compared by name (GPU3, mlx5_0), so the old
format's NIC-name headers and the new format's NIC legend meet.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.fakenvml import MACHINES, materialize
from tests.topo_reference import TopoReference, load, parse

REPO = Path(__file__).resolve().parents[1]


def _profiles() -> list[tuple[str, str]]:
    out = []
    for path in sorted(MACHINES.glob("*.yaml")):
        reference = yaml.safe_load(path.read_text()).get("reference")
        if reference:
            out.append((path.stem, reference))
    return out


PROFILES = _profiles()

# A cell where the model cannot reproduce the real machine, with the reason, per profile:
# {(row, column): (what topolink prints, why)}. Empty: every compared cell matches.
KNOWN_DIFFERENCES: dict[str, dict[tuple[str, str], tuple[str, str]]] = {}


def _name(ref: TopoReference, device: str, by_position: bool) -> str:
    return device if by_position else ref.nic_legend.get(device, device)


def _by_name(ref: TopoReference, by_position: bool = False) -> dict[tuple[str, str], str]:
    """Cells keyed by device name. A reference with NIC<k> headers and no legend can only be matched by
    position (ours lists NICs in ibverbs name order, as nvidia-smi does)."""
    return {(_name(ref, r, by_position), _name(ref, c, by_position)): v for (r, c), v in ref.cells.items()}


def _positional(real: TopoReference) -> bool:
    return not real.nic_legend and any(n.startswith("NIC") for n in real.nics)


def topo_output(profile: str, workdir: Path) -> str:
    node = materialize(profile, workdir)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_")} | node.env()
    out = subprocess.run([sys.executable, "-m", "agent.cli", "topo"], capture_output=True, text=True, env=env,
                         cwd=REPO, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_every_reference_has_a_profile() -> None:
    covered = {ref for _, ref in PROFILES}
    real = {p.name for p in load("hgx-h100-8nic-sglang-20855.txt").path.parent.glob("*.txt")}
    assert real <= covered, f"reference outputs without a machine profile: {sorted(real - covered)}"


@pytest.mark.parametrize(("profile", "reference"), PROFILES, ids=[p for p, _ in PROFILES])
def test_topo_matches_the_real_machine(profile: str, reference: str, tmp_path: Path) -> None:
    real = load(reference)
    ours = parse(topo_output(profile, tmp_path))
    known = KNOWN_DIFFERENCES.get(profile, {})

    assert len(ours.gpus) == len(real.gpus)
    pos = _positional(real)
    assert sorted(_name(ours, n, pos) for n in ours.nics) == sorted(_name(real, n, pos) for n in real.nics)

    real_cells, our_cells = _by_name(real, pos), _by_name(ours, pos)
    mismatches = []
    for (row, column), expected in sorted(real_cells.items()):
        if not row.startswith("GPU") and not column.startswith("GPU"):
            continue  # NIC x NIC: not part of the GPU-facing contract, checked below where it agrees
        got = our_cells[(row, column)]
        if (row, column) in known:
            assert got == known[(row, column)][0], f"{row}/{column}: the known difference changed"
            continue
        if got != expected:
            mismatches.append(f"{row}/{column}: real {expected}, ours {got}")
    assert mismatches == []

    for column, real_values, our_values in (
        ("CPU Affinity", real.cpu_affinity, ours.cpu_affinity),
        ("NUMA Affinity", real.numa_affinity, ours.numa_affinity),
        ("GPU NUMA ID", real.gpu_numa_id, ours.gpu_numa_id),
    ):
        if column in real.columns:
            assert our_values == real_values, column


@pytest.mark.parametrize(("profile", "reference"), PROFILES, ids=[p for p, _ in PROFILES])
def test_nic_pairs_match_the_real_machine(profile: str, reference: str, tmp_path: Path) -> None:
    real = load(reference)
    ours = parse(topo_output(profile, tmp_path))
    pos = _positional(real)
    real_cells, our_cells = _by_name(real, pos), _by_name(ours, pos)
    nic_cells = {k: v for k, v in real_cells.items() if not k[0].startswith("GPU") and not k[1].startswith("GPU")}
    assert {k: our_cells[k] for k in nic_cells} == nic_cells
