"""The cuda backend: CuPy runtime calls, CUDA events, RawKernel latch, SM copy, check and pointer chase,
NCCL in one process, perftest for GPUDirect RDMA. Importing this module needs no GPU and no CuPy:
everything CUDA is loaded inside functions, in the probe's child process, once per pass."""

from __future__ import annotations

from typing import Any

from topology import BadPciAddress, canonical_bdf

from ..core import (
    COLLECTIVES,
    CUDA_SPECS,
    GDR_TEST,
    SM_TESTS,
    Capabilities,
    Device,
    Item,
    Kind,
    Pairs,
    Session,
    Waived,
    busy_of,
    read_busy,
    spec,
)
from ._kernels import compile_kernels
from ._perftest import PerftestSession, find_perftest, perftest_unavailable
from ._runtime import cupy, load_nccl

_KERNEL_TESTS = ("host_device_latency_sm", "device_to_device_latency_sm", *SM_TESTS)
SIMULATION_MARK = "TOPOLINK_SIMULATION"  # set by a test double of CuPy: why its clock is not a GPU's


class CudaBackend:
    name = "cuda"

    def __init__(self) -> None:
        self._versions: Pairs = ()
        self._kernels: Any = None
        self._kernel_error = ""
        self._probed = False
        self.simulated = ""

    def versions(self) -> Pairs:
        return self._versions

    def capabilities(self) -> Capabilities:
        tests = tuple(s.name for s in CUDA_SPECS)
        busy = read_busy()  # before CUDA starts: our own context must not count
        try:
            cp = cupy()
        except Waived as exc:
            return Capabilities(backend=self.name, tests=tests, error=str(exc))
        self.simulated = str(getattr(cp, SIMULATION_MARK, ""))
        rt = cp.cuda.runtime
        try:
            count = rt.getDeviceCount()
        except rt.CUDARuntimeError as exc:
            return Capabilities(backend=self.name, tests=tests, error=f"no usable CUDA device: {exc}")
        devices: list[Device] = []
        for d in range(count):
            try:
                bus = canonical_bdf(rt.deviceGetPCIBusId(d))
            except (rt.CUDARuntimeError, BadPciAddress):
                continue
            name = rt.getDeviceProperties(d).get("name", b"")
            devices.append(Device(id=bus, ordinal=d, name=name.decode() if isinstance(name, bytes) else str(name),
                                  busy=busy_of(busy, bus)))
        peers = tuple((a.id, b.id) for a in devices for b in devices
                      if a.ordinal != b.ordinal and rt.deviceCanAccessPeer(a.ordinal, b.ordinal))
        unavailable = self._probe_optional(cp)
        return Capabilities(backend=self.name, tests=tests, devices=tuple(devices), peer_pairs=peers,
                            unavailable=unavailable, versions=self._versions)

    def _probe_optional(self, cp: Any) -> Pairs:
        self._probed = True
        rt = cp.cuda.runtime
        versions = [("cupy", cp.__version__), ("cuda_runtime", str(rt.runtimeGetVersion())),
                    ("cuda_driver", str(rt.driverGetVersion()))]
        unavailable: list[tuple[str, str]] = []
        if self.kernels(cp) is None:  # NVRTC missing or broken: CE copies run without the latch
            unavailable += [(t, self._kernel_error) for t in _KERNEL_TESTS]
        nccl, why = load_nccl()
        if nccl is None:
            unavailable += [(t, why) for t in COLLECTIVES]
        else:
            versions.append(("nccl", str(nccl.get_version())))
        perftest = find_perftest()
        missing = perftest_unavailable(perftest)
        if missing:
            unavailable.append((GDR_TEST, missing))
        elif perftest is not None:
            versions.append(("perftest", perftest.version or perftest.path))
        self._versions = tuple(versions)
        return tuple(unavailable)

    def kernels(self, cp: Any) -> Any | None:
        """The compiled latch, copy, check and pointer-chase kernels, or None when NVRTC cannot build them."""
        if self._kernels is None and not self._kernel_error:
            try:
                self._kernels = compile_kernels(cp)
            except Exception as exc:
                self._kernel_error = f"NVRTC could not compile the probe kernels: {exc}"
        return self._kernels

    def open(self, item: Item) -> Session:
        cp = cupy()
        if not self._probed:
            self.simulated = str(getattr(cp, SIMULATION_MARK, ""))
            self._probe_optional(cp)
        kind = spec("cuda", item.test).kind
        if kind is Kind.COPY:
            from ._copy import CopySession

            return CopySession(cp, item, self.kernels(cp), self._kernel_error)
        if kind is Kind.LATENCY:
            from ._latency import LatencySession

            kernels = self.kernels(cp)
            if kernels is None:
                raise Waived(self._kernel_error)
            return LatencySession(cp, item, kernels)
        if kind is Kind.COLLECTIVE:
            from ._nccl import NcclSession

            return NcclSession(cp, item, self.kernels(cp))
        return PerftestSession(item)
