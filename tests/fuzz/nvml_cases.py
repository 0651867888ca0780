"""NVML failures for machine profiles: an error on every call discovery makes, a GPU lost at every call.

The calls come from a clean run's call log (``TOPOLINK_FAKENVML_CALLS``). Rules are ``inject:`` entries of
the profile (tests/machines/README.md). The pool is ordered so that a short run still covers every
function once before any function comes twice.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tests.fakenvml import gpus_named

ERRORS = ("NOT_SUPPORTED", "NO_PERMISSION", "UNKNOWN", "GPU_IS_LOST", "TIMEOUT")
_SKIP = ("nvmlShutdown",)
_KEY = re.compile(r"^(\w+)(?:\[[^\]]*\])?(?:\((.*)\))?$")


@dataclass(frozen=True)
class NvmlFault:
    rule: Mapping[str, Any]  # one ``inject:`` entry

    @property
    def lost_gpu(self) -> int | None:
        value = self.rule.get("lose")
        return int(value) if value is not None else None

    def __str__(self) -> str:
        r = self.rule
        if "lose" in r:
            return f"lose GPU {r['lose']} at {r['at']} call #{r['nth']}"
        where = "".join(f" {k} {r[k]}" for k in ("gpu", "link") if k in r)
        return f"{r['error']} from {r['call']}{where or ' (every GPU)'}"


def _parse(key: str) -> tuple[str, list[str]]:
    m = _KEY.match(key)
    if m is None:
        return key, []
    return m.group(1), [a for a in (m.group(2) or "").split(",") if a]


def faults(calls: Mapping[str, int], rng: random.Random) -> list[NvmlFault]:
    """Every error on every function and a loss at every call naming a GPU, interleaved by function."""
    by_fn: dict[str, list[NvmlFault]] = {}
    seen_per_gpu: Counter[tuple[str, int]] = Counter()
    links: dict[str, set[tuple[int, int]]] = {}
    for key, count in calls.items():
        fn, args = _parse(key)
        if fn in _SKIP:
            continue
        gpus = gpus_named(key)
        for g in gpus:
            seen_per_gpu[(fn, g)] += count
        if "NvLink" in fn and len(args) >= 2 and args[0].isdigit() and args[1].isdigit():
            links.setdefault(fn, set()).add((int(args[0]), int(args[1])))
        by_fn.setdefault(fn, [])
    for fn, pool in by_fn.items():
        named = sorted({g for (f, g) in seen_per_gpu if f == fn})
        for error in ERRORS:
            pool.append(NvmlFault({"call": fn, "error": error}))
            if named:
                pool.append(NvmlFault({"call": fn, "error": error, "gpu": rng.choice(named)}))
            if fn in links:
                gpu, link = rng.choice(sorted(links[fn]))
                pool.append(NvmlFault({"call": fn, "error": error, "gpu": gpu, "link": link}))
    for (fn, gpu), count in sorted(seen_per_gpu.items()):
        by_fn.setdefault(fn, []).extend(NvmlFault({"lose": gpu, "at": fn, "nth": nth}) for nth in range(1, count + 1))
    order = sorted(by_fn)
    rng.shuffle(order)
    for fn in order:
        rng.shuffle(by_fn[fn])
    out: list[NvmlFault] = []
    depth = max((len(v) for v in by_fn.values()), default=0)
    for i in range(depth):  # round-robin: every function once, then again
        out += [by_fn[fn][i] for fn in order if i < len(by_fn[fn])]
    return out


def split_losses(pool: list[NvmlFault]) -> tuple[list[NvmlFault], list[NvmlFault]]:
    return [f for f in pool if f.lost_gpu is None], [f for f in pool if f.lost_gpu is not None]
