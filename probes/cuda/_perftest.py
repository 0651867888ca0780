"""GPUDirect RDMA with perftest: ``ib_write_bw --use_cuda_bus_id`` server and client on this host,
through one NIC in loopback; the out-of-band exchange uses 127.0.0.1 only."""

from __future__ import annotations

import socket
import subprocess
import time

from ..core._backend import Pairs
from ..core._errors import ProbeError, Waived
from ..core._gdr import Perftest, find_perftest, parse_write_bw
from ..core._model import Item

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


class _WriteBw:
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

    def workload(self, size: int) -> _WriteBw:
        return _WriteBw(self, size)

    def close(self) -> None:
        pass
