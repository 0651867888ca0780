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
