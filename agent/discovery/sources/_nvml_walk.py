"""One NVML walk's bookkeeping: problems, lost GPUs, subjects, and the one way every call is asked."""

from __future__ import annotations

from collections.abc import Callable

from topology import NODE, Aspect, Fact, Problem, canonical_bdf, node_fact

from ..access import NvmlError, NvmlGpuLost, NvmlNotSupported
from ..access._nvml_port import NvmlPort
from ._nvml_facts import SOURCE

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a start-up cost)

if TYPE_CHECKING:
    from typing import Any, TypeVar

    T = TypeVar("T")


class Walk:
    def __init__(self, port: NvmlPort) -> None:
        self.port = port
        self.problems: list[Problem] = []
        self.lost: set[int] = set()
        self.probed: set[int] = set()  # GPUs asked nvmlDeviceGetIndex after a pair call said GPU_IS_LOST
        self.subjects: dict[int, str] = {}
        self._bus_ids: dict[str, str] = {}

    def bus_id(self, text: str) -> str:
        """``canonical_bdf``, remembered for the walk: the links of every GPU name the same few far ends.
        Raises BadPciAddress (not remembered) as it does."""
        bus_id = self._bus_ids.get(text)
        if bus_id is None:
            bus_id = self._bus_ids[text] = canonical_bdf(text)
        return bus_id

    def subject(self, gpu: int) -> str:
        return self.subjects.get(gpu, f"nvml:gpu{gpu}")

    def problem(self, subject: str, message: str, unknown: tuple[Fact, ...]) -> None:
        self.problems.append(Problem(source=SOURCE, subject=subject, message=message, unknown=unknown))

    def gpu_problem(self, gpu: int, message: str, *aspects: Aspect) -> None:
        subject = self.subject(gpu)
        unknown = tuple(Fact(subject=subject, aspect=a) for a in aspects)
        if gpu not in self.subjects:  # no bus id yet: the GPU cannot be named, so the GPU list is not known
            unknown += (node_fact(Aspect.GPUS),)
        self.problem(subject, message, unknown)

    def ask(self, gpu: int | None, aspect: Aspect, fn: Callable[..., T], *args: Any, optional: bool = False
            ) -> T | None:
        """One call ``fn(*args)`` for ``gpu`` (None: a system call, ``aspect`` then node-wide). Failures
        become problems naming ``aspect`` as unknown, and ``None``."""
        if gpu is not None and gpu in self.lost:
            return None
        try:
            return fn(*args)
        except NvmlGpuLost as exc:
            if gpu is not None:
                self.mark_lost(gpu, exc)
            else:
                self._failed(gpu, str(exc), aspect)
        except NvmlNotSupported as exc:
            if not optional:
                self._failed(gpu, str(exc), aspect)
        except NvmlError as exc:
            self._failed(gpu, str(exc), aspect)
        return None

    def _failed(self, gpu: int | None, message: str, aspect: Aspect) -> None:
        if gpu is None:
            self.problem(SOURCE, message, (Fact(subject=NODE, aspect=aspect),))
        else:
            self.gpu_problem(gpu, message, aspect)

    def mark_lost(self, gpu: int, exc: NvmlError) -> None:
        self.lost.add(gpu)
        self.gpu_problem(gpu, f"{exc}; the GPU is marked lost and asked nothing more", Aspect.ALL)
