"""The cuda backend without a GPU: it imports cleanly, says why it cannot run, and every GPU-free
piece (perftest detection and parsing, idle verdicts) works here."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import probes
from probes import Status
from probes.core._idle import busy_reason
from probes.cuda._perftest import parse_write_bw, perftest_from_help, perftest_unavailable


def test_cuda_modules_import_without_cupy_or_a_gpu() -> None:
    code = ("import sys, probes.cuda._backend, probes.cuda._copy, probes.cuda._latency, probes.cuda._nccl,"
            " probes.cuda._perftest, probes.cuda._runtime, probes.cuda._kernels, probes.cuda._legs,"
            " probes.cuda._buffers, probes.cuda._peers, probes.cpu._gloo, probes.cpu._rank, probes.cpu._copy;"
            " print(sorted(m for m in ('cupy', 'torch', 'numpy', 'pynvml') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"  # nothing heavy is loaded by importing the backend


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed here")
def test_capabilities_say_why_cuda_cannot_run() -> None:
    from probes.cuda import CudaBackend

    caps = CudaBackend().capabilities()
    assert caps.error.startswith("CuPy is not installed (pip install 'topolink[cuda]')")
    assert "all_reduce" in caps.tests and not caps.devices


@pytest.mark.slow
def test_selftest_without_a_gpu_skips_every_test_with_the_reason() -> None:
    lines, report = probes.selftest(None, gpu=True)
    assert [line.test for line in lines] == [s.name for s in probes.CUDA_SPECS]
    assert {line.verdict for line in lines} == {"SKIP"}
    assert all(("CuPy" in line.detail or "CUDA" in line.detail) for line in lines)
    assert not report.ran and {o.status for o in report.outcomes} == {Status.WAIVED}


def test_idle_verdicts() -> None:
    assert busy_reason(0, 3, 0) == ""
    assert busy_reason(0, None, None) == ""
    assert busy_reason(2, 50, 11) == "2 compute processes running, GPU utilisation 50%, memory utilisation 11%"
    assert busy_reason(1, 10, 10) == "1 compute process running"  # 10% is still idle, as DCGM's wait


def test_perftest_detection_from_its_help() -> None:
    help_text = "  --use_cuda=<cuda device id> Use CUDA specific device\n  --use_cuda_dmabuf Use CUDA DMA-BUF\n"
    found = perftest_from_help("/usr/bin/ib_write_bw", help_text, "Version: 6.22")
    assert (found.cuda, found.dmabuf, found.version) == (True, True, "6.22")
    plain = perftest_from_help("/usr/bin/ib_write_bw", "  -d, --ib-dev=<dev>\n")
    assert perftest_unavailable(plain) == "/usr/bin/ib_write_bw was built without CUDA (no --use_cuda)"
    assert perftest_unavailable(None) == "perftest's ib_write_bw is not installed"
    assert perftest_unavailable(found) is None


def test_ib_write_bw_output_parsed_in_gbits() -> None:
    out = """
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 65536      5000             392.10             391.80               0.747288
---------------------------------------------------------------------------------------
"""
    r = parse_write_bw(out)
    assert r is not None and (r.msg_bytes, r.iterations, r.peak_gbps, r.average_gbps) == (65536, 5000, 392.10, 391.80)
    assert r.bytes_per_second == pytest.approx(391.80e9 / 8)
    assert parse_write_bw(out.replace("Gb/sec", "MiB/sec")) is None  # not --report_gbits: refuse to guess
    assert parse_write_bw("Couldn't connect to 127.0.0.1:18515") is None
