"""``topolink place`` as a user runs it: a real process against machine profiles (the test NVML answering
busy GPUs, lost GPUs, failing calls) and saved snapshots, with its documented exit statuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import topology as t
from exporter import QueryError, parse_size, query_from_params
from tests.fakenvml import FakeNode, materialize

REPO = Path(__file__).resolve().parents[1]
PAIRS = "a6000-8x-nvlink-pairs"  # NVLink pairs (0,1) (2,3) on socket 0, (4,5) (6,7) on socket 1


def place(*args: str, node: FakeNode | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_")}
    env.update(node.env() if node else {})
    return subprocess.run([sys.executable, "-m", "agent.cli", "place", *args], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=120, check=False)


def doc_of(run: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert run.returncode in (0, 1, 4), run.stderr
    out: dict[str, Any] = json.loads(run.stdout)
    return out


@pytest.fixture(scope="module")
def busy_pairs(tmp_path_factory: pytest.TempPathFactory) -> FakeNode:
    """GPU1 runs two compute processes, GPU6 is 50% utilised: the pairs (0,1) and (6,7) are broken."""
    busy = {1: {"processes": 2}, 6: {"gpu_percent": 50, "memory_percent": 11}}
    return materialize(PAIRS, tmp_path_factory.mktemp("busy"), {"busy": busy})


def test_busy_gpus_are_left_out_and_the_output_says_so(busy_pairs: FakeNode) -> None:
    run = place("--gpus", "2", node=busy_pairs)
    assert run.returncode == 0, run.stderr
    assert "estimates of the cost model, not measurements" in run.stdout
    assert "left out: GPU1 busy (2 compute processes running); GPU6 busy (GPU utilisation 50%, memory " \
           "utilisation 11%)" in run.stdout
    rows = [line.split() for line in run.stdout.splitlines() if line[:1].isdigit()]
    assert [r[1:3] for r in rows] == [["2", "3"], ["4", "5"], ["0", "2"]]  # the bridged pairs left whole first
    doc = doc_of(place("--gpus", "2", "--format", "json", node=busy_pairs))
    assert doc["busy"]["known"] and set(doc["busy"]["gpus"]) == {"0000:21:00.0", "0000:c1:00.0"}
    assert {x["index"]: x["reason"] for x in doc["left_out"]} == {1: "busy", 6: "busy"}
    assert all(1 not in g["indices"] and 6 not in g["indices"] for g in doc["groups"])


def test_include_busy_puts_them_back(busy_pairs: FakeNode) -> None:
    doc = doc_of(place("--gpus", "2", "--include-busy", "--format", "json", node=busy_pairs))
    assert doc["left_out"] == [] and doc["groups"][0]["indices"] == [0, 1]
    assert doc["busy"]["known"] and not doc["busy"]["left_out"] and len(doc["busy"]["gpus"]) == 2


def test_json_names_every_input_source_and_is_an_estimate(busy_pairs: FakeNode) -> None:
    doc = doc_of(place("--gpus", "4", "--top", "2", "--size", "256MiB", "--format", "json", node=busy_pairs))
    assert doc["schema"] == "topolink.placement/v1" and doc["source"] == "estimate"
    assert doc["size_bytes"] == 256 << 20 and len(doc["groups"]) == 2
    for group in doc["groups"]:
        estimate = group["estimate"]
        assert estimate["source"] == "estimate" and estimate["bottleneck"]["kind"] in ("pcie", "numa", "nvlink")
        assert set(estimate["sources"]) <= {"theoretical", "estimate", "measured"}
        assert {i["source"] for i in estimate["inputs"]} == set(estimate["sources"])


def test_a_saved_snapshot_cannot_say_which_gpus_are_busy(busy_pairs: FakeNode, tmp_path: Path) -> None:
    saved = tmp_path / "node.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_")} | busy_pairs.env()
    out = subprocess.run([sys.executable, "-m", "agent.cli", "discover", "--format", "json", "-o", str(saved)],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    run = place("--gpus", "2", "--from", str(saved))
    assert run.returncode == 0, run.stderr
    assert "busy GPUs: unknown: read from a saved snapshot" in run.stdout and "left out: none" in run.stdout
    doc = doc_of(place("--gpus", "2", "--from", str(saved), "--format", "json"))
    assert not doc["busy"]["known"] and doc["groups"][0]["indices"] == [0, 1]


def test_a_lost_gpu_is_left_out_and_the_snapshot_is_incomplete(tmp_path: Path) -> None:
    node = materialize(PAIRS, tmp_path, {"inject": [{"lose": 2, "at": "nvmlDeviceGetNvLinkState", "nth": 1}]})
    run = place("--gpus", "2", "--format", "json", node=node)
    assert run.returncode == 1  # answered, but facts of GPU2 are unknown: standard error lists them
    assert "incomplete snapshot" in run.stderr
    doc = json.loads(run.stdout)
    assert {x["index"]: x["reason"] for x in doc["left_out"]} == {2: "lost"}
    assert all(2 not in g["indices"] for g in doc["groups"]) and not doc["snapshot"]["complete"]


def test_exit_statuses_and_one_line_errors(busy_pairs: FakeNode, tmp_path: Path) -> None:
    none_fits = place("--gpus", "7", node=busy_pairs)  # 8 GPUs, 2 busy
    assert none_fits.returncode == 4 and "No group of 7 GPUs" in none_fits.stdout
    assert none_fits.stderr.strip().count("\n") == 0 and "6 GPUs available, 7 asked for" in none_fits.stderr
    for args, words in ((("--gpus", "2", "--size", "lots"), "--size: 'lots'"), (("--gpus", "0"), "from 1 to"),
                        (("--gpus", "2", "--top", "99"), "--top: '99': out of range"),
                            (("--gpus", "2", "--exclude", "9"), "no GPU 9")):
        run = place(*args, node=busy_pairs)
        assert run.returncode == 2 and run.stdout == "", args
        assert run.stderr.startswith("topolink place: ") and words in run.stderr and run.stderr.count("\n") == 1
    missing = place("--gpus", "2", "--from", str(tmp_path / "nope.json"))
    assert missing.returncode == 3 and missing.stderr.count("\n") == 1
    assert place("--gpus", "two").returncode == 2


def test_exclude_takes_indices_and_bus_ids(busy_pairs: FakeNode) -> None:
    doc = doc_of(place("--gpus", "2", "--include-busy", "--exclude", "0,0000:41:00.0", "--format", "json",
                       node=busy_pairs))
    assert {x["index"]: x["reason"] for x in doc["left_out"]} == {0: "excluded", 2: "excluded"}


def test_sizes_and_http_parameters() -> None:
    assert parse_size("1GiB") == parse_size("1G") == 1 << 30 and parse_size("1GB") == 10**9
    assert parse_size("4096") == 4096 and parse_size("1.5M") == 3 << 19
    for bad in ("", "1 XB", "-1", "0", "2PiB"):
        with pytest.raises(QueryError):
            parse_size(bad)
    q = query_from_params({"gpus": "4", "size": "64M", "exclude": "1, 0000:18:00.0", "top": "2"})
    assert (q.gpus, q.size_bytes, q.exclude, q.top) == (4, 64 << 20, (1, "0000:18:00.0"), 2)
    assert q.collective is t.Collective.ALL_REDUCE and not q.include_busy
    for params, words in (({}, "gpus is required"), ({"gpus": "x"}, "whole number"), ({"gpus": "4", "n": "1"},
                          "unknown parameter 'n'"), ({"gpus": "4", "collective": "bcast"}, "collective 'bcast'"),
                          ({"gpus": "99999"}, "at most 4096"), ({"gpus": "2", "include_busy": "yes"}, "include_busy")):
        with pytest.raises(QueryError, match=words):
            query_from_params(params)
