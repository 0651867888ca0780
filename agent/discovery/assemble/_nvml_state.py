"""``nvml_unread``: what it means that NVML gave no facts, judged against the GPUs the PCI bus shows. Pure.

The NVML source alone cannot tell "no driver, nothing to read" from "the driver is not up yet": at boot the
driver container loads the kernel modules and mounts ``libnvidia-ml`` minutes after the agent starts, and
``nvmlInit`` says DRIVER_NOT_LOADED (or the library is missing) in both cases. The PCI bus tells them apart,
so the verdict is made here, where both sources' facts meet:

  Invariant: NVML "absent" is true only when no GPU on the PCI bus is NVML's to read. A GPU is NVML's when
  it is bound to the ``nvidia`` driver, listed by that driver in ``/proc/driver/nvidia/gpus``, or bound to
  no driver at all (the driver is still loading, or a gathered tree without driver links). With such a GPU
  on the bus and no NVML facts, the source *failed* (or was not asked, for a gathered tree without its own
  NVML library): every NVLink, identity, P2P, fabric, MIG and NVML-locality fact of those GPUs is unknown,
  never "no NVLink".

GPUs bound to another driver (``vfio-pci`` for passthrough to a virtual machine, ``nouveau``) are not the
host's to use and NVML on the host cannot read them: assembly leaves them out of the GPUs (they stay PCI
functions, with a note), as ``nvidia-smi`` on the host does, so they neither count as GPUs nor make NVML's
absence a failure. See ``_pci.gpus``.
"""

from __future__ import annotations

from topology import Aspect, Problem, Snapshot, SourceOutcome, SourceStatus, facts_of, node_fact, replace

SOURCE = "nvml"
# The NVSwitch NVML's sentinel remote id stands for where none is on the bus (``_nvml_links``).
SYNTHETIC_SWITCH = "nvswitch0"
# What discovery learns of a GPU from NVML alone (sysfs gives its place, link and locality).
NVML_ONLY = (Aspect.IDENTITY, Aspect.NVLINKS, Aspect.P2P, Aspect.FABRIC, Aspect.MIG, Aspect.NUMA)
# What nobody knows node-wide when NVML was not read (the NVML source's ``covers``).
_NODE_WIDE = (Aspect.GPUS, Aspect.NVLINKS, Aspect.VERSIONS)


def nvml_unread(snap: Snapshot, *, nvml_allowed: bool) -> Snapshot:
    """``snap`` (sysfs only: NVML gave no facts) with NVML's status settled against the GPUs on the bus."""
    outcome = next((o for o in snap.sources if o.name == SOURCE), None)
    if outcome is None or not snap.gpus:
        return snap  # NVML not in the table, or nothing for it to read: absent (or failed) stands as it is
    status = outcome.status
    extra: list[Problem] = []
    if status is SourceStatus.ABSENT:
        status = SourceStatus.FAILED if nvml_allowed else SourceStatus.DISABLED
        why = (f"NVML did not start ({outcome.detail or 'no reason given'}) while {len(snap.gpus)} NVIDIA GPU(s) "
               "the nvidia driver drives, or that wait for a driver, are on the PCI bus: the driver is not up "
               "(still loading, or broken)" if nvml_allowed else
               f"NVML is not read for a gathered tree without its own NVML library ({outcome.detail}), and "
               f"{len(snap.gpus)} NVIDIA GPU(s) are in the tree")
        outcome = replace(outcome, status=status, detail=why)
        extra.append(Problem(source=SOURCE, subject=SOURCE, message=why,
                             unknown=tuple(node_fact(a) for a in _NODE_WIDE)))
    if status not in (SourceStatus.FAILED, SourceStatus.DISABLED):
        return snap
    unknown = tuple(f for g in snap.gpus for f in facts_of(g.id, *NVML_ONLY))
    extra.append(Problem(source=SOURCE, subject=SOURCE, message=f"NVML not read ({status.value}): identity, "
                         "NVLinks, P2P, fabric and MIG of the GPUs found on the PCI bus are unknown", unknown=unknown))
    return replace(snap, sources=_with(snap.sources, outcome),
                               problems=tuple(sorted({*snap.problems, *extra},
                                                     key=lambda p: (p.source, p.subject, p.message))))


def _with(sources: tuple[SourceOutcome, ...], outcome: SourceOutcome) -> tuple[SourceOutcome, ...]:
    return tuple(outcome if o.name == outcome.name else o for o in sources)
