"""The seam between the runner and a backend: what it can do here, and how it allocates, runs and times.

A backend only allocates, runs N operations, times them with its own clock and synchronises. Warm-up
order, sample counts, statistics, verification order and results belong to the runner.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._errors import ProbeError
from ._model import Item

if TYPE_CHECKING:
    from topology import Snapshot

Pairs = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Device:
    id: str  # canonical PCI bus id, as in the snapshot
    ordinal: int  # the backend's own index (CUDA ordinal)
    name: str = ""
    busy: str = ""  # why the device is not idle; empty when it is


@dataclass(frozen=True, slots=True, kw_only=True)
class Capabilities:
    """What a backend found on this machine, asked once per run in a child process."""

    backend: str
    tests: tuple[str, ...] = ()  # the tests this backend implements
    devices: tuple[Device, ...] = ()
    peer_pairs: tuple[tuple[str, str], ...] = ()  # ordered (a, b): a can access b's memory
    unavailable: Pairs = ()  # (test, why it cannot run here)
    versions: Pairs = ()
    error: str = ""  # the backend as a whole cannot run here

    def device(self, gpu_id: str) -> Device | None:
        return next((d for d in self.devices if d.id == gpu_id), None)

    def why_unavailable(self, test: str) -> str | None:
        return self.error or next((why for t, why in self.unavailable if t == test), None)

    def peer(self, a: str, b: str) -> bool:
        return (a, b) in self.peer_pairs


def caps_to_dict(caps: Capabilities) -> dict[str, Any]:
    return asdict(caps)


def caps_from_dict(d: Mapping[str, Any]) -> Capabilities:
    def pairs(key: str) -> Pairs:
        return tuple((str(a), str(b)) for a, b in d.get(key, ()))

    return Capabilities(
        backend=d["backend"], tests=tuple(d.get("tests", ())),
        devices=tuple(Device(**dev) for dev in d.get("devices", ())),
        peer_pairs=pairs("peer_pairs"), unavailable=pairs("unavailable"), versions=pairs("versions"),
        error=d.get("error", ""),
    )


class Workload(Protocol):
    """Buffers of one size, allocated and filled; ``channels`` timed at once (2 when bidirectional), or one
    after the other (a collective's out-of-place and in-place runs)."""

    bytes_per_op: int
    channels: int
    check_each_sample: bool  # nvbandwidth checks the data after every sample; nccl-tests once per size

    def prepare(self) -> None:
        """Before each sample, untimed: reset what a sample writes, so that its check proves its own work."""
        ...

    def sample(self, warmup: int, iters: int) -> tuple[float, ...]:
        """Run ``warmup`` untimed then ``iters`` timed operations per channel; seconds per channel."""
        ...

    def verify(self) -> str | None:
        """Check the data moved (never timed): None when right, else what was wrong."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class ModeTimed(Protocol):
    """A workload that may time a channel in one of several ways (an NCCL cell: graph launches or the
    stream) and says, after each sample, how each channel of it was timed."""

    last_timing: tuple[str, ...]  # per channel, of the sample just taken


class Session(Protocol):
    """What one item keeps across its sizes: peer access, communicators, rank processes."""

    @property
    def conditions(self) -> Pairs: ...

    def workload(self, size: int) -> Workload: ...

    def close(self) -> None: ...


class Backend(Protocol):
    name: str
    simulated: str  # why its clock is not real hardware's (a test double); empty on real hardware

    def capabilities(self) -> Capabilities: ...

    def versions(self) -> Pairs: ...

    def open(self, item: Item) -> Session:
        """Raise :class:`Waived` when the item cannot run here, :class:`MemoryError` when out of memory."""
        ...


_BACKENDS = {"cpu": "probes.cpu:CpuBackend", "cuda": "probes.cuda:CudaBackend"}
BACKENDS = tuple(_BACKENDS)


def load_backend(name: str) -> Backend:
    """A backend by name (``cpu``, ``cuda``) or by ``module:factory`` for one outside this package."""
    spec = _BACKENDS.get(name, name)
    module, _, attr = spec.partition(":")
    if not attr:
        raise ProbeError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    factory = getattr(importlib.import_module(module), attr)
    backend: Backend = factory()
    return backend


def choose_backend(requested: str, snap: Snapshot) -> str:
    """``auto``: cuda when the snapshot has GPUs and CuPy is installed, else cpu."""
    if requested != "auto":
        return requested
    return "cuda" if snap.gpus and importlib.util.find_spec("cupy") is not None else "cpu"
