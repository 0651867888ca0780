"""The probe process: ``python -m probes.harness._child`` reads one task (JSON) on stdin and writes one
JSON event per line to the descriptor named by ``TOPOLINK_PROBE_FD``. It runs in its own session, so the
parent can kill it and everything it started (gloo ranks, perftest) at once; its host memory is capped
with RLIMIT_DATA, item by item."""

from __future__ import annotations

import json
import os
import resource
import sys
from typing import Any

FD_ENV = "TOPOLINK_PROBE_FD"


def _limit_memory(soft: int, hard: int) -> None:
    resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


def main() -> int:
    task: dict[str, Any] = json.loads(sys.stdin.read())
    out = os.fdopen(int(os.environ[FD_ENV]), "w", buffering=1)

    def emit(event: dict[str, Any]) -> None:
        out.write(json.dumps(event, allow_nan=False) + "\n")
        out.flush()

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Imported here, after the limits: what the backend loads counts against the budget.
    from ..core import caps_to_dict, item_from_dict, load_backend, raw_to_dict
    from ._runner import execute

    backend = load_backend(task["backend"])
    if task["op"] == "capabilities":
        emit({"event": "caps", "caps": caps_to_dict(backend.capabilities())})
        return 0
    items = [item_from_dict(d) for d in task["items"]]
    hard = max((i.memory_budget_bytes for i in items), default=resource.RLIM_INFINITY)
    _limit_memory(hard, hard)
    emit({"event": "ready"})
    for item in items:
        _limit_memory(item.memory_budget_bytes, hard)
        emit({"event": "begin", "key": item.key})
        emit({"event": "end", "result": raw_to_dict(execute(backend, item))})
    return 0


if __name__ == "__main__":
    sys.exit(main())
