"""Which GPU is which: NVML's indices placed on the PCI bus, and its identities checked with the driver's. Pure.

  Invariant: a device's identity never comes from its position in a list. A GPU is its PCI bus id; NVML's
  index, the device minor (``/dev/nvidiaN``) and the UUID are attached to it only where a source read them
  for that bus id and no other witness disputes them. Where two witnesses disagree (NVML and the driver's
  ``/proc/driver/nvidia/gpus`` list), or one value names two GPUs, the value is left out and the GPU's
  identity is unknown: nothing downstream (topo rows, labels, ResourceSlice device names ``gpu-<minor>``)
  can then move one GPU's facts onto another.

The one deduction made: NVML lists exactly the GPUs the driver lists and does not exclude (in a container,
both show only the GPUs given to it). When NVML could not give one GPU's bus id (it fell off the bus at
``nvmlDeviceGetHandleByIndex``, say) and exactly one GPU of the driver's list is named by no other NVML
index, that GPU is the one: it keeps its row, marked lost, with its bus id and minor from the driver's list.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from topology import NODE, Aspect, Fact, Gpu, Problem, facts_of, node_fact, replace

from ..sources._nvidia_proc import DriverGpuFacts
from ..sources.nvml import NvmlGpuFacts
from ._crosscheck_ends import driver_model
from ._nvml_state import NVML_ONLY, SOURCE
from ._witness import witness


def place(gpus: Iterable[NvmlGpuFacts], driver: Iterable[DriverGpuFacts] | None,
          problems: list[Problem]) -> dict[int, str]:
    """NVML index -> bus id, for every NVML GPU whose bus id is known and names no other NVML GPU."""
    nvml = list(gpus)
    by_bus: dict[str, list[int]] = {}
    for g in nvml:
        if g.bus_id is not None:
            by_bus.setdefault(g.bus_id, []).append(g.index)
    placed = {idx[0]: bus for bus, idx in by_bus.items() if len(idx) == 1}
    for bus, idx in sorted(by_bus.items()):
        if len(idx) > 1:
            problems.append(Problem(source=SOURCE, subject=bus, message=f"NVML gives GPUs {sorted(idx)} the same bus "
                                    "id: which of them is this GPU is unknown",
                                    unknown=(*facts_of(bus, *NVML_ONLY), node_fact(Aspect.GPUS))))
    nameless = [g.index for g in nvml if g.bus_id is None]
    usable = [d for d in driver or () if d.excluded is not True]
    if len(nameless) == 1 and usable and len(usable) == len(nvml):
        free = sorted({d.bus_id for d in usable} - set(by_bus))
        if len(free) == 1:
            placed[nameless[0]] = free[0]
            problems.append(Problem(source=SOURCE, subject=free[0], message=f"NVML could not give GPU "
                                    f"{nameless[0]}'s bus id; it is the only GPU of the driver's list that no other "
                                    "NVML GPU names, so it is that one"))
    return placed


def renamed(problems: Iterable[Problem], placed: Mapping[int, str]) -> list[Problem]:
    """The NVML walk's problems, those it recorded under ``nvml:gpuN`` (no bus id then) said of the GPU's bus
    id where the placement found it, so its unknown facts are its own."""
    names = {f"nvml:gpu{i}": bus for i, bus in placed.items()}
    out = []
    for p in problems:
        if p.subject not in names and not any(f.subject in names for f in p.unknown):
            out.append(p)
            continue
        out.append(Problem(source=p.source, subject=names.get(p.subject, p.subject), message=p.message,
                           unknown=tuple(Fact(subject=names.get(f.subject, f.subject), aspect=f.aspect)
                                         for f in p.unknown)))
    return out


def reconcile(gpus: dict[str, Gpu], driver: Iterable[DriverGpuFacts] | None, problems: list[Problem]) -> None:
    """Minors and UUIDs checked against the driver's list and for uniqueness; a disputed one is removed
    (``None``) and the GPU's identity marked unknown. ``gpus`` is changed in place."""
    said = {d.bus_id: d for d in driver or ()}
    for bus, g in sorted(gpus.items()):
        d = said.get(bus)
        if d is None or g.index is None:
            continue  # nobody to check NVML against, or no NVML facts (the driver's own values stand)
        changes: dict[str, None] = {}
        for row, field, mine, theirs in (("gpu-minor", "minor", g.minor, d.minor), ("gpu-uuid", "uuid", g.uuid, d.uuid),
                                         ("gpu-memory-node", "gpu_numa_id", g.gpu_numa_id, d.memory_node)):
            if mine is not None and theirs is not None and mine != theirs:
                changes[field] = None  # nobody may use it (a GPU memory node NVML alone said is no node's)
                # which node holds a GPU's memory is a fact of the node list too (its node is marked so)
                subjects = (bus, NODE) if field == "gpu_numa_id" else (bus,)
                problems.append(witness(row).dispute(subjects, mine, theirs))
        if changes:
            gpus[bus] = replace(g, **changes)
        model = driver_model(bus, g.name, d.model)
        if model is not None:
            problems.append(model)
    for field in ("minor", "uuid"):
        counts = Counter(getattr(g, field) for g in gpus.values() if getattr(g, field) is not None)
        for value, n in sorted(counts.items(), key=lambda kv: str(kv[0])):
            if n < 2:
                continue
            shared = sorted(b for b, g in gpus.items() if getattr(g, field) == value)
            for bus in shared:
                gpus[bus] = replace(gpus[bus], **{field: None})
            problems.append(Problem(source=SOURCE, subject=",".join(shared), message=f"{field} {value} is given to "
                                    f"{n} GPUs: none of them is known by it",
                                    unknown=tuple(f for b in shared for f in facts_of(b, Aspect.IDENTITY))))
