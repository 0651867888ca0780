"""``cupy.cuda.memory`` of the fake: raw device memory handles and the out-of-memory error."""

from __future__ import annotations

from typing import Any


class OutOfMemoryError(MemoryError):
    pass


class UnownedMemory:
    def __init__(self, ptr: int, size: int, owner: Any, device_id: int | None = None) -> None:
        del owner, device_id
        self.ptr, self.size = ptr, size


class MemoryPointer:
    def __init__(self, mem: UnownedMemory, offset: int) -> None:
        self.mem, self.ptr = mem, mem.ptr + offset
