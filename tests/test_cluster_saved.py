"""``topolink cluster --from FILE``: the fleet view from a saved ``kubectl get nodes,resourceslices -o json``,
read and folded exactly as from an API server; the saved fleet in ``tests/data/fleet`` that the docs' examples
read is what the sinks compute today; a file that is not such a list is one line and exit 3."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from exporter.kube import InvalidObject, read_cluster, read_saved
from tests.cluster_support import SAVED, Fleet, PagedApi, fleet, kubectl_list

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    return fleet(tmp_path_factory.mktemp("fleet"))


def cluster(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOPOLINK_", "KUBECONFIG"))}
    return subprocess.run([sys.executable, "-m", "agent.cli", "cluster", *args], capture_output=True, input=stdin,
                          cwd=REPO, env=env, timeout=120, check=False)


def test_the_saved_fleet_is_what_the_sinks_compute_today(small: Fleet) -> None:
    saved = json.loads(SAVED.read_text())
    assert saved == kubectl_list(small), "regenerate it: python -m tests.cluster_support"


def test_a_saved_list_reads_as_the_api_server_does(small: Fleet) -> None:
    served = read_cluster(PagedApi(small))
    saved = read_saved(json.dumps(kubectl_list(small)).encode(), name="fleet.json")
    assert saved.summaries == served.summaries and saved.slices == served.slices == 20
    assert saved.without_slices == () and saved.source == "fleet.json" and saved.pages == 0


def test_nodes_alone_read_as_a_server_without_slices(small: Fleet) -> None:
    read = read_saved(json.dumps({"kind": "List", "items": small.nodes}).encode())
    assert len(read.summaries) == 20 and read.slices == 0 and len(read.without_slices) == 20
    assert all(s.nic_bytes_per_second is None for s in read.summaries)


def test_the_command_reads_the_saved_fleet() -> None:
    run = cluster("--from", str(SAVED.relative_to(REPO)), "--gpus", "16", "--format", "json")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["nodes"] == 20 and doc["slices"] == 20 and doc["from"] == "tests/data/fleet/gb200-rack-and-hgx.json"
    assert [o["node"] for c in doc["classes"] for o in c["outliers"]] == ["tray-17"]
    assert doc["fits"][0]["kind"] == "nvlink-domain"
    table = cluster("--from", "-", stdin=SAVED.read_bytes())
    assert table.returncode == 0 and b"read from standard input." in table.stdout
    assert cluster("--from", str(SAVED), "--gpus", "1000").returncode == 4


@pytest.mark.parametrize(("content", "why"), [
    (None, b"No such file"),
    (b"", b"not the JSON list"),
    (b"{\"kind\": \"Node\"}", b"not the JSON list"),
    (b"[1, 2]", b"not the JSON list"),
    (b"{\"items\": [{\"kind\": \"Pod\"}]}", b"no Node in the list"),
    (b"{\"items\": [{\"kind\": \"Node\"}, {\"kind\": \"ResourceSlice\", \"apiVersion\": \"resource.k8s.io/v9\"}]}",
     b"unknown version"),
])
def test_a_file_that_is_not_a_saved_list_is_one_line_and_exit_3(tmp_path: Path, content: bytes | None,
                                                                why: bytes) -> None:
    path = tmp_path / "fleet.json"
    if content is not None:
        path.write_bytes(content)
    run = cluster("--from", str(path))
    assert run.returncode == 3 and why in run.stderr, run.stderr
    assert run.stderr.startswith(b"topolink cluster: ") and run.stderr.count(b"\n") == 1 and run.stdout == b""


def test_a_directory_is_refused_and_kubeconfig_excludes_from(tmp_path: Path) -> None:
    run = cluster("--from", str(tmp_path))
    assert run.returncode == 3 and b"not a regular file" in run.stderr and run.stderr.count(b"\n") == 1
    both = cluster("--from", str(SAVED), "--kubeconfig", str(tmp_path / "k"))
    assert both.returncode == 2 and both.stderr.count(b"\n") == 1


def test_not_json_raises_the_kube_error() -> None:
    with pytest.raises(InvalidObject):
        read_saved(b"{")
