"""Unknown is never idle: every NVML call the busy check makes, failing for one GPU, makes that GPU's busy
state unknown, and the agent's check, ``place`` and the probe plan all take it for busy and say so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.serve import nvml_busy
from probes import busy_of
from probes.core import is_unknown
from tests.fakenvml import FakeNode
from tests.fakenvml.fixtures import MakeMachine

REPO = Path(__file__).resolve().parents[1]
PAIRS = "a6000-8x-nvlink-pairs"
GPU2 = "0000:41:00.0"

# (the call that fails for GPU 2, whether NVML can still name that GPU by its bus id)
CALLS = [
    ("nvmlDeviceGetComputeRunningProcesses_v3", True),
    ("nvmlDeviceGetUtilizationRates", True),
    ("nvmlDeviceGetHandleByIndex_v2", False),
    ("nvmlDeviceGetPciInfo_v3", False),
]
ERRORS = ("UNKNOWN", "NO_PERMISSION", "GPU_IS_LOST", "NOT_SUPPORTED")


BUSES = {i: f"0000:{b:02x}:00.0" for i, b in enumerate(range(0x01, 0x101, 0x20))}  # the profile's GPUs


@pytest.mark.parametrize("error", ERRORS)
@pytest.mark.parametrize(("call", "named"), CALLS)
def test_each_failed_busy_read_makes_that_gpu_unknown(fake_machine: MakeMachine, call: str, named: bool,
                                                      error: str) -> None:
    node = fake_machine(PAIRS, {"inject": [{"call": call, "gpu": 2, "error": error}]})
    answer = nvml_busy(str(node.nvml_library))()  # what the agent asks before every probe item
    assert (GPU2 in answer) is named
    for index, bus in BUSES.items():
        reason = busy_of(answer, bus, index)
        if index == 2:
            assert is_unknown(reason) and call.split("_v", maxsplit=1)[0] in reason, reason
        else:
            assert reason == "", (index, reason)


def test_a_failed_count_makes_every_gpu_unknown(fake_machine: MakeMachine) -> None:
    node = fake_machine(PAIRS, {"inject": [{"call": "nvmlDeviceGetCount_v2", "error": "UNKNOWN", "nth": 1}]})
    answer = nvml_busy(str(node.nvml_library))()
    assert all(is_unknown(busy_of(answer, bus, index)) for index, bus in BUSES.items())


def test_a_gpu_nvml_cannot_name_is_unknown_to_a_reader_without_its_index() -> None:
    answer = {"0000:01:00.0": "", "nvml index 1": "busy state unknown: nvmlDeviceGetPciInfo failed (x)"}
    assert busy_of(answer, "0000:01:00.0") == ""
    assert is_unknown(busy_of(answer, "0000:02:00.0"))  # the probe plan knows CUDA ordinals, not NVML indices
    assert is_unknown(busy_of(answer, "0000:02:00.0", 1)) and is_unknown(busy_of(answer, "0000:02:00.0", 2))
    assert busy_of({}, "0000:02:00.0") == ""  # no NVML at all: nothing it manages can be running


def place(node: FakeNode, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_")} | node.env()
    return subprocess.run([sys.executable, "-m", "agent.cli", "place", *args], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=120, check=False)


@pytest.mark.parametrize("call", ["nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetUtilizationRates"])
def test_place_leaves_out_a_gpu_whose_busy_state_is_unknown(fake_machine: MakeMachine, call: str) -> None:
    node = fake_machine(PAIRS, {"inject": [{"call": call, "gpu": 2, "error": "UNKNOWN"}]})
    run = place(node, "--gpus", "2", "--format", "json")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert {x["index"]: x["reason"] for x in doc["left_out"]} == {2: "busy"}
    assert is_unknown(doc["busy"]["gpus"][GPU2]) and all(2 not in g["indices"] for g in doc["groups"])
    table = place(node, "--gpus", "2").stdout
    assert "left out: GPU2 busy (busy state unknown: " in table and "busy GPUs: none" not in table
