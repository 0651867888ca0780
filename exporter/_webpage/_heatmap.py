"""Pair bandwidth between GPUs as a heat map (an HTML table, no script): row = source, column = destination,
GPUs in the picture's order (socket, PCIe switch, index) so that blocks of fast pairs show.

A measured pair (the best device-to-device copy the probes timed, per direction) is coloured by its ratio to
what the links allow, in the classes of the bandwidth labels (``full`` >= 0.75, ``reduced`` >= 0.40,
``low`` below); a pair never measured is shaded grey-blue by its theoretical rate alone, so the map never
shows an estimate as a measurement. Every cell's title says which it is. Up to 16 GPUs the cells print
their GB/s; above, they are small squares and the title carries the numbers.
"""

from __future__ import annotations

import math
from html import escape

from topology import CostModel, LinkCapability, Snapshot, Source, ordered_gpus, shown_text

TEXT_UP_TO = 16
_SHADES = ("#f4f6f8", "#dde6ee", "#c5d5e4", "#a9c1d8", "#8aaccb", "#6b96bd", "#4f80ad")
_CLASSES = (("full", 0.75, "#4caf50"), ("reduced", 0.40, "#ffb300"), ("low", 0.0, "#e53935"))

CSS = """table.heat{border-collapse:collapse;font-size:.75em}table.heat td,table.heat th{border:1px solid #fff;
padding:1px 3px;text-align:center;min-width:34px;height:22px}table.heat.big td,table.heat.big th{min-width:9px;
width:9px;height:9px;padding:0;font-size:0}table.heat th{background:#eee;font-weight:normal}
table.heat td.self{background:#444}table.heat .sep{border-left:2px solid #333}.heatkey span{display:inline-block;
width:14px;height:10px;margin:0 3px 0 10px;vertical-align:middle}.heatkey{font-size:.8em;margin:.3em 0}
""" + "".join(f"table.heat td.s{i}{{background:{c}}}" for i, c in enumerate(_SHADES)) + \
    "".join(f"table.heat td.{n}{{background:{c}}}" for n, _, c in _CLASSES) + \
    "table.heat td.s5,table.heat td.s6{color:#fff}"


def measured_pairs(snap: Snapshot) -> dict[tuple[str, str], tuple[float, str, bool]]:
    """(source GPU, destination GPU) -> (best measured copy rate, its test, whether its profile is compared
    with the theoretical rate: a quick figure is shown, never classed against it)."""
    gpus = {g.id for g in snap.gpus}
    out: dict[tuple[str, str], tuple[float, str, bool]] = {}
    for m in snap.measurements:
        if m.source is not Source.MEASURED or m.unit != "bytes_per_second" or len(m.subjects) != 2 \
                or not m.test.startswith("device_to_device_") or not set(m.subjects) <= gpus:
            continue
        a, b = m.subjects
        key = (a, b) if m.direction == "a->b" else (b, a) if m.direction == "b->a" else None
        if key is not None and m.value > out.get(key, (0.0, ""))[0]:
            out[key] = (m.value, m.test, LinkCapability.compares(m))
    return out


def _shade(rate: float | None, top: float) -> str:
    """The class of a theoretical rate's shade, linear up to the node's fastest pair."""
    if not rate or not top:
        return "s0"
    return f"s{min(len(_SHADES) - 1, max(1, math.ceil(rate / top * (len(_SHADES) - 1))))}"


def _class(ratio: float) -> str:
    return next(name for name, edge, _ in _CLASSES if ratio >= edge)


def pair_heatmap(snap: Snapshot) -> str:
    gpus = [g for g in ordered_gpus(snap) if not g.lost]
    if len(gpus) < 2:
        return "<p>Fewer than two GPUs: no pairs.</p>"
    model = CostModel(snap)
    gpus.sort(key=lambda g: model.locality_key(g.id))
    cap = LinkCapability(snap)
    theory = {(a.id, b.id): cap.between(a.id, b.id) for a in gpus for b in gpus if a is not b}
    top = max((v for v in theory.values() if v), default=0.0)
    measured = measured_pairs(snap)
    names = {g.id: f"GPU{g.index}" for g in gpus}
    sockets = [model.locality_key(g.id)[0] for g in gpus]
    sep = {i for i in range(1, len(gpus)) if sockets[i] != sockets[i - 1]}
    if len(sep) > 7:  # many small sockets (a rack's trays): lines would only add noise
        sep = set()
    big = len(gpus) > TEXT_UP_TO
    rows = ['<table class="heat' + (' big' if big else '') + '"><tr><th></th>' + "".join(
        f'<th{" class=sep" if j in sep else ""} title="{names[g.id]}">{"" if big else g.index}</th>'
        for j, g in enumerate(gpus)) + "</tr>"]
    for a in gpus:
        cells = [f'<th title="{names[a.id]}">{"" if big else names[a.id]}</th>']
        for j, b in enumerate(gpus):
            line = " sep" if j in sep else ""
            if a is b:
                cells.append(f'<td class="self{line}"></td>')
                continue
            peak = theory[(a.id, b.id)]
            got = measured.get((a.id, b.id))
            if got is not None and peak and got[2]:
                ratio = got[0] / peak
                klass = _class(ratio)
                title = (f"{names[a.id]} to {names[b.id]}: measured {got[0] / 1e9:.1f} GB/s ({got[1]}) of "
                         f"{peak / 1e9:.1f} theoretical, ratio {ratio:.2f}, {klass}")
                text = f"{got[0] / 1e9:.0f}"
            else:
                klass = _shade(peak, top)
                title = f"{names[a.id]} to {names[b.id]}: not measured; theoretical " + \
                        (f"{peak / 1e9:.1f} GB/s" if peak else "unknown")
                text = f"<i>{peak / 1e9:.0f}</i>" if peak else "?"
                if got is not None and not got[2]:  # a quick figure: shown, not compared with the theoretical rate
                    rate = f"{peak / 1e9:.1f} GB/s" if peak else "unknown"
                    title = (f"{names[a.id]} to {names[b.id]}: measured {got[0] / 1e9:.1f} GB/s ({got[1]}, not the "
                             f"full profile: not compared); theoretical {rate}")
                    text = f"{got[0] / 1e9:.0f}"
            cells.append(f'<td class="{klass}{line}" title="{escape(shown_text(title))}">{"" if big else text}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    rows.append("</table>")
    key = ('<div class="heatkey">measured / theoretical:' + "".join(
        f'<span style="background:{c}"></span>{n} (&ge; {e:.2f})' if e else
        f'<span style="background:{c}"></span>{n}' for n, e, c in _CLASSES) +
        ' &nbsp; not measured, theoretical rate:<span style="background:' + _SHADES[1] + '"></span>low' +
        f'<span style="background:{_SHADES[-1]}"></span>{top / 1e9:.0f} GB/s' +
        ("" if big else " (italic numbers: theoretical GB/s; upright: measured GB/s)") + "</div>")
    return f"<style>{CSS}</style>" + key + "\n".join(rows)
