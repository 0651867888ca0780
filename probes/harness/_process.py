"""One child process per probe pass, with a wall-time and memory budget per item; overruns are killed
and reported.

The child loads its backend once and says what it can do (CuPy imported and CUDA started once, in the
process that then runs the items), then runs the items it is sent one at a time, so a caller can decide
between items (the agent asks NVML whether the GPUs are still idle). The parent gives the child
``startup_budget_s`` to load its backend and each item its ``wall_budget_s``; past either, the child's
whole session is killed and the item in flight is failed with the reason. The next item starts a fresh
child; a child that cannot start at all fails every item with the reason it gave.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from ..core import Capabilities, Item, RawResult, Status, caps_from_dict, item_to_dict, ours, raw_from_dict
from ._child import FD_ENV

Progress = Callable[[str, str], None]  # (event, item key): "begin" | "end"
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
_STDERR_TAIL = 600


@dataclass
class _Child:
    proc: subprocess.Popen[bytes]
    events: int  # read end of the event pipe
    log: IO[bytes]
    scratch: tempfile.TemporaryDirectory[str]  # the child's TMPDIR: removed here, as a killed child cannot
    buffer: bytes = b""

    @classmethod
    def start(cls, backend: str) -> _Child:
        read_fd, write_fd = os.pipe()
        log = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the child; closed in close()
        # Every temporary file of the child and of what it starts (gloo's rendezvous store, a rank's) goes in
        # here: a child killed at its budget leaves none of them behind, as close() removes the folder.
        scratch = tempfile.TemporaryDirectory(prefix="topolink-probe-")
        env = dict(os.environ)
        env["TMPDIR"] = scratch.name
        env[FD_ENV] = str(write_fd)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "probes.harness._child"], stdin=subprocess.PIPE, stdout=log, stderr=log,
                pass_fds=(write_fd,), env=env, start_new_session=True,
            )
        except BaseException:
            os.close(read_fd)
            log.close()
            scratch.cleanup()
            raise
        finally:
            os.close(write_fd)
        ours(proc.pid)
        child = cls(proc, read_fd, log, scratch)
        child.send({"backend": backend})
        return child

    def send(self, message: dict[str, Any]) -> bool:
        """Write one line to the child; False when it is gone (its exit status tells why)."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            return False
        return True

    def next_event(self, deadline: float) -> dict[str, Any] | str:
        """The next event, or ``"timeout"`` / ``"eof"``."""
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            poller = select.poll()  # not select(): in a server holding a thousand sockets this fd may be >= 1024
            poller.register(self.events, select.POLLIN)
            if not poller.poll(left * 1000):
                return "timeout"
            chunk = os.read(self.events, 65536)
            if not chunk:
                return "eof"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        event: dict[str, Any] = json.loads(line)
        return event

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def died(self) -> str:
        """Why the child ended, with the tail of what it printed."""
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.returncode
        if code < 0:
            name = signal.Signals(-code).name
            why = f"the probe process was killed by {name}"
            if -code == signal.SIGKILL:
                why += " (out of memory?)"
        else:
            why = f"the probe process exited with status {code}"
        tail = self.tail()
        return f"{why}: {tail}" if tail else why

    def tail(self) -> str:
        self.log.seek(0, os.SEEK_END)
        size = self.log.tell()
        self.log.seek(max(0, size - 4096))
        lines = [ln for ln in self.log.read().decode(errors="replace").splitlines() if ln.strip()]
        return " | ".join(lines[-3:])[-_STDERR_TAIL:]

    def close(self, *, wait_s: float = 10.0) -> None:
        """End of input: the child finishes and exits; killed when it does not within ``wait_s``."""
        if self.proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError, OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            self.kill()
        if self.proc.poll() is None:
            self.kill()
        with contextlib.suppress(ProcessLookupError):  # what it left behind (a rank, perftest) goes with it
            os.killpg(self.proc.pid, signal.SIGKILL)
        ours(self.proc.pid, alive=False)
        os.close(self.events)
        self.log.close()
        self.scratch.cleanup()


def _failed(item: Item, reason: str, elapsed: float = 0.0) -> RawResult:
    return RawResult(key=item.key, status=Status.FAILED, reason=reason, elapsed_s=elapsed)


class ProbeProcess:
    """The child of one probe pass: started on first use, asked once what the backend can do, then sent
    items one at a time. Use as a context manager, or call :meth:`close`."""

    def __init__(self, backend: str, *, startup_budget_s: float = 120.0) -> None:
        self.backend, self.startup_budget_s = backend, startup_budget_s
        self._child: _Child | None = None
        self._caps: Capabilities | None = None
        self._broken = ""  # why no child could start: every later item fails with it
        self.children_started = 0

    def __enter__(self) -> ProbeProcess:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close(wait_s=0 if kind is not None else 10.0)  # interrupted: do not wait for the item in flight

    @property
    def pid(self) -> int | None:
        return self._child.proc.pid if self._child is not None else None

    def _holds(self, gpus: Collection[str]) -> None:
        """The child may now hold a CUDA context on ``gpus``: the idle check must not take it for a job."""
        if self._child is not None:
            ours(self._child.proc.pid, gpus=gpus)

    def _start(self) -> str:
        """Start a child and wait for its capabilities; '' when it is ready, else why it is not."""
        child = _Child.start(self.backend)
        self.children_started += 1
        event = child.next_event(time.monotonic() + self.startup_budget_s)
        if isinstance(event, dict) and event.get("event") == "caps":
            self._child = child
            caps = caps_from_dict(event["caps"])
            if self._caps is None:
                self._caps = caps
            self._holds([d.id for d in caps.devices if d.ordinal == 0])  # compiling the kernels used device 0
            return ""
        if event == "timeout":
            child.kill()
            why = f"the probe process did not start within {self.startup_budget_s:.0f} s: {child.tail()}"
        else:
            why = child.died()
        child.close(wait_s=0)
        self._broken = why
        return why

    def capabilities(self) -> Capabilities:
        if self._caps is None and not self._broken:
            self._start()
        if self._caps is not None:
            return self._caps
        if "did not start within" in self._broken:
            return Capabilities(backend=self.backend,
                                error=f"the {self.backend} backend did not answer within {self.startup_budget_s:.0f} s")
        return Capabilities(backend=self.backend, error=self._broken)

    def run(self, item: Item, progress: Progress | None = None) -> RawResult:
        """Run one item in the child; never raises for what happens there. A child found dead before the
        item began (it died after the previous one) is replaced once."""
        note = progress or (lambda event, key: None)
        for attempt in (1, 2):
            if self._broken:
                return _failed(item, self._broken)
            if self._child is None:
                why = self._start()
                if why:
                    return _failed(item, f"{why} (before this item began)")
            child = self._child
            assert child is not None
            started = time.monotonic()
            began = False
            self._holds([t.id for t in (*item.targets, *item.background) if t.kind == "gpu"])
            sent = child.send({"item": item_to_dict(item)})
            deadline = started + item.wall_budget_s
            reason = ""
            while sent:
                event = child.next_event(deadline)
                if isinstance(event, dict) and event.get("event") == "begin":
                    began = True
                    note("begin", item.key)
                    continue
                if isinstance(event, dict) and event.get("event") == "end":
                    note("end", item.key)
                    return raw_from_dict(event["result"])
                if event == "timeout":
                    child.kill()
                    reason = (f"killed at its wall-time budget of {item.wall_budget_s:.0f} s "
                              "(hung, or far slower than expected)")
                break
            reason = reason or child.died()  # the child ended (mid-item, or before it)
            self._child = None
            child.close(wait_s=0)
            if began or attempt == 2 or "wall-time budget" in reason:
                break
        note("end", item.key)
        return _failed(item, reason, time.monotonic() - started)

    def close(self, *, wait_s: float = 10.0) -> None:
        if self._child is not None:
            self._child.close(wait_s=wait_s)
            self._child = None


def run_items(backend: str, items: Sequence[Item], *, startup_budget_s: float,
              progress: Progress | None = None) -> dict[str, RawResult]:
    """Every item's raw result, keyed by item key, from one child (a fresh one after a kill)."""
    with ProbeProcess(backend, startup_budget_s=startup_budget_s) as process:
        return {item.key: process.run(item, progress) for item in items}


def ask_capabilities(backend: str, *, budget_s: float = 120.0) -> Capabilities:
    """What the backend finds on this machine, asked in a child so the parent never loads CUDA."""
    with ProbeProcess(backend, startup_budget_s=budget_s) as process:
        return process.capabilities()
