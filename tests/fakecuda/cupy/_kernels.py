"""The probe kernels of the fake, run in Python when their stream reaches them: the latch (reads the host
flag: a latch still closed when the GPU reaches it has timed out, which the log records), the pointer
chase, the SM copy, the split-warp copy (whose launch must give one thread per word in blocks of at most
1024) with its clear, and the pattern check. Every address a kernel touches must be reachable from the GPU
it runs on: its own memory, mapped host memory, or a peer's with peer access enabled."""

from __future__ import annotations

import ctypes
import re
from typing import Any

import numpy as np

from ._machine import MACHINE, RATES, Op, Stream
from .cuda import runtime

_LATENCY_S = {"local": 0.3e-6, "host": 1.0e-6, "peer": 0.8e-6}


def _latch(s: Stream, flag: int, timeout_clocks: int) -> None:
    MACHINE.reachable(s.device, flag, 4)
    s.clock = max(s.clock, MACHINE.host)  # held until the host released it, before this synchronisation
    if int.from_bytes(MACHINE.read(flag, 4), "little") == 0:
        MACHINE.log("latch_timeout", device=s.device)
        s.clock += timeout_clocks / (runtime._CLOCK_KHZ * 1e3)


def _words(ptr: int, size: int) -> Any:
    return np.frombuffer(MACHINE.view(ptr, size), dtype=np.uint64)


def _chase(s: Stream, start: int, hops: int, target_block: int, sink: int) -> None:
    del target_block
    how = MACHINE.reachable(s.device, start, 8)
    alloc = MACHINE.find(start, 8)
    if alloc is not None:
        base, size = alloc.base, alloc.size
    else:
        base, size = next((b, n) for b, n in MACHINE.host_ranges.items() if b <= start < b + n)
    words = _words(base, size)
    p = start
    for _ in range(hops):
        p = int(words[(p - base) // 8])
        if not base <= p < base + size:
            raise runtime.CUDARuntimeError(700, f"the chase left its buffer at {p:#x}")
    MACHINE.reachable(s.device, sink, 8)
    MACHINE.write(sink, p.to_bytes(8, "little"))
    s.clock += hops * _LATENCY_S[how]


def _copy_sm(s: Stream, dst: int, src: int, words: int, loops: int) -> None:
    size = words * 16
    ways = {MACHINE.reachable(s.device, dst, size), MACHINE.reachable(s.device, src, size)}
    n = size - 1 if MACHINE.corrupt and size > 1 else size
    ctypes.memmove(MACHINE.address(dst, size), MACHINE.address(src, size), n)
    rate = RATES["peer"] if "peer" in ways else RATES["h2d"] if "host" in ways else RATES["local"]
    s.clock += loops * size / rate


def _copy_simple(s: Stream, grid: int, block: int, dst: int, src: int, loops: int) -> None:  # noqa: PLR0917
    if not 0 < block <= 1024:
        raise runtime.CUDARuntimeError(9, f"simple copy launch of {grid} x {block}: invalid configuration")
    _copy_sm(s, dst, src, grid * block, loops)  # one thread per 16-byte word: the grid is the copy


def _rows(ptr: int, words: int) -> Any:
    return np.frombuffer(MACHINE.view(ptr, words * 16), dtype=np.uint8).reshape(words, 16)


def _odd_warps(words: int) -> Any:
    return ((np.arange(words) // 32) & 1).astype(bool)


def _copy_split(s: Stream, grid: int, block: int, a: int, b: int, loops: int) -> None:  # noqa: PLR0917
    if not 0 < block <= 1024 or (grid > 1 and block % 32):
        raise runtime.CUDARuntimeError(9, f"split-warp launch of {grid} x {block}: invalid configuration")
    words = grid * block  # one thread per 16-byte word; past either buffer is an illegal address
    ways = {MACHINE.reachable(s.device, a, words * 16), MACHINE.reachable(s.device, b, words * 16)}
    rows_a, rows_b, odd = _rows(a, words), _rows(b, words), _odd_warps(words)
    if MACHINE.split_fault != "odd":  # FAKECUDA_SPLIT_FAULT=odd: the odd warps copy nothing
        rows_b[odd] = rows_a[odd]
    rows_a[~odd] = rows_b[~odd]
    rate = RATES["peer"] if "peer" in ways else RATES["h2d"] if "host" in ways else RATES["local"]
    s.clock += loops * words * 16 / rate


def _clear_warps(s: Stream, buf: int, words: int, odd: int) -> None:
    MACHINE.reachable(s.device, buf, words * 16)
    _rows(buf, words)[_odd_warps(words) == bool(odd)] = 0


def _check(s: Stream, buf: int, pattern: int, words: int, pattern_words: int, wrong: int) -> None:  # noqa: PLR0917
    for ptr, n in ((buf, words * 4), (pattern, pattern_words * 4), (wrong, 8)):
        MACHINE.reachable(s.device, ptr, n)
    have = np.frombuffer(MACHINE.view(buf, words * 4), dtype=np.uint32)
    want = np.frombuffer(MACHINE.view(pattern, pattern_words * 4), dtype=np.uint32)
    whole = words - words % pattern_words
    count = int(np.count_nonzero(have[:whole].reshape(-1, pattern_words) != want))  # period by period
    count += int(np.count_nonzero(have[whole:] != want[:words - whole]))
    count += int.from_bytes(MACHINE.read(wrong, 8), "little")
    MACHINE.write(wrong, count.to_bytes(8, "little"))


BODIES = {"topolink_latch": _latch, "topolink_chase": _chase, "topolink_copy_sm": _copy_sm,
          "topolink_copy_simple": _copy_simple, "topolink_copy_split": _copy_split,
          "topolink_clear_warps": _clear_warps, "topolink_check": _check}
GEOMETRY = ("topolink_copy_simple", "topolink_copy_split")  # kernels whose work is their launch's geometry


class RawKernel:
    def __init__(self, name: str) -> None:
        if name not in BODIES:
            raise RuntimeError(f"fake NVRTC: no body for kernel {name}")
        self.name = name

    def __call__(self, grid: tuple[int, ...], block: tuple[int, ...], args: tuple[Any, ...], **kwargs: Any) -> None:
        del kwargs
        stream = runtime.current_stream()
        if stream.device != MACHINE.current_device[-1]:
            raise runtime.CUDARuntimeError(400, "a kernel launched on another device's stream")
        values = tuple(int(a) for a in args)
        if self.name in GEOMETRY:
            values = (int(grid[0]), int(block[0]), *values)
        body = BODIES[self.name]
        MACHINE.log("kernel", name=self.name, device=stream.device, grid=int(grid[0]), block=int(block[0]))
        MACHINE.launch()
        MACHINE.enqueue(stream, Op(self.name, lambda s: body(s, *values)))


class RawModule:
    def __init__(self, code: str = "", **kwargs: Any) -> None:
        del kwargs
        if MACHINE.no_nvrtc:
            raise RuntimeError("fake NVRTC: libnvrtc.so.13 cannot be loaded")
        self.names = set(re.findall(r'extern "C" __global__ void (\w+)', code))

    def get_function(self, name: str) -> RawKernel:
        if name not in self.names:
            raise RuntimeError(f"fake NVRTC: {name} is not in the module")
        return RawKernel(name)


