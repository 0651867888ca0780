"""The rack and tray labels of a GB200/GB300 tray, from NVML's platform info (pure): ``rack`` the chassis serial
number every GPU of the node reports (a value usable as a topology level: the nodes of one rack share it), and
``tray`` the tray's index in it. A node whose GPUs do not all report one chassis gets neither."""

from __future__ import annotations

from collections.abc import Mapping

from topology import Snapshot

from ._names import label_value

Values = dict[str, str | None]


MAX_TRAY = 255


def rack_labels(snap: Snapshot, cfg: object, prev: Mapping[str, str]) -> Values:
    del cfg, prev
    live = [g for g in snap.gpus if not g.lost]
    platforms = [g.platform for g in live]
    if not live or any(p is None for p in platforms):
        return {}
    serials = {p.chassis_serial for p in platforms if p is not None}
    trays = {p.tray for p in platforms if p is not None}
    if len(serials) != 1:
        return {}
    out: Values = {"rack": label_value(next(iter(serials)))}
    if len(trays) == 1 and 0 <= (tray := next(iter(trays))) <= MAX_TRAY:  # NVML's tray index is a byte
        out["tray"] = str(tray)
    return out
