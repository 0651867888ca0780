"""What every fuzz case must show: the exit status the README promises, no traceback, an honest snapshot,
a ``topo -m`` whose rows keep their GPUs, and nothing published that the snapshot does not know."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tests.published import more_than_known
from topology import Aspect, Snapshot

from . import _exec, oracle
from .snapshots import BrokenSnapshot
from .witness_cases import WitnessCase

_UNKNOWN_CELLS = ("N/A", "LOST")


@dataclass(frozen=True)
class Clean:
    """A tree's clean run: its snapshot, the size of its JSON and its ``topo -m`` text."""

    snap: Snapshot
    json_size: int
    topo: str


def check_process(run: _exec.Run) -> list[str]:
    if run.timed_out:
        return [f"no result within {_exec.WALL_LIMIT:.0f} s (killed)"]
    rc = run.returncode or 0
    errors = []
    if rc < 0:
        errors.append(f"killed by signal {-rc} (memory limit {_exec.MEMORY_LIMIT >> 20} MiB?)")
    elif rc not in (0, 1, 3):
        errors.append(f"exit {rc}: only 0, 1 or 3 are allowed")
    if "Traceback" in run.stderr:
        errors.append("traceback: " + run.stderr.strip().splitlines()[-1][:300])
    if rc == 3 and not run.stderr.strip():
        errors.append("exit 3 with nothing on stderr")
    return errors


def check_snapshot(base: Clean, lost: int | None, run: _exec.Run, snap: Snapshot, size: int) -> list[str]:
    errors = []
    if run.returncode == 0 and not snap.complete:
        errors.append(f"exit 0 but the snapshot is not complete (unknown: {oracle.describe(snap)})")
    if run.returncode == 1:
        if snap.complete:
            errors.append("exit 1 but the snapshot says it is complete")
        elif not snap.unknown:
            bad = [f"{o.name}={o.status.value}" for o in snap.sources if o.status.value not in ("ok", "absent")]
            errors.append(f"exit 1 and no problem names an unknown fact (sources: {', '.join(bad)})")
        errors += oracle.unknown_not_listed(run.stderr, snap.unknown)
    if size > max(10 * base.json_size, base.json_size + (1 << 20)):
        errors.append(f"the snapshot grew from {base.json_size} to {size} bytes")
    facts = oracle.diff(base.snap, snap)
    if facts and snap.complete:
        facts = [f"complete snapshot differs from the clean one: {e}" for e in facts]
    errors += facts
    errors += [f"serve would publish {e}" for e in more_than_known(base.snap, snap)]
    gone = [g.id for g in base.snap.gpus
            if lost is not None and g.index == lost and g.id not in {x.id for x in snap.gpus}]
    if gone:
        errors.append(f"the lost GPU {gone[0]} vanished from the snapshot (it must stay, marked lost)")
    return errors


def _table(text: str) -> dict[tuple[str, str], str]:
    """``topo -m`` text as (row, column) -> cell, NICs named by the legend (mlx5_0), affinity columns by name."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("\t"):
        return {}
    legend = dict(re.findall(r"^\s+(NIC\d+): (\S+)$", text, re.M))
    header = [legend.get(c, c) for c in lines[0].split("\t")[1:]]
    out = {}
    for line in lines[1:]:
        if not line.startswith(("GPU", "NIC")):
            break
        cells = line.split("\t")
        row = legend.get(cells[0], cells[0])
        for col, cell in zip(header, cells[1:], strict=False):
            if cell.strip():
                out[(row, col)] = cell.strip()
    return out


def check_topo_run(base: Clean, lost: int | None, run: _exec.Run) -> list[str]:
    errors = check_process(run)
    if run.returncode == 0 and run.stdout != base.topo:
        errors.append("exit 0 (complete) but topo differs from the clean tree's:\n"
                      + oracle.text_diff(base.topo, run.stdout))
    if run.returncode == 1 and not any(a.value in run.stderr for a in Aspect):
        errors.append("exit 1 but stderr names no unknown fact")
    if run.returncode not in (0, 1):
        return errors
    if lost is not None:
        rows = [ln for ln in run.stdout.splitlines() if ln.startswith("GPU")]
        want = [ln for ln in base.topo.splitlines() if ln.startswith("GPU")]
        if len(rows) < len(want):
            errors.append(f"topo shows {len(rows)} GPU rows, the clean run {len(want)}: the lost GPU's row is gone")
    clean, now = _table(base.topo), _table(run.stdout)
    moved = [f"{row} x {col}: {clean[row, col]} -> {cell}" for (row, col), cell in sorted(now.items())
             if (row, col) in clean and cell != clean[row, col] and cell not in _UNKNOWN_CELLS]
    if moved:  # a row that kept its name but shows another device's cells, or a silent change
        errors.append(f"topo cells changed under the same row and column names: {'; '.join(moved[:4])}")
    return errors


def check_snapshot_run(broken: BrokenSnapshot, run: _exec.Run) -> list[str]:
    errors = check_process(run)
    if run.timed_out or (run.returncode or 0) < 0:
        return errors
    if broken.strict and run.returncode != 3:
        errors.append(f"a broken snapshot ({broken.kind}) gave exit {run.returncode}, not 3"
                      + (f"; stdout: {run.stdout[:200]!r}" if run.stdout else ""))
    if run.returncode == 3 and len(run.stderr.strip().splitlines()) != 1:
        errors.append(f"exit 3 should say one line on stderr, said {len(run.stderr.strip().splitlines())}")
    if "NV-" in run.stdout:
        errors.append("rendered a negative NVLink count (NV-)")
    return errors


def check_witness_run(w: WitnessCase, run: _exec.Run | None, snap: Snapshot | None) -> list[str]:
    """A perturbed witness: exit 1 and the row's problem with its unknown facts, or where the row's stated
    winner stands, the row's problem and nothing unknown because of it."""
    from agent.discovery.assemble import witness

    row = witness(w.key)
    if run is None or run.timed_out or run.returncode not in (0, 1):
        return []  # check_process has said what is wrong
    errors = []
    if not w.edit.winner and run.returncode != 1:
        errors.append(f"exit {run.returncode}: two witnesses of {w.key} disagree, so a fact is unknown (exit 1)")
    if snap is not None:
        mine = [p for p in snap.problems if p.source == row.source and p.message.startswith(row.fact + ":")]
        if not mine:
            errors.append(f"no {w.key} problem naming both readings")
        elif any(bool(p.unknown) == w.edit.winner for p in mine):
            errors.append(f"{w.key}: {'the stated winner stands, yet' if w.edit.winner else 'nothing unknown:'} "
                          f"{mine[0].message}")
    return errors
