"""The agent's state: what becomes stale and since when (pure), and the state directory (atomic files).

The state directory holds the last complete snapshot (``snapshot.json``, schema ``topolink.topology/v2``)
and the last probe report (``probe-report.json``, ``topolink.probe/v2``; a ``v1`` one is still read). At
start both are loaded when their structure hash matches the first discovery pass; anything else is
reported and ignored.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from exporter import UnsafeFile, read_regular, write_file
from topology import MAX_DOCUMENT_BYTES, Fact, Measurement, SchemaError, Snapshot, from_dict, loads, structure_hash

from ..discovery.assemble import witnessed

SNAPSHOT_FILE = "snapshot.json"
REPORT_FILE = "probe-report.json"
REPORT_SCHEMAS = ("topolink.probe/v1", "topolink.probe/v2")  # probes.READABLE_REPORT_SCHEMAS


def stale_since(previous: Mapping[Fact, float], unknown: frozenset[Fact], now: float) -> dict[Fact, float]:
    """Each unknown fact with the time it first became unknown; facts known again drop out."""
    return {f: previous.get(f, now) for f in sorted(unknown)}


@dataclass(frozen=True, slots=True)
class Loaded:
    snapshot: Snapshot | None = None
    measurements: tuple[Measurement, ...] = ()
    report: dict[str, object] | None = None
    errors: tuple[tuple[str, str], ...] = ()  # (file, why it was ignored): corrupt or foreign
    notes: tuple[str, ...] = field(default=())  # valid files left out: the hardware changed


def _write_atomic(path: Path, text: str) -> None:
    """A reader sees the old file or the new one, never half of one; a FIFO, device or directory put in the
    file's place is refused, never replaced (``exporter.Target``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        write_file(str(path), text.encode(), durable=True)  # read again after a restart or a reboot
    except UnsafeFile as exc:
        raise OSError(str(exc)) from exc


def _read(path: Path) -> str:
    """A state file: a regular file of at most MAX_DOCUMENT_BYTES, or UnsafeFile (a FIFO cannot hang the start)."""
    return read_regular(str(path), MAX_DOCUMENT_BYTES).decode()


class StateDir:
    def __init__(self, root: Path) -> None:
        self.root = root

    def save_snapshot(self, snap: Snapshot) -> None:
        from topology import dumps

        _write_atomic(self.root / SNAPSHOT_FILE, dumps(snap) + "\n")

    def save_report(self, text: str) -> None:
        _write_atomic(self.root / REPORT_FILE, text)

    def writable(self) -> str | None:
        """None when a file can be created in the directory now; else why not."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".write-check.")
            os.close(fd)
            os.unlink(tmp)
        except OSError as exc:
            return str(exc)
        return None

    def load(self, expected_hash: str) -> Loaded:
        snapshot: Snapshot | None = None
        measurements: tuple[Measurement, ...] = ()
        report: dict[str, object] | None = None
        errors: list[tuple[str, str]] = []
        notes: list[str] = []
        path = self.root / SNAPSHOT_FILE
        if os.path.lexists(path):
            try:
                snap = witnessed(loads(_read(path)))
                if structure_hash(snap) == expected_hash:
                    snapshot = snap
                else:
                    notes.append(f"{path}: from other hardware (structure hash differs): not used")
            except (OSError, UnicodeDecodeError, SchemaError, UnsafeFile) as exc:
                errors.append((SNAPSHOT_FILE, f"{path}: {exc}"))
        path = self.root / REPORT_FILE
        if os.path.lexists(path):
            try:
                doc = json.loads(_read(path))
                if not isinstance(doc, dict) or doc.get("schema") not in REPORT_SCHEMAS \
                        or not isinstance(doc.get("snapshot"), dict):
                    raise SchemaError(f"not a {' or '.join(REPORT_SCHEMAS)} report")
                snap = witnessed(from_dict(doc["snapshot"]))
                if structure_hash(snap) == expected_hash:
                    measurements, report = snap.measurements, doc
                else:
                    notes.append(f"{path}: from other hardware (structure hash differs): not used")
            except (OSError, UnicodeDecodeError, ValueError, SchemaError, UnsafeFile, RecursionError) as exc:
                errors.append((REPORT_FILE, f"{path}: {exc}"))
        return Loaded(snapshot, measurements, report, tuple(errors), tuple(notes))
