"""The label and attribute reference of docs/reference.md, generated from the tables the code uses."""

from __future__ import annotations

from .._desired._labels import LABELERS, LabelConfig
from .._desired._slices import ATTRIBUTES, TAINT, SliceConfig


def reference_markdown(labels: LabelConfig | None = None, slices: SliceConfig | None = None) -> str:
    lc, sc = labels or LabelConfig(), slices or SliceConfig()
    rows = ["| Label | Meaning |", "|---|---|"]
    for lb in LABELERS:
        for key, (_, meaning) in zip(lb.full_keys(lc), lb.keys, strict=True):
            rows.append(f"| `{key}` | {meaning} |")
    rows += ["", "| Device attribute | Type | Meaning |", "|---|---|---|"]
    for name, kind, meaning in ATTRIBUTES:
        full = name if "/" in name else f"{sc.driver}/{name}"
        rows.append(f"| `{full}` | {kind} | {meaning} |")
    rows += ["", f"Devices carry the taint `{sc.driver}/{TAINT}=true:NoSchedule` where the server supports "
                 "device taints; DeviceTaintRules (opt-in) taint `gpu.nvidia.com` devices with "
                 f"`{lc.prefix}/degraded=<reasons>:NoSchedule`."]
    return "\n".join(rows) + "\n"
