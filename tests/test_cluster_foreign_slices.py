"""``topolink cluster --from`` counts our driver's slices only: a saved ``kubectl get nodes,resourceslices -o
json`` holds every driver's (the NVIDIA GPU driver's, the NIC driver's), and a server that ignores the field
selector sends them all too; they are neither counted nor folded into a node's figures."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from exporter.kube import read_saved
from tests.cluster_support import Fleet, fleet, kubectl_list

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    return fleet(tmp_path_factory.mktemp("fleet"))


def _with_foreign(small: Fleet) -> dict[str, object]:
    listing = kubectl_list(small)
    ours = [o for o in listing["items"] if o["kind"] == "ResourceSlice"]
    for driver in ("gpu.nvidia.com", "dra.net"):
        for obj in ours:
            other = copy.deepcopy(obj)
            other["metadata"]["name"] = f"{driver}-{obj['metadata']['name']}"
            other["spec"]["driver"] = driver
            listing["items"].append(other)
    return listing


def test_other_drivers_slices_are_not_ours(small: Fleet) -> None:
    plain = read_saved(json.dumps(kubectl_list(small)).encode())
    mixed = read_saved(json.dumps(_with_foreign(small)).encode())
    assert mixed.slices == plain.slices == 20 and mixed.summaries == plain.summaries


def test_the_command_counts_ours(small: Fleet, tmp_path: Path) -> None:
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps(_with_foreign(small)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOPOLINK_", "KUBECONFIG"))}
    run = subprocess.run([sys.executable, "-m", "agent.cli", "cluster", "--from", str(path), "--format", "json"],
                         capture_output=True, cwd=REPO, env=env, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["slices"] == 20 and doc["nodes"] == 20 and doc["nodes_without_slices"] == []
