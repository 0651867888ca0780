"""Renderers, pure: nvbandwidth-like matrices, collective sweeps, measured beside theoretical with the
ratio, and what did not run with why. A number that was not measured prints as N/A, never as 0."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from topology import LinkCapability, Measurement, Snapshot, Source, shown

from ..core import Kind, ProbeReport, Status, specs_for

NA = "N/A"
_W = 10  # nvbandwidth's column width


def label(snap: Snapshot, subject: str) -> str:
    """A subject as people read it; a name or id from sysfs or a snapshot is escaped and bounded."""
    gpu = next((g for g in snap.gpus if g.id == subject), None)
    if gpu is not None:
        return f"GPU{gpu.index}" if gpu.index is not None else shown(subject)
    if subject.startswith("numa") and subject[4:].isdigit():
        return f"NUMA{shown(subject[4:])}"
    nic = next((n for n in snap.nics if n.id == subject), None)
    return shown(nic.name if nic is not None else subject)


def _value(m: Measurement) -> str:
    if m.unit == "seconds":
        return f"{m.value * 1e9:.2f}"
    return f"{m.value / 1e9:.2f}"


def matrix(snap: Snapshot, title: str, cells: Iterable[Measurement]) -> str:
    """Rows are ``subjects[0]``, columns ``subjects[1]`` (one row for one-subject tests); N/A where none."""
    grid: dict[tuple[str, str], str] = {}
    rows: list[str] = []
    cols: list[str] = []
    for m in cells:
        row, col = (m.subjects[0], m.subjects[1]) if len(m.subjects) > 1 else ("", m.subjects[0])
        rows += [row] if row not in rows else []
        cols += [col] if col not in cols else []
        grid[row, col] = _value(m)
    order = {g.id: (g.index if g.index is not None else 1 << 20, g.id) for g in snap.gpus}
    key = lambda s: order.get(s, (-1, s))  # noqa: E731 - host rows first, then GPUs by index
    rows.sort(key=key)
    cols.sort(key=key)
    lines = [title, " " * _W + "".join(f"{label(snap, c):>{_W}}" for c in cols)]
    for r in rows:
        lines.append(f"{label(snap, r) if r else '':>{_W}}" + "".join(f"{grid.get((r, c), NA):>{_W}}" for c in cols))
    return "\n".join(lines)


def versus_theoretical(snap: Snapshot, measurements: Sequence[Measurement]) -> str:
    """Each figure of a compared profile (``full``) beside what its links allow; a ``quick`` figure is not
    compared (it reads below full on fast links), and a line says how many were left out and why."""
    rows = []
    cap = LinkCapability(snap)
    apart: set[str] = set()
    for m in measurements:
        peak = cap.of(m)
        if peak and not cap.compares(m):
            apart.add(dict(m.conditions).get("profile", ""))
        elif peak:
            subjects = " ".join(label(snap, s) for s in m.subjects)
            rows.append(f"{shown(m.test):<48} {subjects:<24} {shown(m.direction):>6} {m.value / 1e9:>10.2f} "
                        f"{peak / 1e9:>11.2f} {m.value / peak:>6.2f}")
    note = (f"Not compared with the theoretical rates: the figures of the {', '.join(sorted(map(shown, apart)))} "
            "profile (smaller than full's, they read below it on fast links; --profile full compares)") if apart else ""
    if not rows:
        return note
    head = f"{'test':<48} {'between':<24} {'dir':>6} {'measured':>10} {'theoretical':>11} {'ratio':>6}"
    return "\n".join(["Measured vs theoretical (GB/s per direction)", head, *rows] + ([note] if note else []))


def _mode(m: Measurement) -> str:
    return dict(m.conditions).get("mode", "")


def sweep_table(snap: Snapshot, subjects: tuple[str, ...], sweep: Sequence[Measurement]) -> str:
    """nccl-tests' body: per size, algbw and busbw of each mode timed (out of place, then in place)."""
    who = " ".join(label(snap, s) for s in subjects)
    modes = list(dict.fromkeys(_mode(m) for m in sweep))
    cells: dict[tuple[int, str, str], Measurement] = {(m.size_bytes or 0, _mode(m), m.direction): m for m in sweep}
    timed = any(_timing(m) for m in sweep)  # NCCL: each cell's own timing mode (graph | stream)
    width = 24 + 7 * timed
    head = f"{'size (B)':>14}" + "".join(f" {'algbw':>8} {'busbw':>8} {'cv':>6}" + (f" {'timed':>6}" if timed else "")
                                         for _ in modes)
    lines = [f"  over {who}", " " * 14 + "".join(f" {mode or '-':^{width}}" for mode in modes), head]
    for size in sorted({m.size_bytes or 0 for m in sweep}):
        row = f"{size:>14}"
        for mode in modes:
            alg, bus = cells.get((size, mode, "algbw")), cells.get((size, mode, "busbw"))
            stats = alg.stats if alg is not None else None
            cv = f"{stats.cv:.3f}" if stats is not None and len(stats.samples) > 1 else NA  # one window: no spread
            how = f" {_timing(alg) if alg is not None else NA:>6}" if timed else ""
            row += (f" {alg.value / 1e9:>8.2f} {bus.value / 1e9:>8.2f} {cv:>6}{how}"
                    if alg is not None and bus is not None else f" {NA:>8} {NA:>8} {NA:>6}{how}")
        lines.append(row)
    return "\n".join(lines)


def _timing(m: Measurement) -> str:
    return dict(m.conditions).get("timing_mode", "")


def render_report(report: ProbeReport, snap: Snapshot) -> str:
    out = [f"topolink probe: profile {report.profile}, backend {report.backend}, {report.elapsed_s:.1f} s"]
    out += [f"note: {n}" for n in report.notes]
    simulated = sorted({dict(m.conditions).get("simulated", "") for m in report.measurements
                        if m.source is Source.SIMULATED})
    out += [f"note: SIMULATED numbers, not measured on hardware: {why}" for why in simulated]
    if report.versions:
        out.append("versions: " + ", ".join(f"{k} {v}" for k, v in report.versions))
    for spec in specs_for(report.backend):
        outcomes = [o for o in report.outcomes if o.test == spec.name]
        if not outcomes:
            continue
        out.append("")
        out.append(f"Running {spec.name}.")
        done = [m for o in outcomes for m in o.measurements]
        if spec.kind is Kind.COLLECTIVE:
            out.append(spec.description)
            for o in (o for o in outcomes if o.status is Status.OK):
                bus = next((m for m in o.measurements if m.direction == "busbw"), None)
                if bus is not None:
                    how = f", {_timing(bus)}" if _timing(bus) else ""
                    out.append(f"  best busbw {bus.value / 1e9:.2f} GB/s at {bus.size_bytes} B ({_mode(bus)}{how}) "
                               f"over {len(o.subjects)} ranks")
                out.append(sweep_table(snap, o.subjects, o.sweep))
                avg = next((m for m in o.measurements if m.direction == "avg_busbw"), None)
                if avg is not None:
                    summary = dict(avg.conditions).get("summary")
                    over = summary or f"nccl-tests' mean over the {len(o.sweep) // 2} cells above"
                    out.append(f"  # Avg bus bandwidth    : {avg.value / 1e9:.2f} GB/s ({over})")
        else:
            for direction in dict.fromkeys(m.direction for m in done):
                title = spec.description + ("" if len(spec.channels) == 1 else f" [{direction}]")
                out.append(matrix(snap, title, (m for m in done if m.direction == direction)))
            if not done:
                out.append(spec.description + ": nothing measured")
        for o in outcomes:
            if o.status is not Status.OK:
                who = " ".join(label(snap, s) for s in o.subjects) or "-"
                out.append(f"  {o.status.value.upper()} {who}: {o.reason}")
    versus = versus_theoretical(snap, report.measurements)
    if versus:
        out += ["", versus]
    ran = sum(o.status is Status.OK for o in report.outcomes)
    out += ["", f"{ran} ran, {sum(o.status is Status.WAIVED for o in report.outcomes)} waived, "
                f"{sum(o.status is Status.FAILED for o in report.outcomes)} failed"]
    return "\n".join(out)


def render_bandwidth_matrix(snap: Snapshot) -> str:
    """The measured matrices a snapshot carries (``topolink topo --bandwidth``)."""
    measured = [m for m in snap.measurements if m.source is Source.MEASURED]
    if not measured:
        return ("no measured bandwidth in this snapshot: measure with `topolink probe --format json -o report.json`, "
                "then show it with `topolink topo --from report.json --bandwidth`\n")
    out: list[str] = []
    for test in dict.fromkeys(m.test for m in measured):
        ms = [m for m in measured if m.test == test]
        for direction in dict.fromkeys(m.direction for m in ms):
            cells = [m for m in ms if m.direction == direction]
            name, way = shown(test), shown(direction)  # a saved snapshot's words, shown safely
            unit = "ns" if cells[0].unit == "seconds" else "GB/s"
            if direction in ("busbw", "algbw", "avg_busbw"):  # a collective over a group: one line per group
                for m in cells:
                    who = " ".join(label(snap, s) for s in m.subjects)
                    at = f"at {m.size_bytes} B ({_mode(m)})" if m.size_bytes else "mean over the sweep (nccl-tests)"
                    out.append(f"{name} {way} over {who}: {_value(m)} {unit} {at}")
                continue
            out.append(matrix(snap, f"{name} {way} ({unit}, {shown(cells[0].method)})", cells))
            out.append("")
    versus = versus_theoretical(snap, measured)
    return "\n".join(out + ([versus] if versus else [])).rstrip() + "\n"
