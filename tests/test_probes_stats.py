"""Statistics per set of samples: median, p5, p95 (linear interpolation) and coefficient of variation."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from probes import summarize
from probes.core._stats import percentile


def test_known_values() -> None:
    s = summarize([10.0, 20.0, 30.0, 40.0, 50.0])
    assert s.median == 30.0
    assert s.p5 == pytest.approx(12.0)  # rank 0.2 between 10 and 20
    assert s.p95 == pytest.approx(48.0)
    assert s.cv == pytest.approx(statistics.stdev([10, 20, 30, 40, 50]) / 30.0)
    assert s.samples == (10.0, 20.0, 30.0, 40.0, 50.0)


def test_order_of_samples_kept_but_not_used() -> None:
    s = summarize([3.0, 1.0, 2.0])
    assert s.samples == (3.0, 1.0, 2.0)
    assert (s.median, s.p5, s.p95) == (2.0, pytest.approx(1.1), pytest.approx(2.9))


def test_one_sample_has_no_spread() -> None:
    s = summarize([7.5])
    assert (s.median, s.p5, s.p95, s.cv) == (7.5, 7.5, 7.5, 0.0)


@pytest.mark.parametrize("bad", [[], [1.0, math.nan], [math.inf]])
def test_refuses_what_is_not_a_set_of_numbers(bad: list[float]) -> None:
    with pytest.raises(ValueError):
        summarize(bad)


def test_percentile_bounds() -> None:
    with pytest.raises(ValueError):
        percentile([1.0], 101)


@given(st.lists(st.floats(min_value=1e-6, max_value=1e12), min_size=1, max_size=50))
def test_ordering_invariants(values: list[float]) -> None:
    s = summarize(values)
    eps = 1e-9 * max(values)  # interpolation may round by an ulp
    assert min(values) - eps <= s.p5 <= s.median + eps
    assert s.median - eps <= s.p95 <= max(values) + eps
    assert s.cv >= 0
