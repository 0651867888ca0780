"""``topology.with_measurements``: results join a snapshot as a new one; the newest of a kind wins."""

from __future__ import annotations

import math

import pytest

import topology as t


def m(value: float, *, size: int = 1, direction: str = "a->b") -> t.Measurement:
    return t.Measurement(test="host_memcpy", subjects=("numa0", "numa0"), direction=direction, value=value,
                         unit="bytes_per_second", source=t.Source.MEASURED, method="memcpy", size_bytes=size,
                         backend="cpu")


def test_join_replaces_the_same_kind_and_keeps_the_rest() -> None:
    base = t.Snapshot(node="n", measurements=(m(1.0), m(2.0, direction="b->a")))
    joined = t.with_measurements(base, [m(3.0, size=512)])
    assert base.measurements == (m(1.0), m(2.0, direction="b->a"))  # untouched
    assert joined.measurements == (m(2.0, direction="b->a"), m(3.0, size=512))
    assert t.structure_hash(joined) == t.structure_hash(base)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_value_that_is_not_a_number_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="not finite"):
        t.with_measurements(t.Snapshot(node="n"), [m(bad)])
