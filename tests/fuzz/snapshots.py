"""Broken saved snapshots for ``topolink topo --from``: any of them must give exit 3 and one clear line."""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .physics_cases import RULES

Doc = dict[str, Any]


@dataclass(frozen=True)
class BrokenSnapshot:
    kind: str
    data: bytes
    strict: bool = True  # False: a valid (if odd) snapshot: exit 0 or 1 is fine too

    def __str__(self) -> str:
        return f"snapshot {self.kind} ({len(self.data)} bytes)"


def _doc_edit(fn: Callable[[Doc, random.Random], None]) -> Callable[[Doc, random.Random], bytes]:
    def edit(doc: Doc, rng: random.Random) -> bytes:
        d = copy.deepcopy(doc)
        fn(d, rng)
        return json.dumps(d).encode()
    return edit


def _pick(items: list[Any], rng: random.Random) -> Any:
    return items[rng.randrange(len(items))]


@_doc_edit
def _duplicate_gpu(d: Doc, rng: random.Random) -> None:
    d["gpus"].append(copy.deepcopy(_pick(d["gpus"], rng)))


@_doc_edit
def _ragged_matrix(d: Doc, rng: random.Random) -> None:
    m = _pick(d["matrices"], rng)
    _pick(m["values"], rng).pop()


@_doc_edit
def _matrix_ids_mismatch(d: Doc, rng: random.Random) -> None:
    m = _pick(d["matrices"], rng)
    m["ids"] = m["ids"][:-1]


@_doc_edit
def _negative_link_count(d: Doc, rng: random.Random) -> None:
    links = [lk for lk in d["links"] if lk["kind"] == "nvlink"] or d["links"]
    _pick(links, rng)["count"] = rng.choice([-20, -1, -(2**40)])


@_doc_edit
def _unknown_unit(d: Doc, rng: random.Random) -> None:
    _pick(d["matrices"], rng)["unit"] = rng.choice(["furlongs_per_fortnight", "", "GB/s"])


@_doc_edit
def _huge_number(d: Doc, rng: random.Random) -> None:
    target = rng.choice(["memory", "count", "index", "numa"])
    if target == "memory":
        _pick(d["gpus"], rng)["memory_bytes"] = 10**400
    elif target == "count":
        _pick(d["links"], rng)["count"] = 10**400
    elif target == "index":
        _pick(d["gpus"], rng)["index"] = 2**64
    else:
        _pick(d["numa_nodes"], rng)["os_index"] = 10**30


@_doc_edit
def _link_to_nowhere(d: Doc, rng: random.Random) -> None:
    _pick(d["links"], rng)["b"] = "0000:ee:00.0"


@_doc_edit
def _unknown_aspect(d: Doc, rng: random.Random) -> None:
    d["problems"].append({"source": "pci", "subject": "node", "message": "x",
                          "unknown": [{"subject": "node", "aspect": "telepathy"}]})


@_doc_edit
def _wrong_type(d: Doc, rng: random.Random) -> None:
    choice = rng.randrange(3)
    if choice == 0:
        d["gpus"] = {}
    elif choice == 1:
        _pick(d["gpus"], rng)["index"] = "0"
    else:
        d["links"] = None


@_doc_edit
def _reference_to_nowhere(d: Doc, rng: random.Random) -> None:
    """An id the snapshot does not hold: a function's parent, a NIC's function, a GPU's NUMA node."""
    choice = rng.randrange(3)
    if choice == 0 or not d["gpus"]:
        _pick(d["pci"], rng)["parent"] = "0000:ee:00.0"
    elif choice == 1 and any(n["pci_bus_id"] for n in d["nics"]):
        _pick([n for n in d["nics"] if n["pci_bus_id"]], rng)["pci_bus_id"] = "0000:ee:00.0"
    else:
        _pick(d["gpus"], rng)["numa_node"] = 4000


@_doc_edit
def _one_function_two_devices(d: Doc, rng: random.Random) -> None:
    if d["nics"] and d["gpus"]:
        _pick(d["nics"], rng)["pci_bus_id"] = _pick(d["gpus"], rng)["id"]
    else:
        d["gpus"].append(dict(_pick(d["gpus"], rng), index=None))


def _over_limit(doc: Doc, rng: random.Random) -> bytes:
    import topology

    field = rng.choice(sorted(topology.SNAPSHOT_LIMITS))
    return json.dumps({**doc, field: [{}] * (topology.SNAPSHOT_LIMITS[field] + 1)}).encode()


def _repeated_key(doc: Doc, rng: random.Random) -> bytes:
    text = json.dumps(doc)
    return text.replace('"node": ', '"node": "elsewhere", "node": ', 1).encode()


def _nan(doc: Doc, rng: random.Random) -> bytes:
    text = json.dumps(doc)
    return text.replace('"values": [[', '"values": [[NaN, ' if rng.random() < 0.5 else '"values": [[Infinity, ',
                        1).encode()


def _float_overflow(doc: Doc, rng: random.Random) -> bytes:
    text = json.dumps(doc)
    key = rng.choice(['"memory_bytes": ', '"rate_gbps": ', '"bytes_per_second": '])
    return re.sub(f"({key})[^,}}\\]]+", r"\g<1>1e999", text, count=1).encode()


def _truncated(doc: Doc, rng: random.Random) -> bytes:
    text = json.dumps(doc, indent=2).encode()
    return text[: rng.randrange(1, len(text) - 1)]


def _random_bytes(doc: Doc, rng: random.Random) -> bytes:
    return bytes(rng.randrange(256) for _ in range(rng.randint(0, 4096)))


def _deep_nesting(doc: Doc, rng: random.Random) -> bytes:
    depth = rng.choice([1000, 100_000, 1_000_000])
    if rng.random() < 0.5:
        return b"[" * depth + b"]" * depth
    inner = "[" * depth + "]" * depth
    return json.dumps({**doc, "gpus": "@"}).replace('"@"', inner).encode()


def _not_utf8(doc: Doc, rng: random.Random) -> bytes:
    return json.dumps(doc).encode().replace(b'"node": "', b'"node": "\xff\xfe', 1)


def _huge_file(doc: Doc, rng: random.Random) -> bytes:
    return json.dumps(doc).encode() + b" " * (80 * 1024 * 1024)


EDITS: dict[str, Callable[[Doc, random.Random], bytes]] = {
    "truncated": _truncated, "random-bytes": _random_bytes, "deep-nesting": _deep_nesting,
    "duplicate-gpu": _duplicate_gpu, "ragged-matrix": _ragged_matrix, "matrix-ids-mismatch": _matrix_ids_mismatch,
    "negative-link-count": _negative_link_count, "unknown-unit": _unknown_unit, "huge-number": _huge_number,
    "link-to-nowhere": _link_to_nowhere, "unknown-aspect": _unknown_aspect, "wrong-type": _wrong_type,
    "nan": _nan, "float-overflow": _float_overflow, "not-utf8": _not_utf8, "huge-file": _huge_file,
    "reference-to-nowhere": _reference_to_nowhere, "one-function-two-devices": _one_function_two_devices,
    "over-limit": _over_limit, "repeated-key": _repeated_key,
}
EDITS |= {kind: _doc_edit(edit) for kind, edit in RULES.items()}  # the rules live discovery keeps, on --from
_LENIENT = {"huge-file"}  # bounded input: refusing is right, reading it is acceptable


def broken_snapshots(doc: Doc, rng: random.Random, n: int) -> list[BrokenSnapshot]:
    """``n`` broken variants of a clean snapshot document, each kind once before any comes twice."""
    kinds = sorted(EDITS)
    rng.shuffle(kinds)
    out = []
    for i in range(n):
        kind = kinds[i % len(kinds)]
        out.append(BrokenSnapshot(kind, EDITS[kind](doc, rng), strict=kind not in _LENIENT))
    return out
