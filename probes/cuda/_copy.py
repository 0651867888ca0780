"""Copies on CUDA, copy engine or SM kernel, timed with events on the issuing stream.

Per sample, as nvbandwidth: the destinations are reset, the latch kernel holds every stream, the warm-up
copies and the timed copies are enqueued behind it, the first stream records the start and the others
wait on it, then the host releases the latch; after the sample every destination is checked against the
pattern (untimed). Interfering copies (bidirectional host tests, all-to-host) run on their own streams in
the same window and are not reported. All-to-one and one-to-all time every copy together: the first
stream waits on every other stream's end and records the total end, and the bytes of all copies over
first start to total end is the one number (nvbandwidth's TOTAL_BW). Peer access is enabled both ways for
the item and disabled after it.
"""

from __future__ import annotations

import importlib
from typing import Any

from topology import format_cpulist

from ..core import Item, Pairs, Waived
from ._buffers import HOST_BUFFER_HOW, Buffer, Latch, Pattern, Timer
from ._kernels import SM_THREADS_PER_BLOCK, SM_WORD, sm_copy_bytes, sm_small, split_copy_bytes, split_geometry
from ._legs import Leg, is_total, legs, peer_pairs
from ._peers import PeerAccess
from ._runtime import ATTR_MULTIPROCESSOR_COUNT, MEMCPY_DEFAULT


class CopyWorkload:
    check_each_sample = True

    def __init__(self, session: CopySession, size: int) -> None:
        self.cp, self.session, self.legs = session.cp, session, session.legs
        self.buffers: list[tuple[Buffer, Buffer]] = []
        self.copied: list[int] = []  # bytes each leg moves per copy
        self.small: list[bool] = []  # an SM copy below 64 MiB: nvbandwidth's simple kernel, else its striding one
        try:
            for leg in self.legs:
                n = size * leg.scale
                src = Buffer(self.cp, leg.src, n)
                try:
                    dst = Buffer(self.cp, leg.dst, n)  # its own buffer, also for a local copy
                except BaseException:
                    src.close()
                    raise
                self.buffers.append((src, dst))
                sms = session.sms(leg.issuer.index or 0)
                self.copied.append(sm_copy_bytes(n, sms) if leg.engine == "sm"
                                   else split_copy_bytes(n) if leg.engine == "sm-split" else n)
                self.small.append(sm_small(n))
                session.pattern.fill(src, n)
        except BaseException:
            self.close()
            raise
        timed = [i for i, leg in enumerate(self.legs) if leg.timed]
        self.bytes_per_op = self.copied[timed[0]]  # timed legs are alike (SM counts of mixed GPUs aside)
        if self.legs[timed[0]].engine == "sm-split":
            self.bytes_per_op //= 2  # nvbandwidth: each direction taken as half of what the kernel moved
        self.channels = len(timed)
        self.timers = [Timer(self.cp, leg.issuer.index or 0) for leg in self.legs]
        self.total_end: Any = None
        if session.total:  # one channel: every copy's bytes over first start to last end
            self.bytes_per_op, self.channels = sum(self.copied), 1
            with self.cp.cuda.Device(self.timers[0].ordinal):
                self.total_end = self.cp.cuda.Event()

    def prepare(self) -> None:
        for i, (leg, n, (src, dst)) in enumerate(zip(self.legs, self.copied, self.buffers, strict=True)):
            if leg.engine != "sm-split":
                dst.clear()
                continue
            # both buffers are sources and destinations: the pattern where a warp reads, zero where one writes;
            # the fill and the clears in order on the copy's own stream (the clear must land on the fill)
            t = self.timers[i]
            self.session.pattern.fill(dst, n, t.stream)
            self._clear_warps(i, dst, n, odd=True)
            self._clear_warps(i, src, n, odd=False)
            t.stream.synchronize()

    def _clear_warps(self, i: int, buf: Buffer, n: int, *, odd: bool) -> None:
        np = importlib.import_module("numpy")  # a CuPy dependency
        assert self.session.kernels is not None
        kernel, t = self.session.kernels.get_function("topolink_clear_warps"), self.timers[i]
        with self.cp.cuda.Device(t.ordinal), t.stream:
            kernel((self.session.sms(t.ordinal),), (SM_THREADS_PER_BLOCK,),
                   (np.uint64(buf.device_ptr), np.uint64(n // SM_WORD), np.uint32(odd)))

    def _enqueue(self, i: int, count: int) -> None:
        if count <= 0:
            return
        rt, leg, (src, dst), t = self.cp.cuda.runtime, self.legs[i], self.buffers[i], self.timers[i]
        n = self.copied[i]
        if leg.engine == "sm-split":
            np = importlib.import_module("numpy")  # a CuPy dependency
            assert self.session.kernels is not None
            blocks, block = split_geometry(n)
            kernel = self.session.kernels.get_function("topolink_copy_split")
            with self.cp.cuda.Device(t.ordinal), t.stream:
                kernel((blocks,), (block,), (np.uint64(src.device_ptr), np.uint64(dst.device_ptr), np.uint64(count)))
            return
        if leg.engine == "sm" and self.small[i]:  # nvbandwidth's simple kernel: one thread per word
            np = importlib.import_module("numpy")  # a CuPy dependency
            assert self.session.kernels is not None  # the session waives SM copies without them
            blocks, block = split_geometry(n)
            kernel = self.session.kernels.get_function("topolink_copy_simple")
            with self.cp.cuda.Device(t.ordinal), t.stream:
                kernel((blocks,), (block,), (np.uint64(dst.device_ptr), np.uint64(src.device_ptr), np.uint64(count)))
            return
        if leg.engine == "sm":
            np = importlib.import_module("numpy")  # a CuPy dependency
            assert self.session.kernels is not None  # the session waives SM copies without them
            kernel = self.session.kernels.get_function("topolink_copy_sm")
            grid = self.session.sms(t.ordinal)
            with self.cp.cuda.Device(t.ordinal), t.stream:
                kernel((grid,), (SM_THREADS_PER_BLOCK,),
                       (np.uint64(dst.device_ptr), np.uint64(src.device_ptr), np.uint64(n // 16), np.uint64(count)))
            return
        # a peer copy too: cudaMemcpyAsync (cudaMemcpyDefault, unified addresses) with the issuing GPU current,
        # on its stream, as nvbandwidth's cuMemcpyAsync on the issuing context (never cudaMemcpyPeerAsync)
        for _ in range(count):
            rt.memcpyAsync(dst.ptr, src.ptr, n, MEMCPY_DEFAULT, t.stream.ptr)

    def sample(self, warmup: int, iters: int) -> tuple[float, ...]:
        cp, latch = self.cp, self.session.latch
        if latch:
            latch.arm()
        for i, t in enumerate(self.timers):
            with cp.cuda.Device(t.ordinal):
                if latch:
                    latch.hold(t.ordinal, t.stream)
                self._enqueue(i, warmup)
        first = self.timers[0]
        with cp.cuda.Device(first.ordinal):
            first.start.record(first.stream)
        for t in self.timers[1:]:
            with cp.cuda.Device(t.ordinal):
                t.stream.wait_event(first.start)  # every stream starts when the first does
                t.start.record(t.stream)
        for i, t in enumerate(self.timers):
            with cp.cuda.Device(t.ordinal):
                self._enqueue(i, iters)
                t.end.record(t.stream)
            if self.total_end is not None and i:
                with cp.cuda.Device(first.ordinal):
                    first.stream.wait_event(t.end)  # the first stream ends when every copy has
        if self.total_end is not None:
            with cp.cuda.Device(first.ordinal):
                self.total_end.record(first.stream)
        if latch:
            latch.release()
        for t in self.timers:
            t.stream.synchronize()
        if self.total_end is not None:
            return (cp.cuda.get_elapsed_time(first.start, self.total_end) / 1e3,)
        return tuple(cp.cuda.get_elapsed_time(t.start, t.end) / 1e3
                     for t, leg in zip(self.timers, self.legs, strict=True) if leg.timed)

    def verify(self) -> str | None:
        for i, (leg, (src, dst)) in enumerate(zip(self.legs, self.buffers, strict=True)):
            both = (dst, src) if leg.engine == "sm-split" else (dst,)  # the split copy writes into both
            problem = next((p for buf in both if (p := self.session.pattern.differs(buf, self.copied[i]))), None)
            if problem:
                what = "timed copy" if leg.timed else "interfering copy"
                return f"{what} {leg.src.id} -> {leg.dst.id}: {problem}"
        return None

    def close(self) -> None:
        for pair in self.buffers:
            for buf in pair:
                buf.close()
        self.buffers = []


_SM_ENGINE = {
    False: "SM kernel, nvbandwidth's striding copy from 64 MiB up (a block of 512 threads per SM, 16-byte words, "
           "twelve loads in flight per thread)",
    True: "SM kernel, nvbandwidth's simple copy below 64 MiB (one thread per 16-byte word, blocks of up to 1024)",
}


class CopySession:
    def __init__(self, cp: Any, item: Item, kernels: Any | None, kernel_error: str) -> None:
        self.cp, self.kernels = cp, kernels
        self.legs: tuple[Leg, ...] = legs(item.test, item.targets, item.background)
        self.total = is_total(item.test)
        if kernels is None and any(leg.engine.startswith("sm") for leg in self.legs):
            raise Waived(kernel_error)
        self._sms: dict[int, int] = {}
        self.peers = PeerAccess(cp)
        try:
            for a, b in peer_pairs(self.legs):
                self.peers.both_ways(a, b)  # before anything is timed; given back in close()
        except BaseException:
            self.peers.close()
            raise
        self.latch = Latch(cp, kernels) if kernels is not None else None
        self.pattern = Pattern(cp, kernels)
        timed = [leg for leg in self.legs if leg.timed]
        issuers = ", ".join(f"{leg.src.id}->{leg.dst.id} on GPU {leg.issuer.id}'s stream" for leg in timed)
        engine = {"sm": _SM_ENGINE[False],
                  "sm-split": "split-warp SM kernel (one thread per 16-byte word, odd warps copying one way and "
                              "even warps the other; half the bytes moved reported as each direction's)",
                  }.get(timed[0].engine, "copy engine (cudaMemcpyAsync, cudaMemcpyDefault, on the issuing GPU's "
                                         "stream with its context current: nvbandwidth's cuMemcpyAsync on the "
                                         "issuing context, peers too)")
        self._conditions: dict[str, str] = {
            "engine": f"{engine}, non-blocking streams",
            "issuers": issuers,
            "latch": "spin kernel on a host flag" if self.latch else f"none: {kernel_error}",
            "data_check": "every sample, every destination against the pattern, untimed",
        }
        if timed[0].engine == "sm-split":
            self._conditions["bidirectional"] = (
                "one figure for both directions (a<->b): half the bytes the kernel moved both ways over its time, "
                "nvbandwidth's estimate of either direction")
        if self.total:
            self._conditions["total"] = (
                f"all {len(self.legs)} copies at once, the bytes of all of them over the first start to the last "
                "end (nvbandwidth TOTAL_BW), not a per-link rate: "
                + ", ".join(f"{leg.src.id}->{leg.dst.id}" for leg in self.legs))
        others = [leg for leg in self.legs if not leg.timed]
        if others:
            twice = "the same size, both ways" if others[0].engine == "sm-split" else "twice the size"
            self._conditions["interference"] = (
                f"{len(others)} untimed copies of {twice} at the same time: "
                + ", ".join(f"{leg.src.id}->{leg.dst.id}" for leg in others))
        if peer_pairs(self.legs):
            self._conditions["peer_access"] = "enabled both ways for this item, disabled after it"
        hosts = [t for t in item.targets if t.kind == "host"]
        if hosts:
            self._conditions["host_cpus"] = format_cpulist(hosts[0].cpus) if hosts[0].cpus else "unbound"
            self._conditions["host_buffer"] = HOST_BUFFER_HOW

    def sms(self, ordinal: int) -> int:
        if ordinal not in self._sms:
            self._sms[ordinal] = int(self.cp.cuda.runtime.deviceGetAttribute(ATTR_MULTIPROCESSOR_COUNT, ordinal))
        return self._sms[ordinal]

    @property
    def conditions(self) -> Pairs:
        return tuple(self._conditions.items())

    def workload(self, size: int) -> CopyWorkload:
        work = CopyWorkload(self, size)
        timed = next(i for i, leg in enumerate(self.legs) if leg.timed)
        if self.legs[timed].engine == "sm":  # which of nvbandwidth's two kernels this size takes
            self._conditions["engine"] = f"{_SM_ENGINE[work.small[timed]]}, non-blocking streams"
        for (src, dst), leg in zip(work.buffers, self.legs, strict=True):
            for buf in (src, dst):
                if buf.host is not None and leg.timed:
                    self._conditions["host_placement"] = buf.host.placement.describe()
        return work

    def close(self) -> None:
        try:
            self.pattern.close()
            if self.latch:
                self.latch.close()
        finally:
            self.peers.close()
