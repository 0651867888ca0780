"""The bytes a copy moves and how a copy is checked: a random pattern repeated over the source buffer,
compared with the destination by libc ``memcmp`` (never timed)."""

from __future__ import annotations

import ctypes
import os

PATTERN_BYTES = 2 * 1024 * 1024
_libc_memcmp = ctypes.CDLL(None).memcmp
_libc_memcmp.restype = ctypes.c_int
_libc_memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]


def fill_pattern(ptr: int, size: int, seed: bytes | None = None) -> None:
    """A random 2 MiB pattern repeated over the buffer: a copy that moved nothing cannot pass the check."""
    pattern = seed or os.urandom(min(size, PATTERN_BYTES))
    for off in range(0, size, len(pattern)):
        ctypes.memmove(ptr + off, pattern, min(len(pattern), size - off))


def same_bytes(a: int, b: int, size: int) -> bool:
    return bool(_libc_memcmp(a, b, size) == 0)
