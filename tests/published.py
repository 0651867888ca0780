"""What the node agent would publish from a snapshot on its first pass (nothing observed before), and the
check that a faulty pass publishes nothing the clean pass would not.

With no previous value, a fact the snapshot marks unknown publishes nothing; a fact it knows publishes
what the clean machine publishes. So every label, ResourceSlice device attribute and DeviceTaintRule of a
faulty pass must be one the clean pass has too, under the same name: a label that differs is a guess, a
device whose attributes differ carries another GPU's facts.
"""

from __future__ import annotations

from typing import Any

from exporter.kube import LabelConfig, SliceConfig, desired_devices, desired_labels, desired_rules
from topology import Snapshot

_LABELS = LabelConfig(compat=True)
_SLICES = SliceConfig()


def labels(snap: Snapshot) -> dict[str, str]:
    return desired_labels(snap, _LABELS, {})


def devices(snap: Snapshot) -> dict[str, dict[str, Any]]:
    return {str(d["name"]): dict(d["attributes"]) for d in desired_devices(snap, _SLICES)}


def rules(snap: Snapshot) -> dict[str, Any]:
    return {str(r["spec"]["deviceSelector"]["device"]): r["spec"]["taint"]
            for r in desired_rules(snap, "node", "gpu.topology", "gpu.nvidia.com", "v1alpha3")}


_CLEAN: dict[int, tuple[Snapshot, dict[str, str], dict[str, dict[str, Any]], dict[str, Any]]] = {}


def _clean(snap: Snapshot) -> tuple[dict[str, str], dict[str, dict[str, Any]], dict[str, Any]]:
    """The clean machine's publications, computed once per snapshot (the fuzz suite asks for hundreds)."""
    hit = _CLEAN.get(id(snap))
    if hit is None or hit[0] is not snap:
        hit = _CLEAN[id(snap)] = (snap, labels(snap), devices(snap), rules(snap))
    return hit[1], hit[2], hit[3]


def more_than_known(clean: Snapshot, faulty: Snapshot) -> list[str]:
    """What ``faulty`` would publish that ``clean`` (the same machine, read whole) would not."""
    errors = []
    ok_labels, ok_devices, ok_rules = _clean(clean)
    for key, value in sorted(labels(faulty).items()):
        if key.endswith("/nvlink-domain") and clean.node != faulty.node:
            continue  # its fallback value is the node's name, which the faulty pass may read otherwise
        if ok_labels.get(key) != value:
            errors.append(f"label {key}={value} (clean: {ok_labels.get(key)})")
    for name, attrs in sorted(devices(faulty).items()):
        if name not in ok_devices:
            errors.append(f"ResourceSlice device {name} that the clean machine does not have")
            continue
        errors += [f"ResourceSlice device {name}: {key}={value} (clean: {ok_devices[name].get(key)})"
                   for key, value in sorted(attrs.items()) if ok_devices[name].get(key) != value]
    errors += [f"DeviceTaintRule for {dev}: {taint} (clean: {ok_rules.get(dev)})"
               for dev, taint in sorted(rules(faulty).items()) if ok_rules.get(dev) != taint]
    return errors
