"""Runs probe items in child processes with a wall-time and memory budget; kills and reports overruns.

Each child runs a list of items one after another and reports each as it ends. The parent gives the
child ``startup_budget_s`` to load its backend and each item its ``wall_budget_s``; past either, the
child's whole session is killed, the item in flight is failed with the reason, and a fresh child takes
the items that are left. A child that dies (signal, crash, out of memory) is handled the same way.
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ..core import Capabilities, Item, RawResult, Status, caps_from_dict, item_to_dict, raw_from_dict
from ._child import FD_ENV

Progress = Callable[[str, str], None]  # (event, item key): "begin" | "end"
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
_STDERR_TAIL = 600


@dataclass
class _Child:
    proc: subprocess.Popen[bytes]
    events: int  # read end of the event pipe
    log: IO[bytes]
    buffer: bytes = b""

    @classmethod
    def start(cls, task: dict[str, Any]) -> _Child:
        read_fd, write_fd = os.pipe()
        log = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the child; closed in close()
        env = dict(os.environ)
        env[FD_ENV] = str(write_fd)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "probes.harness._child"], stdin=subprocess.PIPE, stdout=log, stderr=log,
                pass_fds=(write_fd,), env=env, start_new_session=True,
            )
        finally:
            os.close(write_fd)
        assert proc.stdin is not None
        try:
            proc.stdin.write(json.dumps(task).encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass  # it died at once: the exit status tells why
        return cls(proc, read_fd, log)

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

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        os.close(self.events)
        self.log.close()


def _failed(item: Item, reason: str, elapsed: float = 0.0) -> RawResult:
    return RawResult(key=item.key, status=Status.FAILED, reason=reason, elapsed_s=elapsed)


def run_items(backend: str, items: Sequence[Item], *, startup_budget_s: float,
              progress: Progress | None = None) -> dict[str, RawResult]:
    """Every item's raw result, keyed by item key. Never raises for what happens in a child."""
    results: dict[str, RawResult] = {}
    pending = list(items)
    note = progress or (lambda event, key: None)
    while pending:
        child = _Child.start({"op": "run", "backend": backend, "items": [item_to_dict(i) for i in pending]})
        by_key = {i.key: i for i in pending}
        current: Item | None = None
        started = time.monotonic()
        deadline = started + startup_budget_s
        try:
            while True:
                event = child.next_event(deadline)
                if isinstance(event, dict) and event["event"] == "ready":
                    continue
                if isinstance(event, dict) and event["event"] == "begin":
                    current = by_key[event["key"]]
                    started = time.monotonic()
                    deadline = started + current.wall_budget_s
                    note("begin", current.key)
                    continue
                if isinstance(event, dict) and event["event"] == "end":
                    raw = raw_from_dict(event["result"])
                    results[raw.key] = raw
                    pending = [i for i in pending if i.key != raw.key]
                    note("end", raw.key)
                    current = None
                    continue
                if event == "timeout":
                    child.kill()
                    if current is None:
                        reason = f"the probe process did not start within {startup_budget_s:.0f} s: {child.tail()}"
                    else:
                        reason = (f"killed at its wall-time budget of {current.wall_budget_s:.0f} s "
                                  "(hung, or far slower than expected)")
                else:  # "eof": the child ended
                    reason = child.died()
                    if not pending:
                        break
                    if current is None:
                        reason = f"{reason} (before this item began)"
                break
        finally:
            child.close()
        if not pending:
            break
        if current is not None:
            results[current.key] = _failed(current, reason, time.monotonic() - started)
            pending = [i for i in pending if i.key != current.key]
            note("end", current.key)
        else:  # died or hung while starting: nothing left would start either
            for item in pending:
                results[item.key] = _failed(item, reason)
                note("end", item.key)
            pending = []
    return results


def ask_capabilities(backend: str, *, budget_s: float = 120.0) -> Capabilities:
    """What the backend finds on this machine, asked in a child so the parent never loads CUDA."""
    child = _Child.start({"op": "capabilities", "backend": backend})
    try:
        event = child.next_event(time.monotonic() + budget_s)
        if isinstance(event, dict) and event.get("event") == "caps":
            return caps_from_dict(event["caps"])
        if event == "timeout":
            child.kill()
            return Capabilities(backend=backend, error=f"the {backend} backend did not answer within {budget_s:.0f} s")
        return Capabilities(backend=backend, error=child.died())
    finally:
        child.close()
