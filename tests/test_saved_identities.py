"""Saved documents are held to the rules discovery keeps (issue 48, item 4): two GPUs with one UUID, one minor
or one bus id, a PCIe link whose ends are not the function and its parent, or whose numbers are not the
function's link state, are refused by the reader with the field named (``topo --from`` exits 3), on every
machine profile, for every GPU and every PCIe link, not one example each."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.serve_machines import discover_profile
from tests.test_from_file import topo_from
from topology import SchemaError, from_dict, to_dict

PROFILES = ("hgx-h100", "gb200-tray", "dgx1-v100", "gh200")


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    out = {}
    for name in PROFILES:
        out[name] = to_dict(discover_profile(name, tmp_path_factory.mktemp(name))[0])
    return out


def _refused(doc: dict[str, Any], field: str) -> str:
    with pytest.raises(SchemaError) as refused:
        from_dict(doc)
    message = str(refused.value)
    assert field in message and "\n" not in message, message
    return message


def _edits(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any], str]]:
    """(what, edited document, the field the refusal must name) for every GPU and every PCIe link."""
    out = []
    gpus = doc["gpus"]
    for i in range(1, len(gpus)):
        for field in ("uuid", "minor"):
            if gpus[i].get(field) is not None and gpus[0].get(field) is not None:
                d = copy.deepcopy(doc)
                d["gpus"][i][field] = d["gpus"][0][field]
                out.append((f"gpus[{i}].{field} = gpus[0]'s", d, "snapshot.gpus["))
    pcie = [i for i, lk in enumerate(doc["links"]) if lk["kind"] == "pcie"]
    parents = sorted({doc["links"][i]["b"] for i in pcie})
    for i in pcie:
        link = doc["links"][i]
        other = next((p for p in parents if p != link["b"]), None)
        if other is not None:
            d = copy.deepcopy(doc)
            d["links"][i]["b"] = other
            out.append((f"links[{i}].b another port", d, f"snapshot.links[{i}]"))
        if link.get("pcie") and link["pcie"].get("current_width"):
            d = copy.deepcopy(doc)
            d["links"][i]["pcie"]["current_width"] = 1 if link["pcie"]["current_width"] != 1 else 2
            out.append((f"links[{i}].pcie another width", d, f"snapshot.links[{i}]"))
    return out


@pytest.mark.parametrize("name", PROFILES)
def test_duplicated_identities_and_links_not_what_they_name_are_refused(docs: dict[str, dict[str, Any]],
                                                                         name: str) -> None:
    doc = docs[name]
    from_dict(copy.deepcopy(doc))  # the clean document reads
    edits = _edits(doc)
    assert len(edits) >= 4, f"{name}: too few edits to prove anything"
    for what, edited, field in edits:
        try:
            _refused(edited, field)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {what}: {exc}") from exc
        except pytest.fail.Exception as exc:
            raise AssertionError(f"{name}: {what} was read as whole") from exc


def test_topo_from_exits_3_naming_the_field(docs: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    doc = copy.deepcopy(docs["hgx-h100"])
    doc["gpus"][3]["uuid"] = doc["gpus"][1]["uuid"]
    saved = tmp_path / "snap.json"
    saved.write_text(json.dumps(doc))
    r = topo_from(str(saved))
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert "snapshot.gpus[3].uuid" in r.stderr and "Traceback" not in r.stderr, r.stderr
