"""A fake CuPy for the tests: the part of CuPy's API the cuda backend uses, over a simulated machine
(``_machine``) with device memory in host RAM, streams, events, graph capture, peer access with CUDA's
limit of 8 mapped peers per device, NCCL in one process, and the probe kernels run in Python.

It is put on the probe child's ``PYTHONPATH`` by the tests only; it is never installed. Numbers measured
through it are labelled ``simulated`` (``TOPOLINK_SIMULATION``), and tests assert behaviour, not speed.
"""

from __future__ import annotations

import numpy as np

from . import cuda
from ._array import arange, asarray, count_nonzero, ndarray, searchsorted
from ._kernels import RawKernel, RawModule
from ._machine import MACHINE

__version__ = "0.0+fake"
TOPOLINK_SIMULATION = "the fake CUDA runtime of the tests (tests/fakecuda): device memory in host RAM, a made-up clock"
float32 = np.float32
int64 = np.int64


def TOPOLINK_HOST_CLOCK() -> float:  # noqa: N802 - the name the probes look for
    """The simulated host's clock (seconds), in the time base of the simulated GPUs' events."""
    return MACHINE.host


__all__ = ["TOPOLINK_HOST_CLOCK", "TOPOLINK_SIMULATION", "RawKernel", "RawModule", "arange", "asarray",
           "count_nonzero", "cuda", "float32", "int64", "ndarray", "searchsorted"]
