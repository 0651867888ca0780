"""The snapshot codec and the model's import cost: prints tables. Not a test.

    .venv/bin/python benchmarks/codec.py [--runs 20] [--gpus 8,72]

Snapshots: discovery of the hgx-h100 profile through the test NVML (8 GPUs) and of the synthetic NVSwitch
machine of 72 GPUs grown from it (tests/fakenvml/_synthetic.py), with every matrix NVML gives. Medians of
``--runs`` in this process, interleaved, in CPU time (the VM is shared):

- decode: ``topology.loads`` (decoders built once per type, repeated keys refused, references checked)
  beside the decoder it replaced (benchmarks/_old_codec.py: every value through the type hints), and
  ``msgspec.json.decode`` of the same bytes into plain values (a parse only, for scale);
- encode: ``topology.dumps`` indented (the default) and compact (unchanged), beside
  ``msgspec.json.encode`` of the same document;
- encode beside ``json.dumps(doc, indent=2)`` of the same document: what ``topology.codec._jsontext`` saves;
- import, each a fresh interpreter (median of ``--runs``, the child's CPU time): ``topology.model._entities`` and
  what it imports (the model's records: plain slotted classes, ``topology.Record``), ``dataclasses`` alone,
  ``msgspec`` alone; and the frozen records of ``topology`` created again two ways: as frozen, slotted,
  keyword-only dataclasses (what they were until issue 52) and as ``msgspec.Struct`` classes
  (``msgspec.defstruct``, once msgspec is imported).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import _old_codec  # noqa: E402  (beside this script)
from _table import print_rows  # noqa: E402

import topology as t  # noqa: E402

MS = 1e3
# CPU time of the child (process_time): what it costs, whatever else the machine runs at the same time.
_MODEL = "import time\na = time.process_time()\nimport topology.model._entities\nprint(time.process_time() - a)"
_DATACLASSES = "import time\na = time.process_time()\nimport dataclasses\nprint(time.process_time() - a)"
_MSGSPEC = "import time\na = time.process_time()\nimport msgspec\nprint(time.process_time() - a)"
# The model's records created again, two ways, in one child: dataclasses (what they were) and ``msgspec.Struct``
# (``msgspec.defstruct``).
_CREATE = """
import dataclasses, sys, time, msgspec, topology.model._entities, topology
mods = [m for n, m in sys.modules.items() if n.startswith('topology.')]
classes = [c for m in mods for c in vars(m).values()
           if isinstance(c, type) and issubclass(c, topology.Record) and c.__module__ == m.__name__
           and c is not topology.Record]
def body_of(c):
    defaults = c.__init__.__kwdefaults__ or {}
    body = {'__annotations__': {n: c.__annotations__[n] for n in c.__match_args__}, '__module__': c.__module__,
            '__doc__': c.__doc__, '__qualname__': c.__qualname__}
    body.update((n, defaults[n]) for n in c.__match_args__ if n in defaults)
    return c.__name__, body
bodies = [body_of(c) for c in classes]
plain = [type(name, (), dict(body)) for name, body in bodies]
a = time.process_time()
for c in plain:
    dataclasses.dataclass(frozen=True, slots=True, kw_only=True)(c)
t1 = time.process_time()
for c in classes:
    msgspec.defstruct(c.__name__, [(n, object) for n in c.__match_args__], frozen=True, kw_only=True)
t2 = time.process_time()
print(t1 - a, t2 - t1, len(classes))
"""


def snapshots(gpus: list[int], work: Path) -> dict[int, bytes]:
    from agent.discovery import discover
    from agent.discovery.access import DiscoveryContext, FsRoot
    from tests.fakenvml import ENV_CALLS, ENV_PROFILE, MACHINES, materialize, write_scaled

    hgx, found = MACHINES / "hgx-h100.yaml", {}
    for n in gpus:
        profile = hgx if n == 8 else write_scaled(hgx, n, work / "profiles")
        node = materialize(profile, work / f"x{n}")
        os.environ[ENV_PROFILE], os.environ[ENV_CALLS] = str(node.nvml_profile), str(node.calls_file)
        found[n] = t.dumps(discover(DiscoveryContext(root=FsRoot(node.root), nvml_library=str(node.nvml_library))))
    return {n: text.encode() for n, text in found.items()}


def _medians(ways: dict[str, Callable[[], object]], runs: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {name: [] for name in ways}
    for fn in ways.values():
        fn()  # warm: the decoders are built on first use
    for _ in range(runs):
        for name, fn in ways.items():
            start = time.process_time()
            fn()
            samples[name].append(time.process_time() - start)
    return {name: statistics.median(s) * MS for name, s in samples.items()}


def codec_rows(data: dict[int, bytes], runs: int) -> list[tuple[str, str, str]]:
    import msgspec

    rows = []
    for n, raw in data.items():
        snap = t.loads(raw)
        assert _old_codec.loads(raw) == snap
        doc = t.to_dict(snap)
        got = _medians({"new": lambda r=raw: t.loads(r), "old": lambda r=raw: _old_codec.loads(r),
                        "parse": lambda r=raw: msgspec.json.decode(r),
                        "indented": lambda s=snap: t.dumps(s), "compact": lambda s=snap: t.dumps(s, indent=None),
                        "msgspec": lambda d=doc: msgspec.json.encode(d),
                        "json": lambda d=doc: json.dumps(d, indent=2, allow_nan=False)}, runs)
        what = f"{n} GPUs ({len(raw) >> 10} KiB)"
        rows += [
            (f"decode {what}: topology.loads", f"{got['new']:.2f} ms CPU measured",
             f"{got['old'] / got['new']:.1f}x faster than before"),
            (f"decode {what}: the decoder before", f"{got['old']:.2f} ms CPU measured", "-"),
            (f"decode {what}: msgspec.json.decode, parse only", f"{got['parse']:.2f} ms CPU measured", "-"),
            (f"encode {what}: topology.dumps indented", f"{got['indented']:.2f} ms CPU measured", "unchanged"),
            (f"encode {what}: topology.dumps compact", f"{got['compact']:.2f} ms CPU measured", "unchanged"),
            (f"encode {what}: json.dumps(indent=2) of its document", f"{got['json']:.2f} ms CPU measured", "-"),
            (f"encode {what}: msgspec.json.encode", f"{got['msgspec']:.2f} ms CPU measured", "-"),
        ]
    return rows


def _child(code: str, runs: int) -> list[float]:
    """The median of each number the child prints, over ``runs`` fresh interpreters."""
    out = []
    for _ in range(runs):
        proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
        out.append([float(x) for x in proc.stdout.split()])
    return [statistics.median(o[i] for o in out) for i in range(len(out[0]))]


def import_rows(runs: int) -> list[tuple[str, str, str]]:
    (model,) = _child(_MODEL, runs)
    (dataclasses_s,) = _child(_DATACLASSES, runs)
    (msgspec_s,) = _child(_MSGSPEC, runs)
    plain, structs, classes = _child(_CREATE, runs)
    cpu = "ms CPU measured"
    return [
        ("import topology.model._entities (the records, plain slotted classes)", f"{model * MS:.2f} {cpu}",
         "what discovery pays"),
        ("import dataclasses (and inspect) alone", f"{dataclasses_s * MS:.2f} {cpu}", "not paid: no dataclass"),
        (f"create the model's {int(classes)} records again: dataclasses", f"{plain * MS:.2f} {cpu}",
         "the model until issue 52"),
        (f"create the model's {int(classes)} records again: msgspec.Struct", f"{structs * MS:.2f} {cpu}", "-"),
        ("import msgspec alone", f"{msgspec_s * MS:.2f} {cpu}", "what msgspec would add first"),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--gpus", default="8,72", help="snapshot sizes (8, or multiples of 8)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = snapshots([int(n) for n in args.gpus.split(",")], Path(tmp))
    rows = codec_rows(data, args.runs) + import_rows(args.runs)
    print_rows(rows, value_width=24)


if __name__ == "__main__":
    main()
