"""GPUDirect RDMA: is a CUDA-enabled perftest here, would the GPU-NIC pair work, and what perftest said.

When it cannot run, the reason is the readiness verdict (peer memory module, dma-buf, PCIe distance,
ACS) from :func:`topology.gdr_readiness`, plus what is missing on the perftest side.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

from topology import GdrVerdict, Snapshot, gdr_readiness

from ._backend import Capabilities

TEST = "gdr_write_bw"


@dataclass(frozen=True, slots=True, kw_only=True)
class Perftest:
    path: str
    cuda: bool  # built with CUDA (--use_cuda)
    dmabuf: bool  # knows --use_cuda_dmabuf
    version: str = ""


def perftest_from_help(path: str, help_text: str, version_text: str = "") -> Perftest:
    version = re.search(r"[Vv]ersion:?\s*([0-9][\w.\-]*)", version_text)
    return Perftest(path=path, cuda="--use_cuda" in help_text, dmabuf="--use_cuda_dmabuf" in help_text,
                    version=version.group(1) if version else "")


def find_perftest() -> Perftest | None:
    """``ib_write_bw`` on PATH and what it was built with (its own ``--help``)."""
    path = shutil.which("ib_write_bw")
    if path is None:
        return None

    def ask(flag: str) -> str:
        try:
            done = subprocess.run([path, flag], capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return ""
        return done.stdout + done.stderr

    return perftest_from_help(path, ask("--help"), ask("--version"))


def perftest_unavailable(found: Perftest | None) -> str | None:
    if found is None:
        return "perftest's ib_write_bw is not installed"
    if not found.cuda:
        return f"{found.path} was built without CUDA (no --use_cuda)"
    return None


def gdr_blocker(snap: Snapshot, gpu: str, nic: str, caps: Capabilities) -> str | None:
    """Why GPUDirect RDMA cannot be measured between ``gpu`` and ``nic`` here, or None when it can."""
    ready = gdr_readiness(snap, gpu, nic)
    verdict = f"readiness {ready.verdict.value}: " + "; ".join(ready.reasons)
    missing = caps.why_unavailable(TEST)
    if ready.verdict is GdrVerdict.NOT_READY:
        return verdict
    if missing:
        return f"{missing}; {verdict}"
    return None


@dataclass(frozen=True, slots=True)
class WriteBw:
    msg_bytes: int
    iterations: int
    peak_gbps: float
    average_gbps: float

    @property
    def bytes_per_second(self) -> float:
        return self.average_gbps * 1e9 / 8


_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+[0-9.]+\s*$", re.MULTILINE)


def parse_write_bw(text: str) -> WriteBw | None:
    """The result row of ``ib_write_bw --report_gbits`` (``#bytes #iterations peak average MsgRate``)."""
    if "Gb/sec" not in text:
        return None  # MiB/s output: this parser is for --report_gbits only
    match = _ROW.search(text)
    if match is None:
        return None
    size, iters, peak, avg = match.groups()
    return WriteBw(int(size), int(iters), float(peak), float(avg))
