"""Cross-checks of one reading against another of the same thing: the two ends of a PCIe link (one link,
one trained state), and what a GPU is by its product name against its PCI device id (by the physics
table's families). Pure; each problem is its witness row's (``_witness``)."""

from __future__ import annotations

from topology import PciFunction, Problem, Snapshot, family_of_device, family_of_name

from ._witness import witness

_EMULATED = (0x1B36, 0x15AD)  # QEMU, VMware: a port that reports its own link, not the device's


def facing_down(pci: dict[str, PciFunction], port: PciFunction) -> bool:
    """Whether ``port``'s link is the one below it: a root port (no bridge above it) or a switch's downstream
    port (below an upstream port, itself below a root or downstream port). Ports alternate down the chain,
    so a port under an even number of bridges faces down; an upstream port's link is the one above it."""
    above, cur, seen = 0, pci.get(port.parent), {port.id}
    while cur is not None and cur.is_bridge and cur.id not in seen:
        seen.add(cur.id)
        above += 1
        cur = pci.get(cur.parent)
    return above % 2 == 0


def pcie_ends(snap: Snapshot) -> list[Problem]:
    """``pcie-ends``: a function's current generation and width against the port above it, on one link."""
    pci = {f.id: f for f in snap.pci}
    out = []
    for f in snap.pci:
        port = pci.get(f.parent)
        if f.link is None or port is None or port.link is None:
            continue
        mine, theirs = f.link, port.link
        for what, a, b in (("generation", mine.current_gen, theirs.current_gen),
                           ("width", mine.current_width, theirs.current_width)):
            if a is not None and b is not None and a != b:  # the port's shape is asked only then: it walks up
                if port.is_bridge and port.vendor_id not in _EMULATED and facing_down(pci, port):
                    out.append(witness("pcie-ends").dispute((f.id, port.id), f"{what} {a} ({f.id})",
                                                            f"{what} {b} ({port.id})"))
                break
    return out


def gpu_model(snap: Snapshot) -> list[Problem]:
    """``gpu-model``: the family NVML's product name names against the family of the PCI device id."""
    out = []
    for g in snap.gpus:
        by_name, by_id = family_of_name(g.name), family_of_device(g.pci_device_id)
        if by_name is not None and by_id is not None and by_name != by_id:
            out.append(witness("gpu-model").dispute((g.id,), f"{g.name!r} ({by_name.name})",
                                                    f"device id {g.pci_device_id:04x} ({by_id.name})"))
    return out


def driver_model(bus: str, name: str | None, model: str | None) -> Problem | None:
    """``gpu-driver-model``: NVML's product name against the driver's Model (checked where both are at hand)."""
    by_name, by_driver = family_of_name(name), family_of_name(model)
    if by_name is None or by_driver is None or by_name == by_driver:
        return None
    return witness("gpu-driver-model").dispute((bus,), f"{name!r} ({by_name.name})", f"{model!r} ({by_driver.name})")


def driver_gpus(nvml: set[str], driver: set[str]) -> Problem | None:
    """``driver-gpus``: the bus ids of NVML's GPUs against the driver's list (less the GPUs it excludes)."""
    if nvml == driver:
        return None
    only_nvml, only_driver = sorted(nvml - driver), sorted(driver - nvml)
    return witness("driver-gpus").dispute(nvml ^ driver, f"{len(nvml)} GPUs" + (f", {', '.join(only_nvml)} among them"
                                          if only_nvml else ""), f"{len(driver)} GPUs" + (
                                          f", {', '.join(only_driver)} among them" if only_driver else ""))
