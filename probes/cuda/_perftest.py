"""GPUDirect RDMA with perftest: is a CUDA-enabled ``ib_write_bw`` here and what it can do (its own
``--help`` says), then a server whose buffer is the GPU's memory and a client that writes into it from
host memory, the out-of-band exchange on 127.0.0.1 only, and the result row of ``--report_gbits`` parsed.

What is measured is what the label says: the NIC writing into the GPU's memory. The writer's buffer is in
host memory, so the GPU's PCIe link carries only the writes (with both ends on the GPU, as perftest's
``--use_cuda`` on both sides would have it, the NIC would read and write the same GPU over one link).
The writer uses a second RDMA NIC when the plan found one (the data then crosses the wire); otherwise, or
when that path does not connect on the first sample, both ends are on the same NIC, and the conditions say
"loopback" (such a result never crossed the wire and is not compared with the port's rate). A pass
reports one path: a fabric path that fails after a sample was taken on it fails the test with the reason,
rather than take the median of two paths.

perftest (linux-rdma/perftest): the server is started first and the client connects to its TCP port; the
client is started only once that port listens (read from /proc/net/tcp), never after a fixed sleep. It
does not warm up unless asked (``--perform_warm_up``, "valid in Atomic, Read and Write BW tests"). Where
its ``--help`` lists ``--data_validation`` (with ``--use_cuda`` it needs perftest's
kernel plugin), both ends get it and every sample's ``VALIDATION:`` verdict is read: anything but
``PASSED`` fails the test with what perftest said.
"""

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
    bus_id: bool = False  # knows --use_cuda_bus_id
    dmabuf: bool = False  # knows --use_cuda_dmabuf
    warm_up: bool = False  # knows --perform_warm_up
    validation: bool = False  # knows --data_validation (both ends; the written side checks what arrived)
    version: str = ""


def perftest_from_help(path: str, help_text: str, version_text: str = "") -> Perftest:
    version = re.search(r"[Vv]ersion:?\s*([0-9][\w.\-]*)", version_text)
    return Perftest(path=path, cuda="--use_cuda=" in help_text or "--use_cuda " in help_text,
                    bus_id="--use_cuda_bus_id" in help_text, dmabuf="--use_cuda_dmabuf" in help_text,
                    warm_up="--perform_warm_up" in help_text, validation="--data_validation" in help_text,
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


@dataclass(frozen=True, slots=True, kw_only=True)
class Ends:
    """Who writes into what: the GPU whose memory is written, through ``nic``, by a writer on ``writer_nic``."""

    nic: str
    gpu_bus_id: str
    gpu_ordinal: int | None
    writer_nic: str
    dmabuf: bool


def command(found: Perftest, ends: Ends, *, size: int, iters: int, port: int, server: bool) -> list[str]:
    """The server owns the written buffer, in the GPU's memory; the client writes from host memory."""
    nic = ends.nic if server else ends.writer_nic
    cmd = [found.path, "-d", nic, "-s", str(size), "-n", str(iters), "--report_gbits", "-F", "-p", str(port)]
    if found.warm_up:
        cmd.append("--perform_warm_up")
    if found.validation:  # both ends: perftest compares the parameters of the two
        cmd.append("--data_validation")
    if not server:
        return [*cmd, "127.0.0.1"]
    if found.bus_id:
        cmd.append(f"--use_cuda_bus_id={ends.gpu_bus_id}")
    else:
        cmd.append(f"--use_cuda={ends.gpu_ordinal}")
    if ends.dmabuf:
        cmd.append("--use_cuda_dmabuf")
    return cmd


def listening(port: int, tables: tuple[str, ...] = ("/proc/net/tcp", "/proc/net/tcp6")) -> bool:
    """Whether a socket listens on ``port`` (state 0A in the kernel's tables); nothing connects to it."""
    hex_port = f":{port:04X}"
    for table in tables:
        try:
            with open(table) as f:
                next(f, None)
                for line in f:
                    fields = line.split()
                    if len(fields) > 3 and fields[1].endswith(hex_port) and fields[3] == "0A":
                        return True
        except OSError:
            continue
    return False


_RUN_TIMEOUT_S = 120
_LISTEN_TIMEOUT_S = 60  # the server opens the device and, with CUDA, creates a context first


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def validation_problem(text: str) -> str | None:
    """What ``--data_validation`` said was wrong in perftest's output (``VALIDATION: FAILED``, ``ERROR``,
    ``WARNING - no data validated``), or that it said nothing; None when it said ``VALIDATION: PASSED``."""
    said = [line.strip() for line in text.splitlines() if "VALIDATION:" in line]
    bad = next((line for line in said if "VALIDATION: PASSED" not in line), None)
    if bad:
        return bad
    return None if said else "perftest --data_validation printed no verdict"


def run_write_bw(found: Perftest, ends: Ends, *, size: int, iters: int) -> tuple[WriteBw | None, str, str]:
    """One server and one client; (the client's result, else None, the last lines both printed, and all
    that both printed)."""
    port = _free_port()
    server = subprocess.Popen(command(found, ends, size=size, iters=iters, port=port, server=True),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + _LISTEN_TIMEOUT_S
        while not listening(port):
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                out, _ = server.communicate()
                why = "exited" if server.returncode is not None else "never listened"
                return None, f"the server {why} before the client could connect: {_tail(out)}", out
            time.sleep(0.01)
        client = subprocess.run(command(found, ends, size=size, iters=iters, port=port, server=False),
                                capture_output=True, text=True, timeout=_RUN_TIMEOUT_S, check=False)
        server_out, _ = server.communicate(timeout=_RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise ProbeError(f"ib_write_bw did not finish within {_RUN_TIMEOUT_S} s") from exc
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    result = parse_write_bw(client.stdout) if client.returncode == 0 else None
    everything = client.stdout + client.stderr + server_out
    return result, f"status {client.returncode}: {_tail(everything)}", everything


def _tail(text: str) -> str:
    return " | ".join(text.strip().splitlines()[-3:])


class _WriteBwWorkload:
    channels = 1
    check_each_sample = False

    def __init__(self, session: PerftestSession, size: int) -> None:
        self.session, self.bytes_per_op = session, size
        self.problems: list[str] = []  # --data_validation's verdict per sample, where it was not a pass

    def prepare(self) -> None:
        pass

    def sample(self, warmup: int, iters: int) -> tuple[float, ...]:
        del warmup  # perftest's own, with --perform_warm_up where it has it
        s = self.session
        result, why, said = run_write_bw(s.found, s.ends, size=self.bytes_per_op, iters=iters)
        if result is None and s.ends.writer_nic != s.ends.nic and s.samples:
            raise ProbeError(f"the path {s.ends.writer_nic} -> {s.ends.nic} failed after {s.samples} sample(s) on "
                             f"it ({why}); one result would mix the fabric and loopback, so none is reported")
        if result is None and s.ends.writer_nic != s.ends.nic:
            failed = s.ends.writer_nic
            s.loopback(f"the path from {failed} did not work ({why}): measured in loopback through {s.ends.nic}")
            result, why, said = run_write_bw(s.found, s.ends, size=self.bytes_per_op, iters=iters)
        if result is None:
            raise ProbeError(f"ib_write_bw failed ({why})")
        s.samples += 1
        problem = validation_problem(said) if s.found.validation else None
        if problem:
            self.problems.append(f"sample {s.samples}: {problem}")
        return (self.bytes_per_op * iters / result.bytes_per_second,)

    def verify(self) -> str | None:
        """perftest's own check (``--data_validation``) where it has one; else none, as the conditions say."""
        return "; ".join(self.problems) or None

    def close(self) -> None:
        pass


class PerftestSession:
    def __init__(self, item: Item) -> None:
        found = find_perftest()
        missing = perftest_unavailable(found)
        if missing or found is None:
            raise Waived(missing or "perftest's ib_write_bw is not installed")
        gpu, nic = item.targets
        options = dict(item.options)
        dmabuf = options.get("registration") == "dmabuf"
        if dmabuf and not found.dmabuf:
            raise Waived(f"{found.path} has no --use_cuda_dmabuf, and dma-buf is how this node registers GPU "
                         "memory (no peer-memory module)")
        self.found, self.samples = found, 0  # samples taken on the current path
        self.ends = Ends(nic=nic.name, gpu_bus_id=gpu.id, gpu_ordinal=gpu.index,
                         writer_nic=options.get("writer_nic", nic.name), dmabuf=dmabuf)
        self._conditions: dict[str, str] = {
            "perftest": found.version or found.path,
            "registration": "dma-buf" if dmabuf else "peer memory",
            "gpu_selected_by": "--use_cuda_bus_id" if found.bus_id else
                               "--use_cuda=<CUDA ordinal> (this perftest has no --use_cuda_bus_id)",
            "writer": "the client, from host memory (perftest's own allocation, no --use_cuda)",
            "warm_up": "--perform_warm_up" if found.warm_up else "none (this perftest has no --perform_warm_up)",
            "data_check": "perftest --data_validation on both ends, every sample: the server, whose buffer is the "
                          "GPU's memory, checks what the NIC wrote" if found.validation else
                          "none (this perftest has no --data_validation)",
        }
        self._path()

    def _path(self, note: str = "") -> None:
        e = self.ends
        if e.writer_nic == e.nic:
            path = (f"loopback: {e.nic} reads the host buffer and writes the GPU's memory, both ends on one NIC; "
                    "never on the wire, so not compared with the port's rate")
        else:
            path = f"{e.writer_nic} -> {e.nic} over the fabric"
        self._conditions["path"] = f"{path}; {note}" if note else path

    def loopback(self, note: str) -> None:
        self.ends = Ends(nic=self.ends.nic, gpu_bus_id=self.ends.gpu_bus_id, gpu_ordinal=self.ends.gpu_ordinal,
                         writer_nic=self.ends.nic, dmabuf=self.ends.dmabuf)
        self._path(note)

    @property
    def conditions(self) -> Pairs:
        return tuple(self._conditions.items())

    def workload(self, size: int) -> _WriteBwWorkload:
        return _WriteBwWorkload(self, size)

    def close(self) -> None:
        pass
