"""The NVIDIA driver's own list of its GPUs, ``/proc/driver/nvidia/gpus/<bus id>/``: a second witness.

``information`` names each GPU the kernel module drives by bus id, with its device minor (``/dev/nvidiaN``),
UUID and whether it is excluded from use; ``numa_status`` the NUMA node its memory was onlined as (POWER9
+ V100, Grace Hopper). Assembly checks NVML's identities against these (NVML index, minor, UUID and bus id
must agree) and places a GPU NVML lost before it gave its bus id. Inside a container the runtime shows only
the GPUs given to it here, as NVML does. The file is optional (a gathered tree may lack it): missing is
``None``; a value that does not parse is a problem on that GPU's identity.
"""

from __future__ import annotations

from topology import NODE, Aspect, BadPciAddress, Problem, Record, canonical_bdf, facts_of, node_fact

from ..access import FsRoot
from ._parse import MAX_NUMA_NODES, bounded, decimal
from ._sysfs import Reader, describe_os_error

SOURCE = "numa"
DRIVER_GPUS = "/proc/driver/nvidia/gpus"
_NUMA = (Aspect.NUMA,)
_MINOR = bounded(0, 254)  # 255 is /dev/nvidiactl


class DriverGpuFacts(Record):
    """A GPU the NVIDIA driver lists in /proc: its memory's NUMA node and its identity as the driver says."""

    __slots__ = __match_args__ = ("bus_id", "memory_node", "minor", "uuid", "excluded", "model")
    bus_id: str
    memory_node: int | None
    minor: int | None  # "Device Minor"
    uuid: str | None  # "GPU UUID"
    excluded: bool | None  # "GPU Excluded": the driver keeps it from use (NVML does not list it)
    model: str | None  # "Model": the product name as the driver says

    def __init__(self, *, bus_id: str, memory_node: int | None = None, minor: int | None = None,
                 uuid: str | None = None, excluded: bool | None = None, model: str | None = None) -> None:
        self._fill(locals())


def driver_gpus(root: FsRoot, problems: list[Problem]) -> tuple[DriverGpuFacts, ...] | None:
    """The driver's GPUs; None where it keeps no list (no driver, a gathered tree without it): a witness that
    says nothing disputes nothing."""
    if not root.exists(DRIVER_GPUS):
        return None
    try:
        names = root.listdir(DRIVER_GPUS)
    except OSError as exc:
        problems.append(Problem(source=SOURCE, subject="nvidia", message=f"{DRIVER_GPUS}: {describe_os_error(exc)}",
                                unknown=(node_fact(Aspect.NUMA),)))
        return None
    out = []
    for name in names:
        try:
            bdf = canonical_bdf(name)
        except BadPciAddress:
            problems.append(Problem(source=SOURCE, subject=name, message=f"{DRIVER_GPUS}/{name}: not a PCI address",
                                    unknown=(node_fact(Aspect.NUMA),)))
            continue
        directory = f"{DRIVER_GPUS}/{name}"
        r = Reader(root, SOURCE, bdf, directory, fact_subject=NODE)  # which nodes are GPU memory
        try:
            real = root.is_plain_dir(directory)  # a directory, never a link
        except OSError:
            real = False
        if not real:
            r.problem(f"{directory} is not the driver's directory for the GPU", _NUMA)
            problems.extend(r.problems)
            out.append(DriverGpuFacts(bus_id=bdf))
            continue
        node = r.parsed("numa_status", _numa_status_node, _NUMA)
        ident = Reader(root, SOURCE, bdf, directory)  # what it says of the GPU's identity
        info = ident.parsed("information", _information, (Aspect.IDENTITY,))
        problems.extend(r.problems + ident.problems)
        if info is not None and info.get("Bus Location", bdf) != bdf:
            problems.append(Problem(source=SOURCE, subject=bdf, message=f"{directory}/information names bus "
                                    f"{info['Bus Location']!r}: which GPU it describes is unknown",
                                    unknown=facts_of(bdf, Aspect.IDENTITY)))
            info = None
        out.append(_facts(bdf, node, info, problems))
    return tuple(out)


def _facts(bdf: str, node: int | None, info: dict[str, str] | None, problems: list[Problem]) -> DriverGpuFacts:
    if info is None:
        return DriverGpuFacts(bus_id=bdf, memory_node=node)
    try:
        minor = _MINOR(info["Device Minor"]) if "Device Minor" in info else None
    except ValueError:
        problems.append(Problem(source=SOURCE, subject=bdf, message=f"{DRIVER_GPUS}/{bdf}/information: Device "
                                f"Minor {info['Device Minor'][:20]!r} is not a minor number",
                                unknown=facts_of(bdf, Aspect.IDENTITY)))
        minor = None
    uuid = info.get("GPU UUID")
    excluded = {"Yes": True, "No": False}.get(info.get("GPU Excluded", ""))
    return DriverGpuFacts(bus_id=bdf, memory_node=node, minor=minor,
                          uuid=uuid if uuid and uuid.startswith(("GPU-", "MIG-")) else None, excluded=excluded,
                          model=info.get("Model") or None)


def _information(text: str) -> dict[str, str]:
    """``Key: \\t value`` lines; the keys read here must each appear at most once."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key = key.strip()
        if not sep or key not in ("Device Minor", "GPU UUID", "GPU Excluded", "Bus Location", "Model"):
            continue
        if key in out:
            raise ValueError(f"{key} twice")
        out[key] = value.strip()
    return out


def _numa_status_node(text: str) -> int | None:
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Node":
            node = decimal(value)
            if node < -1 or node >= MAX_NUMA_NODES:
                raise ValueError(value)
            return None if node < 0 else node
    raise ValueError("no Node line")
