"""The standing fuzz suite: mutated real trees and machine profiles, faults of NVML and of files, an oracle over facts.

``tests/test_fuzz.py`` runs it; ``TOPOLINK_FUZZ_SEED`` and ``TOPOLINK_FUZZ_CASES`` choose the seed and size.
"""

from ._cases import Case, Result
from .oracle import diff, fact_values, leaked
from .runner import Suite

__all__ = ["Case", "Result", "Suite", "diff", "fact_values", "leaked"]
