"""The few ndarray operations the probes use on device memory (``fill``, ``!=``, ``count_nonzero``, item
assignment, ``arange`` and integer arithmetic), on numpy views of the fake's device memory. Each first
runs what is enqueued, as a synchronous call would wait for it."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._machine import MACHINE


class ndarray:  # noqa: N801 - CuPy's name
    def __init__(self, shape: tuple[int, ...], dtype: Any = np.float32, memptr: Any = None,
                 _host: Any = None) -> None:
        if _host is not None:
            self._a = _host
            return
        dt = np.dtype(dtype)
        count = int(np.prod(shape))
        alloc = MACHINE.find(memptr.ptr, count * dt.itemsize)
        if alloc is None:
            raise RuntimeError("fake CuPy: an ndarray over host memory")
        self.device = alloc.device
        self._a = np.frombuffer(alloc.data, dtype=dt, count=count, offset=memptr.ptr - alloc.base).reshape(shape)

    def fill(self, value: float) -> None:
        MACHINE.drain()
        self._a[...] = value

    def __ne__(self, other: object) -> ndarray:  # type: ignore[override]
        MACHINE.drain()
        return ndarray((), _host=self._a != _raw(other))

    def __eq__(self, other: object) -> ndarray:  # type: ignore[override]
        MACHINE.drain()
        return ndarray((), _host=self._a == _raw(other))

    def __setitem__(self, key: Any, value: Any) -> None:
        MACHINE.drain()
        self._a[key] = _raw(value)

    def __add__(self, other: Any) -> ndarray:
        return ndarray((), _host=self._a + _raw(other))

    __radd__ = __add__

    def __mul__(self, other: Any) -> ndarray:
        return ndarray((), _host=self._a * _raw(other))

    __rmul__ = __mul__

    def __sub__(self, other: Any) -> ndarray:
        return ndarray((), _host=self._a - _raw(other))

    def __rsub__(self, other: Any) -> ndarray:
        return ndarray((), _host=_raw(other) - self._a)

    def __mod__(self, other: Any) -> ndarray:
        return ndarray((), _host=self._a % _raw(other))

    def astype(self, dtype: Any) -> ndarray:
        return ndarray((), _host=self._a.astype(dtype))

    __hash__ = None  # type: ignore[assignment]


def _raw(value: Any) -> Any:
    return value._a if isinstance(value, ndarray) else value


def arange(start: int, stop: int, dtype: Any = np.int64) -> ndarray:
    return ndarray((), _host=np.arange(start, stop, dtype=dtype))


def asarray(values: Any, dtype: Any = None) -> ndarray:
    return ndarray((), _host=np.asarray(_raw(values), dtype=dtype))


def searchsorted(a: ndarray, v: Any, side: str = "left") -> ndarray:
    return ndarray((), _host=np.searchsorted(_raw(a), _raw(v), side=side))  # type: ignore[call-overload]


def count_nonzero(a: ndarray) -> int:
    return int(np.count_nonzero(a._a))
