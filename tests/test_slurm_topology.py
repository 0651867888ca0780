"""``topolink cluster --emit slurm``: Slurm's topology.yaml as Slurm plans it (block sizes, adjacency, a tree with
``--level``, the node names Slurm uses), and every emitted file loaded into a real slurmctld (``tests/slurm.py``):
``scontrol show topology`` lists every block and switch, or the test skips saying what to install."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from exporter.kube._fleet._slurm import NoBlocks, block_sizes, slurm_topology
from tests.scheduler_fleet import LEAF, SPINE
from tests.scheduler_shapes import LEVELS, SHAPES, TIER0, TIER1, P, saved
from tests.slurm import SKIP, Slurm, find_slurm, load_topology

REPO = Path(__file__).resolve().parents[1]
SAVED = REPO / "tests" / "data" / "fleet" / "gb200-racks-topograph.json"


def cluster(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOPOLINK_", "KUBECONFIG"))}
    return subprocess.run([sys.executable, "-m", "agent.cli", "cluster", *args], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=120, check=False)


@pytest.fixture(scope="module")
def slurm() -> Slurm:
    found = find_slurm()
    if found is None:
        pytest.skip(SKIP)
    return found


def test_block_sizes_are_the_base_and_its_doublings_up_to_the_largest() -> None:
    assert block_sizes([18, 17, 18, 9]) == [9, 18]
    assert block_sizes([4, 4, 4]) == [4]
    assert block_sizes([2, 72, 5]) == [2, 4, 8, 16, 32, 64, 128]
    for sizes in ([3], [5, 6], [9, 35, 18], [2, 3, 4, 100]):
        got = block_sizes(sizes)
        assert got[0] == min(sizes) and got[-1] >= max(sizes) and (len(got) == 1 or got[-2] < max(sizes))
        assert all(b == 2 * a for a, b in itertools.pairwise(got))


def test_unequal_racks_are_blocks_in_fabric_order_and_a_tree() -> None:
    plan = slurm_topology(SHAPES["racks"](), [TIER1, TIER0], P)
    block = plan.entries[0]["block"]
    assert block["block_sizes"] == [9, 18]
    assert [len(b["nodes"].split(",")) for b in block["blocks"]] == [18, 17, 18, 9]  # leaf-0's racks, then leaf-1's
    tree = plan.entries[1]
    assert tree["topology"] == "topolink-tree" and not tree["cluster_default"]
    switches = {s["switch"]: s for s in tree["tree"]["switches"]}
    assert switches["tier-1-spine-0"]["children"] == "tier-0-leaf-0,tier-0-leaf-1"
    assert plan.alone == []


def test_slinky_names_nodes_by_a_label_and_a_node_without_it_is_said() -> None:
    fleet = SHAPES["no-clique"]()
    for name, labels in fleet.items():
        if name != "tray-00":
            labels["slinky.slurm.net/pod"] = f"slurm-worker-{name}"
    plan = slurm_topology(fleet, [], P, node_label="slinky.slurm.net/pod")
    nodes = ",".join(b["nodes"] for b in plan.entries[0]["block"]["blocks"])
    assert "slurm-worker-tray-01" in nodes and "tray-00" not in nodes
    assert ("tray-00", "no slinky.slurm.net/pod label (its Slurm node name)") in plan.alone
    assert ("slurm-worker-tray-13", "alone in its NVLink domain") in plan.alone


def test_no_domain_of_two_nodes_is_an_error_never_an_empty_topology(tmp_path: Path) -> None:
    with pytest.raises(NoBlocks):
        slurm_topology(SHAPES["single"](), [], P)
    run = cluster("--from", str(saved(SHAPES["single"](), tmp_path / "single.json")), "--emit", "slurm")
    assert run.returncode == 4 and run.stdout == "" and run.stderr.count("\n") == 1
    assert "no NVLink domain holds two nodes or more" in run.stderr


@pytest.mark.slow
@pytest.mark.parametrize("shape", sorted(set(SHAPES) - {"single"}))
def test_every_emitted_topology_loads_into_a_real_slurmctld(shape: str, slurm: Slurm, tmp_path: Path) -> None:
    flags = [arg for label in LEVELS[shape] for arg in ("--level", label)]
    run = cluster("--from", str(saved(SHAPES[shape](), tmp_path / "fleet.json")), "--emit", "slurm", *flags)
    assert run.returncode == 0, run.stderr
    entries = yaml.safe_load(run.stdout)
    alone = [line.split(":")[0].strip("# ") for line in run.stdout.splitlines() if line.startswith("#     ")]
    loaded = load_topology(slurm, run.stdout, tmp_path / "slurm", extra=tuple(alone))
    assert loaded.ok, loaded.log[-2000:]
    shown = loaded.topology[entries[0]["topology"]]
    for block in entries[0]["block"]["blocks"]:
        assert f"BlockName={block['block']} " in shown, shown
    assert f"BlockSize={entries[0]['block']['block_sizes'][0]}" in shown
    if len(entries) > 1:
        for switch in entries[1]["tree"]["switches"]:
            assert f"SwitchName={switch['switch']} " in loaded.topology[entries[1]["topology"]]
    assert "fatal" not in loaded.log.lower() and "Invalid" not in loaded.log


def test_blocks_under_one_leaf_are_adjacent() -> None:
    """Slurm aggregates adjacent blocks: with the leaf named, the racks under one leaf come together whatever
    their domains' names say (the saved fleet: racks 0 and 1 under leaf-1, rack 2 under leaf-2)."""
    labels = {i["metadata"]["name"]: i["metadata"]["labels"] for i in yaml.safe_load(SAVED.read_text())["items"]
              if i["kind"] == "Node"}
    order = [b["nodes"].split(",")[0] for b in slurm_topology(labels, [SPINE, LEAF], P).entries[0]["block"]["blocks"]]
    assert order[2] == "tray-06" and set(order[:2]) == {"tray-00", "tray-03"}
    plain = [b["nodes"].split(",")[0] for b in slurm_topology(labels, [], P).entries[0]["block"]["blocks"]]
    assert plain.index("tray-06") == 1  # by domain name alone, rack 2 sits between racks 0 and 1


@pytest.mark.slow
def test_the_saved_fleet_loads_with_its_levels(slurm: Slurm, tmp_path: Path) -> None:
    run = cluster("--from", str(SAVED), "--emit", "slurm", "--level", SPINE, "--level", LEAF)
    assert run.returncode == 0, run.stderr
    loaded = load_topology(slurm, run.stdout, tmp_path, extra=("hgx-0", "hgx-1"))
    assert loaded.ok, loaded.log[-2000:]
    assert loaded.topology["topolink"].count("BlockName=") == 3  # one per rack; the HGX nodes in the tree only
    assert loaded.topology["topolink-tree"].count("SwitchName=") == 4  # a spine over three leaves
