"""NVML failures for machine profiles: an error on every call discovery makes (on every matching call, or
only the nth), a GPU lost at every call, NVML not starting, and NVML answers that contradict the sysfs tree.

The calls come from a clean run's call log (``TOPOLINK_FAKENVML_CALLS``). Rules are ``inject:`` entries of
the profile (tests/machines/README.md); a quarter of the faults bring a second one (two GPUs lost, an
error and a loss). Contradictions edit the profile's NVML answers (a pair's common ancestor, a minor, a
bus id). The pool is ordered so that a short run still covers every function once before any comes twice.
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
INIT_ERRORS = ("DRIVER_NOT_LOADED", "LIB_RM_VERSION_MISMATCH", "NO_PERMISSION", "UNKNOWN")
_LEVELS = (10, 20, 30, 40, 50)
_SKIP = ("nvmlShutdown",)
_KEY = re.compile(r"^(\w+)(?:\[[^\]]*\])?(?:\((.*)\))?$")


@dataclass(frozen=True)
class NvmlFault:
    rule: Mapping[str, Any]  # one ``inject:`` entry, or {} for an edit alone
    also: Mapping[str, Any] | None = None  # a second entry
    edit: tuple[str, str] | None = None  # (regular expression, replacement) on the NVML profile's lines

    @property
    def rules(self) -> list[dict[str, Any]]:
        return [dict(r) for r in (self.rule, self.also) if r]

    @property
    def lost_gpu(self) -> int | None:
        value = next((r["lose"] for r in self.rules if "lose" in r), None)
        return int(value) if value is not None else None

    def __str__(self) -> str:
        text = " and ".join(_describe(r) for r in self.rules)
        if self.edit:
            text = (text + "; " if text else "") + f"NVML answers {self.edit[1]!r} for {self.edit[0]!r}"
        return text


def _describe(r: Mapping[str, Any]) -> str:
    if "lose" in r:
        return f"lose GPU {r['lose']} at {r['at']} call #{r['nth']}"
    where = "".join(f" {k} {r[k]}" for k in ("gpu", "link") if k in r)
    when = f" (only call #{r['nth']})" if "nth" in r else ""
    return f"{r['error']} from {r['call']}{where or ' (every GPU)'}{when}"


def contradictions(gpus: int, rng: random.Random) -> list[NvmlFault]:
    """NVML answers that contradict the sysfs tree or each other: a pair's common ancestor, a minor the
    driver's /proc list does not say, two GPUs at one bus id."""
    if gpus < 2:
        return []
    out = []
    for _ in range(3):
        a, b = rng.sample(range(gpus), 2)
        level = rng.choice(_LEVELS)
        out.append(NvmlFault({}, edit=(rf"^pair ({a} {b}|{b} {a}) ancestor \d+$", rf"pair \1 ancestor {level}")))
    a, b = rng.sample(range(gpus), 2)
    out.append(NvmlFault({}, edit=(rf"^gpu {a} minor \d+$", f"gpu {a} minor {100 + a}")))
    out.append(NvmlFault({}, edit=(rf"^gpu {a} minor \d+$", f"gpu {a} minor {b}")))
    out.append(NvmlFault({}, edit=(rf"^gpu {a} busid \S+", f"gpu {a} busid @{b}")))  # @b: GPU b's bus id
    return out


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
    totals: Counter[str] = Counter()
    for key, count in calls.items():
        totals[_parse(key)[0]] += count
    for fn, pool in by_fn.items():
        named = sorted({g for (f, g) in seen_per_gpu if f == fn})
        for error in (INIT_ERRORS if fn == "nvmlInitWithFlags" else ERRORS):
            pool.append(NvmlFault({"call": fn, "error": error}))
            if totals[fn] > 1:  # the error at one call only, anywhere in the walk
                pool.append(NvmlFault({"call": fn, "error": error, "nth": rng.randint(1, totals[fn])}))
            if named:
                gpu = rng.choice(named)
                pool.append(NvmlFault({"call": fn, "error": error, "gpu": gpu}))
                pool.append(NvmlFault({"call": fn, "error": error, "gpu": gpu,
                                       "nth": rng.randint(1, seen_per_gpu[(fn, gpu)])}))
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
    gpus = len({g for (_, g) in seen_per_gpu})
    for i, extra in enumerate(contradictions(gpus, rng)):  # early in the pool: a short run meets them
        out.insert(min(len(out), 3 + 7 * i), extra)
    return [NvmlFault(f.rule, also=rng.choice(out).rule, edit=f.edit) if f.rule and rng.random() < 0.25 else f
            for f in out]


def split_losses(pool: list[NvmlFault]) -> tuple[list[NvmlFault], list[NvmlFault]]:
    return [f for f in pool if f.lost_gpu is None], [f for f in pool if f.lost_gpu is not None]


def edited(lines: list[str], edit: tuple[str, str] | None) -> list[str]:
    """The NVML profile with one answer changed; ``@N`` in the replacement is GPU N's bus id."""
    if edit is None:
        return lines
    import re

    bus = {m.group(1): m.group(2) for line in lines if (m := re.match(r"^gpu (\d+) busid (\S+)", line))}
    pattern, replacement = edit
    out = [re.sub(pattern, replacement, line) for line in lines]
    return [re.sub(r"busid @(\d+)", lambda m: f"busid {bus.get(m.group(1), m.group(0))}", line) for line in out]
