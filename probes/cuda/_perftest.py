"""GPUDirect RDMA with perftest: is a CUDA-enabled ``ib_write_bw`` here (its own ``--help`` says), then
server and client on this host through one NIC in loopback (``--use_cuda_bus_id``), the out-of-band
exchange on 127.0.0.1 only, and the result row of ``--report_gbits`` parsed."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass

from ..core import Item, Pairs, ProbeError, Waived


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


_RUN_TIMEOUT_S = 120


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def command(found: Perftest, nic: str, gpu_bus_id: str, *, size: int, iters: int, port: int, dmabuf: bool,
            server: bool) -> list[str]:
    cmd = [found.path, "-d", nic, f"--use_cuda_bus_id={gpu_bus_id}", "-s", str(size), "-n", str(iters),
           "--report_gbits", "-F", "-p", str(port)]
    if dmabuf:
        cmd.append("--use_cuda_dmabuf")
    return cmd if server else [*cmd, "127.0.0.1"]


class _WriteBwWorkload:
    channels = 1

    def __init__(self, session: PerftestSession, size: int) -> None:
        self.session, self.bytes_per_op = session, size

    def sample(self, warmup: int, iters: int) -> tuple[float, ...]:
        del warmup  # perftest runs its own
        s = self.session
        port = _free_port()
        def cmd(server: bool) -> list[str]:
            return command(s.found, s.nic, s.gpu, size=self.bytes_per_op, iters=iters, port=port, dmabuf=s.dmabuf,
                           server=server)

        server = subprocess.Popen(cmd(True), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            time.sleep(1.0)  # the server must listen before the client connects
            client = subprocess.run(cmd(False), capture_output=True, text=True,
                                    timeout=_RUN_TIMEOUT_S, check=False)
            server_out, _ = server.communicate(timeout=_RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            server.kill()
            raise ProbeError(f"ib_write_bw did not finish within {_RUN_TIMEOUT_S} s") from exc
        result = parse_write_bw(client.stdout)
        if client.returncode != 0 or result is None:
            tail = " | ".join((client.stdout + client.stderr + server_out).strip().splitlines()[-3:])
            raise ProbeError(f"ib_write_bw failed (status {client.returncode}): {tail}")
        return (self.bytes_per_op * iters / result.bytes_per_second,)

    def verify(self) -> str | None:
        return None  # perftest does not check data; the conditions say so

    def close(self) -> None:
        pass


class PerftestSession:
    def __init__(self, item: Item) -> None:
        found = find_perftest()
        if found is None or not found.cuda:
            raise Waived("a CUDA-enabled perftest is not installed")
        gpu, nic = item.targets
        self.found, self.gpu, self.nic = found, gpu.id, nic.name
        self.dmabuf = found.dmabuf and dict(item.options).get("registration") == "dmabuf"
        self.conditions: Pairs = (("perftest", found.version or found.path),
                                  ("registration", "dma-buf" if self.dmabuf else "peer memory"),
                                  ("data_check", "none (perftest does not verify data)"))

    def workload(self, size: int) -> _WriteBwWorkload:
        return _WriteBwWorkload(self, size)

    def close(self) -> None:
        pass
