"""How many examples each property (Hypothesis) test draws: the standing budget, which keeps the whole suite
within its 25 minutes on a 2-core machine, and the nightly's, several times larger, with ``TOPOLINK_NIGHTLY=1``
(CONTRIBUTING.md: Tests). Each test states both where it is declared: ``@settings(max_examples=examples(60, 600))``."""

from __future__ import annotations

import os

__all__ = ["NIGHTLY", "examples"]

NIGHTLY = os.environ.get("TOPOLINK_NIGHTLY") == "1"


def examples(standing: int, nightly: int) -> int:
    """``standing`` examples in the standing run, ``nightly`` with ``TOPOLINK_NIGHTLY=1``."""
    return nightly if NIGHTLY else standing
