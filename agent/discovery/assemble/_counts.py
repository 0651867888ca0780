"""NVLink rows of the witness table checked in the NVML merge, where NVML's per-link readings are at hand. Pure.

``nvlink-count``: where NVML's per-link calls ended against its own link-count field (91).

The per-link calls end at the first link NVML calls INVALID_ARGUMENT (past the last) or, at link 0,
NOT_SUPPORTED (no NVLink). When field 91 says the GPU has more links than that, the end was an error in
the middle of the range, not the last link: the GPU's NVLinks are unknown, never the links before it alone.
"""

from __future__ import annotations

from collections.abc import Mapping

from topology import Aspect, Fact, Problem, nvlink_bytes_per_second, nvlink_gen_from_nvml

from ..sources.nvml import REMOTE_GPU, REMOTE_SWITCH, NvmlFacts
from ._witness import witness


def link_ends(facts: NvmlFacts, placed: Mapping[int, str]) -> list[Problem]:
    row = witness("nvlink-count")
    out = []
    for g in facts.gpus:
        bus = placed.get(g.index)
        if bus is None or g.lost or g.nvlink_count is None or g.links_end is None:
            continue
        if g.links_end != g.nvlink_count:
            out.append(row.dispute((bus,), f"{g.nvlink_count} links", f"links end at link {g.links_end}"))
    return out


def remote_type(bus: str, link: int, said: int | None, remote: str, *, is_gpu: bool, pci_switch: bool,
                on_pci: bool = False, pci_known: bool = False) -> Problem | None:
    """``nvlink-remote-type``: NVML's type of the far end against what is at its bus id (an NVSwitch the bus
    lists must be NVIDIA's bridge-class function: another function there leaves what it is unknown too)."""
    there = "a GPU" if is_gpu else "an NVSwitch" if pci_switch else None
    if said == REMOTE_SWITCH and on_pci and not is_gpu and not pci_switch:
        p = witness("nvlink-remote-type").dispute((bus,), f"link {link} reaches an NVSwitch",
                                                  f"{remote} is a PCI function that is no NVSwitch")
        return Problem(source=p.source, subject=p.subject, message=p.message,
                       unknown=(*p.unknown, Fact(subject=remote, aspect=Aspect.IDENTITY)))
    if said == REMOTE_SWITCH and pci_known and not on_pci and not is_gpu:
        return witness("nvlink-remote-type").dispute((bus,), f"link {link} reaches an NVSwitch at {remote}",
                                                     "no function is there on the PCI bus")
    if (said == REMOTE_SWITCH and is_gpu) or (said == REMOTE_GPU and pci_switch and not is_gpu):
        told = "an NVSwitch" if said == REMOTE_SWITCH else "a GPU"
        return witness("nvlink-remote-type").dispute((bus,), f"link {link} reaches {told}", f"{remote} is {there}")
    return None


def generation(pair: frozenset[str], enums: set[int], problems: list[Problem]) -> int | None:
    subject = "--".join(sorted(pair))
    if not enums:
        return None
    if len(enums) > 1:
        problems.append(witness("nvlink-version").dispute((e for e in pair if ":" in e), min(enums), max(enums)))
    gens = {nvlink_gen_from_nvml(e) for e in enums}
    if None in gens:
        problems.append(Problem(source="nvml", subject=subject,
                                message=f"unknown NVLink version (nvmlNvlinkVersion_t {sorted(enums)}): unknown "
                                        "generation, no rate", unknown=_nvlinks_of(pair)))
        return None
    gen = min(g for g in gens if g is not None)
    if nvlink_bytes_per_second(gen) is None:  # a generation the physics table has no rate for: said, not null
        problems.append(Problem(source="nvml", subject=subject, message=f"NVLink {gen} (nvmlNvlinkVersion_t "
                                f"{sorted(enums)}): unknown generation: the physics table has no per-link rate for "
                                "it", unknown=_nvlinks_of(pair)))
    return gen


def _nvlinks_of(pair: frozenset[str]) -> tuple[Fact, ...]:
    """The NVLinks of the GPUs of a pair (a synthetic or real NVSwitch end is no GPU: its own links are not)."""
    return tuple(Fact(subject=end, aspect=Aspect.NVLINKS) for end in sorted(pair) if ":" in end)


