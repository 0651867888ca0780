"""One fuzz case, a tree's clean run, and what a case came to."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from topology import Snapshot

from . import _exec, mutators
from ._checks import Clean
from ._targets import Targets
from ._trees import BaseTree
from .io_cases import IoCase
from .nvml_cases import NvmlFault
from .snapshots import BrokenSnapshot
from .witness_cases import WitnessCase


@dataclass(frozen=True)
class Case:
    id: str
    tree: BaseTree
    command: str  # discover | topo | topo-from
    mutation: mutators.Mutation | None = None
    fault: NvmlFault | None = None
    broken: BrokenSnapshot | None = None
    io: IoCase | None = None
    witness: WitnessCase | None = None

    def what(self) -> str:
        return str(self.mutation or self.fault or self.broken or self.io or self.witness or "clean")


@dataclass(frozen=True)
class Baseline:
    tree: BaseTree
    snap: Snapshot
    json_size: int
    topo: str
    calls: dict[str, int]
    targets: Targets
    doc: dict[str, object]

    @property
    def clean(self) -> Clean:
        return Clean(snap=self.snap, json_size=self.json_size, topo=self.topo)


@dataclass
class Result:
    case: Case
    run: _exec.Run | None
    errors: list[str] = field(default_factory=list)
    snap: Snapshot | None = None

    @property
    def outcome(self) -> str:
        if self.run is None:
            return "not run"
        if self.run.timed_out:
            return "timeout"
        rc = self.run.returncode or 0
        return f"signal {-rc}" if rc < 0 else f"exit {rc}"

    def report(self, seed: int) -> str:
        lines = [f"[{self.case.id}, seed {seed}] {self.case.tree.name}: {self.case.what()}"]
        if self.run is not None:
            tail = self.run.stderr.strip()[-600:].replace("\n", "\n      ")
            lines += [f"    command: {self.run.command()}",
                      f"    {self.outcome} after {self.run.seconds:.2f} s; stderr: {tail or '(empty)'}"]
        lines += [f"    - {e}" for e in self.errors[:12]]
        if len(self.errors) > 12:
            lines.append(f"    - ... and {len(self.errors) - 12} more")
        return "\n".join(lines)


def tally(results: list[Result]) -> Counter[str]:
    return Counter(r.outcome for r in results)
