"""One log line per event, as text or JSON (``--log-format``); no per-scrape lines."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

LOGGER = "topolink.serve"


class _Json(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {"ts": round(record.created, 3), "level": record.levelname.lower(),
                               "event": record.getMessage()}
        doc.update(getattr(record, "fields", {}))
        return json.dumps(doc, default=str)


class _Text(logging.Formatter):
    """One line per event: the message and every field value escaped (``topology.shown``), since they may quote
    a name or an error from NVML, sysfs or a state file; JSON lines need nothing (``json.dumps`` escapes)."""

    def format(self, record: logging.LogRecord) -> str:
        from topology import shown_text

        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        extra = " ".join(f"{k}={shown_text(v)}" for k, v in getattr(record, "fields", {}).items())
        return f"{stamp} {record.levelname.lower()} {shown_text(record.getMessage())}" + (f" {extra}" if extra else "")


def setup(fmt: str) -> logging.Logger:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Json() if fmt == "json" else _Text())
    log = logging.getLogger(LOGGER)
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO)
    log.propagate = False
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):  # our own lines only
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = False
    return log


def event(log: logging.Logger, name: str, level: int = logging.INFO, **fields: Any) -> None:
    log.log(level, name, extra={"fields": fields})


def fix_for(detail: str) -> str:
    """What an operator does about a publish failure: for a 401/403, the permission to grant, as the server's own
    message names it (``cannot list resource "resourceslices" in API group "resource.k8s.io"``); else nothing."""
    import re

    if not detail.startswith("Forbidden"):
        return ""
    found = re.search(r'cannot (\w+) resource "([\w.-]+)"(?: in API group "([\w.-]*)")?', detail)
    if found is None:
        return "grant the agent's ServiceAccount the permissions of exporter.kube.PERMISSIONS (docs/operator.md)"
    verb, resource, group = found.groups()
    return f"grant the agent's ServiceAccount {verb} on {resource}" + (f" ({group})" if group else "")


class Failures:
    """Publish failures logged once per run of failed passes (a sink failing pass after pass says so once, with the
    fix, and once more when it publishes again), so a missing permission is one line, not one a pass."""

    def __init__(self, log: logging.Logger) -> None:
        self._log = log
        self._failing: dict[str, tuple[frozenset[str], int]] = {}  # sink: (kinds of failure, passes failed in a row)

    def result(self, sink: str, ok: bool, detail: str) -> None:
        kind = detail.split(":", 1)[0]
        if ok:
            if (before := self._failing.pop(sink, None)) is not None:
                event(self._log, "publish recovered", sink=sink, failed_passes=before[1])
            return
        kinds, n = self._failing.get(sink, (frozenset(), 0))
        self._failing[sink] = (kinds | {kind}, n + 1)
        if kind not in kinds:  # a kind of failure new since the sink last published
            fields = {"fix": fix} if (fix := fix_for(detail)) else {}
            event(self._log, "publish failed", logging.WARNING, sink=sink, detail=detail, **fields)
        else:
            event(self._log, "publish failed again", logging.DEBUG, sink=sink, detail=detail, failed_passes=n + 1)
