"""Small modules with one job: none of the packages' modules is over 300 lines (split by job above that)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("topology", "agent", "probes", "exporter")
MAX_LINES = 300


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_over_the_limit(package: str) -> None:
    too_long = {str(p.relative_to(REPO)): n for p in sorted((REPO / package).rglob("*.py"))
                if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert too_long == {}
