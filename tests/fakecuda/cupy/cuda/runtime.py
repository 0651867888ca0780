"""``cupy.cuda.runtime`` of the fake: the calls the probes make, with CUDA's error codes."""

from __future__ import annotations

import ctypes
from types import SimpleNamespace
from typing import Any

from .._machine import MACHINE, MAX_PEERS, CUDARuntimeError, Op, Stream

__all__ = ["CUDARuntimeError"]

streamCaptureModeRelaxed = 2  # noqa: N816 - CuPy's names
_CLOCK_KHZ = 1_000_000
_SMS = 4


def _dev() -> int:
    return MACHINE.current_device[-1]


def _check_device(d: int) -> None:
    if not 0 <= d < MACHINE.count:
        raise CUDARuntimeError(101, f"invalid device ordinal {d}")


def getDeviceCount() -> int:  # noqa: N802
    return MACHINE.count


def getDevice() -> int:  # noqa: N802
    return _dev()


def deviceGetPCIBusId(d: int) -> str:  # noqa: N802
    _check_device(d)
    return MACHINE.buses[d].upper()


def getDeviceProperties(d: int) -> dict[str, Any]:  # noqa: N802
    _check_device(d)
    return {"name": b"Fake GPU", "multiProcessorCount": _SMS, "totalGlobalMem": MACHINE.memory}


def deviceGetAttribute(attr: int, d: int) -> int:  # noqa: N802
    _check_device(d)
    return {13: _CLOCK_KHZ, 16: _SMS}.get(attr, 0)


def runtimeGetVersion() -> int:  # noqa: N802
    return 13000


def driverGetVersion() -> int:  # noqa: N802
    return 13000


def deviceCanAccessPeer(a: int, b: int) -> int:  # noqa: N802
    _check_device(a)
    _check_device(b)
    return int(MACHINE.peers_possible and a != b)


def deviceEnablePeerAccess(peer: int, flags: int = 0) -> None:  # noqa: N802
    dev = _dev()
    if not deviceCanAccessPeer(dev, peer):
        raise CUDARuntimeError(217, "peer access is not supported between these devices")
    if peer in MACHINE.peers[dev]:
        raise CUDARuntimeError(704, "peer access is already enabled")
    limited = [p for p in MACHINE.peers[dev] if MACHINE.limited(dev, p)]
    if MACHINE.limited(dev, peer) and len(limited) >= MAX_PEERS:
        MACHINE.log("peer_refused", device=dev, peer=peer, mapped=sorted(MACHINE.peers[dev]))
        raise CUDARuntimeError(711, "cudaErrorTooManyPeers")
    MACHINE.peers[dev].add(peer)
    MACHINE.log("peer_enable", device=dev, peer=peer, mapped=len(MACHINE.peers[dev]))


def deviceDisablePeerAccess(peer: int) -> None:  # noqa: N802
    dev = _dev()
    if peer not in MACHINE.peers[dev]:
        raise CUDARuntimeError(705, "peer access has not been enabled")
    MACHINE.peers[dev].discard(peer)
    MACHINE.log("peer_disable", device=dev, peer=peer, mapped=len(MACHINE.peers[dev]))


def malloc(size: int) -> int:
    return MACHINE.malloc(_dev(), size)


def free(ptr: int) -> None:
    MACHINE.free(ptr)


def deviceSynchronize() -> None:  # noqa: N802
    MACHINE.drain()


def memcpy(dst: int, src: int, size: int, kind: int) -> None:
    del kind  # the addresses say (unified addressing)
    a, b = MACHINE.find(dst, size), MACHINE.find(src, size)
    if a is not None and b is not None:  # device to device: queued on the legacy stream, the host not waiting
        MACHINE.enqueue(MACHINE.legacy(a.device), MACHINE.copy_op(dst, src, size, MACHINE.kind(dst, src, size)))
        return
    MACHINE.drain()
    MACHINE.write(dst, MACHINE.read(src, size))


def memset(ptr: int, value: int, size: int) -> None:
    MACHINE.drain()
    ctypes.memset(MACHINE.address(ptr, size), value, size)


def memsetAsync(ptr: int, value: int, size: int, stream: int) -> None:  # noqa: N802
    def run(s: Stream) -> None:
        ctypes.memset(MACHINE.address(ptr, size), value, size)

    MACHINE.enqueue(MACHINE.stream(stream), Op("memset", run))


def memcpyAsync(dst: int, src: int, size: int, kind: int, stream: int) -> None:  # noqa: N802
    del kind
    s = MACHINE.stream(stream)
    MACHINE.launch()
    how = MACHINE.kind(dst, src, size)
    if how == "peer":  # which context issued it: the current device's, and the stream's device
        MACHINE.log("memcpy_peer", api="cudaMemcpyAsync", current=MACHINE.current_device[-1], stream=s.device)
    MACHINE.enqueue(s, MACHINE.copy_op(dst, src, size, how))


def memcpyPeerAsync(dst: int, dst_dev: int, src: int, src_dev: int, size: int, stream: int) -> None:  # noqa: N802, PLR0917
    for ptr, dev in ((dst, dst_dev), (src, src_dev)):
        alloc = MACHINE.find(ptr, size)
        if alloc is None or alloc.device != dev:
            raise CUDARuntimeError(1, f"{ptr:#x} is not memory of GPU {dev}")
    MACHINE.log("memcpy_peer", api="cudaMemcpyPeerAsync", current=MACHINE.current_device[-1],
                stream=MACHINE.stream(stream).device)
    MACHINE.launch()
    MACHINE.enqueue(MACHINE.stream(stream), MACHINE.copy_op(dst, src, size, MACHINE.kind(dst, src, size)))


def hostRegister(ptr: int, size: int, flags: int) -> None:  # noqa: N802
    del flags
    if MACHINE.mapped(ptr, size):
        raise CUDARuntimeError(712, "host memory already registered")
    MACHINE.host_ranges[ptr] = size
    MACHINE.log("host_register", size=size)


def hostUnregister(ptr: int) -> None:  # noqa: N802
    if MACHINE.host_ranges.pop(ptr, None) is None:
        raise CUDARuntimeError(713, "host memory not registered")


def hostAlloc(size: int, flags: int) -> int:  # noqa: N802
    del flags
    buf = ctypes.create_string_buffer(size)
    ptr = ctypes.addressof(buf)
    MACHINE.host_keep[ptr] = buf
    MACHINE.host_ranges[ptr] = size
    return ptr


def freeHost(ptr: int) -> None:  # noqa: N802
    MACHINE.host_keep.pop(ptr)
    MACHINE.host_ranges.pop(ptr)


def pointerGetAttributes(ptr: int) -> Any:  # noqa: N802
    if MACHINE.find(ptr, 1) is None and not MACHINE.mapped(ptr, 1):
        raise CUDARuntimeError(1, "not a CUDA pointer")
    return SimpleNamespace(devicePointer=ptr)


def current_stream() -> Stream:
    s = MACHINE.current_stream[-1]
    if s is None:
        raise RuntimeError("fake CUDA: a launch on the legacy default stream (the probes never use it)")
    return s
