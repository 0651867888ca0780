"""The probe process: ``python -m probes.harness._child`` serves one probe pass. It reads JSON lines on
stdin: first ``{"backend": NAME}``, then one ``{"item": ...}`` per item to run, until end of input. It writes
one JSON event per line to the descriptor named by ``TOPOLINK_PROBE_FD``: ``caps`` once the backend is
loaded (what it can do here, asked in this same process, so CuPy is imported and CUDA started once per
pass), then ``begin`` and ``end`` around each item.

It runs in its own session, so the parent can kill it and everything it started (gloo ranks, perftest)
at once. Its host memory is capped with RLIMIT_DATA, item by item: an item's budget, plus what the items
before it left behind (torch imported for gloo, say), which is not the item's to pay for. A process it
forks (a gloo rank) gets the event descriptor pointed at /dev/null: a rank left behind never holds the
parent's pipe open.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from typing import Any

FD_ENV = "TOPOLINK_PROBE_FD"


def data_bytes() -> int:
    """This process's data and stack segments (psutil's ``memory_info().data``, from ``/proc/self/statm``):
    what RLIMIT_DATA limits, and the stack, which does not grow between items; 0 when it cannot be read."""
    import psutil

    try:
        return int(psutil.Process().memory_info().data)
    except psutil.Error:
        return 0


def main() -> int:
    fd = int(os.environ[FD_ENV])
    out = os.fdopen(fd, "w", buffering=1)

    def emit(event: dict[str, Any]) -> None:
        out.write(json.dumps(event, allow_nan=False) + "\n")
        out.flush()

    def release_pipe() -> None:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)

    os.register_at_fork(after_in_child=release_pipe)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Imported here: what the backend loads counts against the first item's budget only through its pages.
    from ..core import caps_to_dict, item_from_dict, load_backend, raw_to_dict
    from ._runner import execute

    first = sys.stdin.readline()
    if not first:
        return 0
    backend = load_backend(json.loads(first)["backend"])
    emit({"event": "caps", "caps": caps_to_dict(backend.capabilities())})
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    ready = data_bytes()
    for line in sys.stdin:
        item = item_from_dict(json.loads(line)["item"])
        budget = item.memory_budget_bytes + max(0, data_bytes() - ready)
        if hard != resource.RLIM_INFINITY:
            budget = min(budget, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (budget, hard))
        emit({"event": "begin", "key": item.key})
        emit({"event": "end", "result": raw_to_dict(execute(backend, item))})
    close = getattr(backend, "close", None)
    if close is not None:
        close()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Everything is reported and the backend closed: skip the interpreter's teardown, which takes most of
    # a second once torch is loaded, on the pass's critical path.
    os._exit(code)
