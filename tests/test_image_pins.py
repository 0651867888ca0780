"""The documented pin pins: the overlay docs/operator.md shows (under ``<!-- pin-overlay -->``), put over every
shipped overlay and rendered by kubectl's own kustomize, names the registry's image by digest in every container
of every object; the entry the docs used to show (``name: topolink``, the name the base has already replaced)
changes nothing, which is why the name matters. Helm's ``image.digest`` is tested in tests/test_chart.py."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart_support import REPO, kustomize

OVERLAYS = sorted(p.name for p in (REPO / "daemonset/overlays").iterdir() if (p / "kustomization.yaml").exists())
DIGEST = "sha256:" + "5e" * 32
REGISTRY = "registry.example:5000/gpu"


def documented() -> str:
    text = (REPO / "docs/operator.md").read_text()
    found = re.search(r"<!-- pin-overlay -->\n```yaml\n(.*?)```", text, re.S)
    assert found, "docs/operator.md: no <!-- pin-overlay --> block"
    return found.group(1)


def _images(objects: list[dict[str, Any]]) -> set[str]:
    out = set()
    for obj in objects:
        spec = obj.get("spec", {}).get("template", {}).get("spec", {})
        out |= {c["image"] for c in [*spec.get("containers", []), *spec.get("initContainers", [])]}
    return out


def _render(kustomization: str, overlay: str, tmp_path: Path) -> set[str]:
    """As the docs lay it out: ``my-topolink/`` beside a copy of ``daemonset/`` (kustomize takes relative
    resources only), over ``overlay``."""
    shutil.copytree(REPO / "daemonset", tmp_path / "daemonset", ignore=shutil.ignore_patterns("chart", "image"))
    doc = yaml.safe_load(kustomization)
    assert doc["resources"] == ["../daemonset/overlays/default"]
    doc["resources"] = [f"../daemonset/overlays/{overlay}"]
    (tmp_path / "my-topolink").mkdir()
    (tmp_path / "my-topolink" / "kustomization.yaml").write_text(yaml.safe_dump(doc))
    return _images(kustomize(tmp_path / "my-topolink"))


def test_the_overlays_run_images() -> None:
    assert {"default", "nfd", "prune"} <= set(OVERLAYS)
    assert all(_images(kustomize(o)) == {"ghcr.io/topolink/topolink:0.1.0"} for o in OVERLAYS)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_documented_pin_names_the_digest_everywhere(overlay: str, tmp_path: Path) -> None:
    text = documented().replace("REGISTRY", REGISTRY).replace("sha256:DIGEST", DIGEST)
    assert _render(text, overlay, tmp_path) == {f"{REGISTRY}/topolink@{DIGEST}"}


def test_an_entry_by_the_bases_old_name_pins_nothing(tmp_path: Path) -> None:
    text = documented().replace("name: ghcr.io/topolink/topolink", "name: topolink")
    assert _render(text.replace("REGISTRY", REGISTRY).replace("sha256:DIGEST", DIGEST), "default", tmp_path) \
        == {"ghcr.io/topolink/topolink:0.1.0"}
