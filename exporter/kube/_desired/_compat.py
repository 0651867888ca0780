"""The opt-in ``nvidia.com/`` keys that GPU Feature Discovery also writes (pure), for schedulers and policies
that read only those: ``nvswitch.present``, ``nvlink.version`` (the lowest generation) and ``gpu.clique``
(the fabric clique shared by every GPU). Never written where another component owns them (the label sink)."""

from __future__ import annotations

from collections.abc import Mapping

from topology import Snapshot

from ._names import label_value

Values = dict[str, str | None]
COMPAT = ("nvidia.com/nvswitch.present", "nvidia.com/nvlink.version", "nvidia.com/gpu.clique")


def compat_labels(snap: Snapshot, cfg: object, prev: Mapping[str, str]) -> Values:
    del cfg, prev
    if not snap.gpus:
        return {}
    gens = [v for lk in snap.links if lk.kind.value == "nvlink" and (v := lk.nvlink_version or 0) > 0]
    cliques = {g.fabric.clique if g.fabric else None for g in snap.gpus if not g.lost}
    out: Values = {"nvidia.com/nvswitch.present": "true" if snap.nvswitches else "false"}
    if gens:
        out["nvidia.com/nvlink.version"] = str(min(gens))
    if len(cliques) == 1 and (clique := next(iter(cliques))):
        out["nvidia.com/gpu.clique"] = label_value(clique)
    return out
