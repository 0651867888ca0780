"""One perturbed witness per row of the witness table (``agent.discovery.assemble.WITNESSES``).

Each planner, given a tree's clean snapshot, its root and (for a machine profile) its NVML answers, changes
one witness of its row so that the two readings disagree, or returns None where the tree has no such pair
(no NVML on a real tree, one NUMA node, no NVLink...). An edit is files to write under the root and the
NVML answers to use instead; ``winner`` says the row's stated winner stands (nothing may become unknown).
"""

from __future__ import annotations

import random
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agent.discovery.assemble._crosscheck_ends import facing_down
from topology import LinkKind, PathIndex, Snapshot
from topology.fabric._physics import FAMILIES, family_of_name

from . import contradict


@dataclass(frozen=True)
class Edit:
    note: str
    files: dict[str, bytes] = field(default_factory=dict)  # path below the root -> new content
    removed: tuple[str, ...] = ()  # directories below the root to remove
    links: dict[str, str] = field(default_factory=dict)  # path below the root -> link target (relative)
    nvml: list[str] | None = None  # the NVML answers instead of the tree's
    winner: bool = False


@dataclass(frozen=True)
class WitnessCase:
    """One row's witness perturbed in one tree, for the fuzz runner."""

    key: str
    edit: Edit

    def __str__(self) -> str:
        return f"witness {self.key}: {self.edit.note}"

    def touched(self, pristine: Path) -> list[str]:
        """What applying the edit creates or replaces (relative): the topmost new directory of each file."""
        out: list[str] = [*self.edit.links, *self.edit.removed]
        for rel in self.edit.files:
            parts = Path(rel).parts
            top = next((Path(*parts[:n]) for n in range(1, len(parts) + 1)
                        if not (pristine / Path(*parts[:n])).exists()), Path(rel))
            out.append(str(top))
        return sorted(set(out))

    def apply(self, root: Path) -> None:
        for rel, data in self.edit.files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.unlink(missing_ok=True)  # never through a hard link shared with the pristine tree
            path.write_bytes(data)
            path.chmod(0o444)
        for rel, target in self.edit.links.items():
            (root / rel).unlink(missing_ok=True)
            (root / rel).symlink_to(target)
        for rel in self.edit.removed:
            shutil.rmtree(root / rel)


def plan(rng: random.Random, key: str, snap: Snapshot, root: Path, nvml: list[str] | None) -> WitnessCase | None:
    edit = PLANNERS[key](rng, snap, root, nvml)
    return None if edit is None else WitnessCase(key, edit)


DRIVER = "proc/driver/nvidia/gpus"
Planner = Callable[[random.Random, Snapshot, Path, "list[str] | None"], "Edit | None"]


def _sed(lines: list[str] | None, pattern: str, repl: Callable[[re.Match[str]], str], note: str,
         rng: random.Random) -> Edit | None:
    if lines is None:
        return None
    hits = [i for i, line in enumerate(lines) if re.match(pattern, line)]
    if not hits:
        return None
    i = rng.choice(hits)
    out = list(lines)
    out[i] = re.sub(pattern, repl, lines[i])
    return None if out[i] == lines[i] else Edit(f"{note}: {lines[i]!r} -> {out[i]!r}", nvml=out)


def _sysfs(planner: Callable[..., contradict.Mutation | None]) -> Planner:
    def plan(rng: random.Random, snap: Snapshot, root: Path, nvml: list[str] | None) -> Edit | None:
        dirs = {f.id: _function_dir(root, f.id) for f in snap.pci if (root / "sys/bus/pci/devices" / f.id).exists()}
        m = planner(rng, snap, dirs, root)
        if m is None:
            return None
        if m.kind == "contra-remove-dir":
            return Edit(m.note, removed=(m.path,))
        return Edit(m.note, files={m.path: m.payload})
    return plan


def _function_dir(root: Path, bdf: str) -> str:
    return str((root / "sys/bus/pci/devices" / bdf).resolve().relative_to(root.resolve()))


def _vm(snap: Snapshot) -> bool:
    return any(f.vendor_id in (0x1B36, 0x15AD) for f in snap.pci)


def _gpu_pcie(rng: random.Random, snap: Snapshot, root: Path, nvml: list[str] | None) -> Edit | None:
    gpus = [g for g in snap.gpus if g.pcie and g.pcie.max_width and g.pcie.max_width > 1 and g.index is not None]
    if nvml is None or not gpus:
        return None
    g = rng.choice(gpus)
    assert g.pcie is not None and g.pcie.max_width is not None
    if _vm(snap):  # the emulated port's witness is the one known to be wrong: change it, NVML must stand
        path = _function_dir(root, g.id)
        return Edit(f"sysfs current_link_width of {g.id} halved behind an emulated port",
                    files={f"{path}/current_link_width": f"{g.pcie.max_width // 2}\n".encode()}, winner=True)
    return _sed(nvml, rf"^gpu {g.index} pcie (\d+) (\d+) ", lambda m: f"gpu {g.index} pcie {m[1]} "
                f"{max(1, int(m[2]) // 2)} ", "NVML's current width halved", rng)


def _gpu_affinity(rng: random.Random, snap: Snapshot, root: Path, nvml: list[str] | None) -> Edit | None:
    nodes = [n.os_index for n in snap.numa_nodes if n.cpus]
    gpus = [g for g in snap.gpus if g.numa_node is not None and g.index is not None]
    if len(nodes) < 2 or not gpus:
        return None
    g = rng.choice(gpus)
    other = next(n for n in nodes if n != g.numa_node)
    return _sed(nvml, rf"^gpu {g.index} memnodes .*$", lambda m: f"gpu {g.index} memnodes {other}",
                "NVML's memory affinity another node", rng)


def _plan(pattern: str, repl: Callable[[re.Match[str]], str], note: str,
          when: Callable[[Snapshot], bool] = lambda s: True) -> Planner:
    def plan(rng: random.Random, snap: Snapshot, root: Path, nvml: list[str] | None) -> Edit | None:
        return _sed(nvml, pattern, repl, note, rng) if when(snap) else None
    return plan


def _memory_node(rng: random.Random, snap: Snapshot, root: Path, nvml: list[str] | None) -> Edit | None:
    listed = root / "proc/driver/nvidia/gpus"
    if not any((listed / g.id / "numa_status").exists() for g in snap.gpus):
        return None
    return _sed(nvml, r"^gpu (\d+) numa (\d+)$", lambda m: f"gpu {m[1]} numa {int(m[2]) + 1}",
                "NVML's GPU NUMA id off by one", rng)


def _ancestor(rng: random.Random, snap: Snapshot, root: Path, nvml: list[str] | None) -> Edit | None:
    if nvml is None or len(snap.gpus) < 2:
        return None
    pairs = sorted({tuple(sorted((int(m[1]), int(m[2])))) for line in nvml
                    if (m := re.match(r"^pair (\d+) (\d+) ancestor \d+$", line))})
    if not pairs:
        return None
    a, b = rng.choice(pairs)
    pattern = rf"^pair ({a} {b}|{b} {a}) ancestor (\d+)$"  # the profile may give the pair in both orders
    out = [re.sub(pattern, lambda m: f"pair {m[1]} ancestor {50 if int(m[2]) < 40 else 10}", line) for line in nvml]
    return Edit(f"NVML's common ancestor of GPUs {a} and {b} another level", nvml=out)


def _p2p_nvlink(rng: random.Random, snap: Snapshot, root: Path, nvml: list[str] | None) -> Edit | None:
    index = PathIndex(snap)
    by_index = {g.index: g.id for g in snap.gpus if g.index is not None}
    apart = {f"{a} {b}" for a in by_index for b in by_index if a < b and not index.nvlinks(by_index[a], by_index[b])}
    if nvml is None or not apart:
        return None
    pair = rng.choice(sorted(apart))
    return _sed(nvml, rf"^pair {pair} p2p 2 \d+$", lambda m: f"pair {pair} p2p 2 0",
                "NVML's P2P over NVLink OK between GPUs no NVLink joins", rng)


def _direct(snap: Snapshot) -> bool:
    gpus = {g.id for g in snap.gpus}
    return any(lk.kind is LinkKind.NVLINK and lk.a in gpus and lk.b in gpus for lk in snap.links)


def _fabric(rng: random.Random, snap: Snapshot, root: Path, nvml: list[str] | None) -> Edit | None:
    if nvml is None or not any(g.fabric and g.fabric.clique for g in snap.gpus):
        return None
    return Edit("no GPU answers nvmlDeviceGetGpuFabricInfoV (NOT_SUPPORTED)",
                nvml=[line for line in nvml if not re.match(r"^gpu \d+ fabric ", line)])


def _twin(rng: random.Random, snap: Snapshot, root: Path, nvml: list[str] | None) -> Edit | None:
    """A new function below a directory named after an existing function, under another root complex (or
    right under its own): that bus id is then at two directories of the tree."""
    devices = root / "sys/bus/pci/devices"
    here = {f.id: _function_dir(root, f.id) for f in snap.pci if (devices / f.id).exists()}
    roots = sorted({d.split("/")[2] for d in here.values() if d.startswith("sys/devices/pci")})
    choices = [(bdf, r) for bdf, d in sorted(here.items()) for r in roots
               if f"sys/devices/{r}/{bdf}" != d and (r != d.split("/")[2] or len(d.split("/")) > 4)]
    if not choices:
        return None
    bdf, rc = rng.choice(choices)
    new = next(f"{bdf[:4]}:{b:02x}:1f.7" for b in range(0xFE, 0, -1) if f"{bdf[:4]}:{b:02x}:1f.7" not in here)
    d = f"sys/devices/{rc}/{bdf}/{new}"
    return Edit(f"{new} placed below a second {bdf} under {rc}",
                files={f"{d}/vendor": b"0x8086\n", f"{d}/device": b"0x0b00\n", f"{d}/class": b"0x088000\n"},
                links={f"sys/bus/pci/devices/{new}": f"../../../devices/{rc}/{bdf}/{new}"})


def _netdev_elsewhere(rng: random.Random, snap: Snapshot, root: Path, nvml: list[str] | None) -> Edit | None:
    """An RDMA device's netdev moved under another function of the tree (its RDMA device still names it)."""
    net = root / "sys/class/net"
    nics = [(n, d) for n in snap.nics if n.rdma for d in n.netdevs if (net / d).is_symlink()]
    others = [f.id for f in snap.pci if f.id not in {n.id for n in snap.nics}
              and f.class_code >> 8 != 0x0604 and (root / "sys/bus/pci/devices" / f.id).exists()]
    if not nics or not others:
        return None
    nic, name = rng.choice(nics)
    other = rng.choice(others)
    old = (net / name).resolve()
    d = f"{_function_dir(root, other)}/net/{name}"
    files = {f"{d}/{p.name}": p.read_bytes() for p in old.iterdir() if p.is_file() and not p.is_symlink()}
    return Edit(f"{name} of {nic.name} ({nic.id}) moved below {other}", files=files,
                links={f"sys/class/net/{name}": "../../" + d.removeprefix("sys/")})


def _bond_version(rng: random.Random, snap: Snapshot, root: Path, nvml: list[str] | None) -> Edit | None:
    """One link of a bond (two or more active links to one far end) reports another NVLink version."""
    if nvml is None:
        return None
    link = re.compile(r"^gpu (\d+) link (\d+) 1 (\d+) (\d+) (\S+)$")
    ends: dict[tuple[str, str], list[int]] = {}
    for i, line in enumerate(nvml):
        if (m := link.match(line)) and m[5].upper() != "FFFFFFFF:FF:FF.0":
            ends.setdefault((m[1], m[5]), []).append(i)
    bonds = sorted(v for v in ends.values() if len(v) > 1)
    if not bonds:
        return None
    i = rng.choice(rng.choice(bonds))
    out = list(nvml)
    out[i] = link.sub(lambda m: f"gpu {m[1]} link {m[2]} 1 {int(m[3]) - 1 if int(m[3]) > 2 else int(m[3]) + 1} "
                                f"{m[4]} {m[5]}", nvml[i])
    return Edit(f"one link of a bond another version: {nvml[i]!r} -> {out[i]!r}", nvml=out)


def _other_family(name: str | None, rng: random.Random) -> str | None:
    """A product name of another GPU family, of the same NVLink generation and at least as many links where
    the table has one (so the physics table has nothing more to say), else of any other family."""
    mine = family_of_name(name)
    if mine is None:
        return None
    others = [f for f in FAMILIES if f.name != mine.name]
    alike = [f for f in others if f.nvlink_version == mine.nvlink_version and f.max_nvlinks >= mine.max_nvlinks]
    return f"NVIDIA {rng.choice(alike or others).name}"


def _gpu_model(rng: random.Random, snap: Snapshot, root: Path, nvml: list[str] | None) -> Edit | None:
    """NVML's product name another family's; the PCI device id (and the driver's Model) stay."""
    named = [g for g in snap.gpus if g.index is not None and family_of_name(g.name)]
    if nvml is None or not named:
        return None
    g = rng.choice(named)
    other = _other_family(g.name, rng)
    return _sed(nvml, rf"^gpu {g.index} name .*$", lambda m: f"gpu {g.index} name {other}",
                "NVML's product name another family's", rng)


def _driver_model(rng: random.Random, snap: Snapshot, root: Path, nvml: list[str] | None) -> Edit | None:
    """The driver's Model of one GPU another family's (``information``)."""
    gpus = [g for g in snap.gpus if (root / DRIVER / g.id / "information").is_file() and family_of_name(g.name)]
    if nvml is None or not gpus:
        return None
    g = rng.choice(gpus)
    rel = f"{DRIVER}/{g.id}/information"
    text = (root / rel).read_text()
    new = re.sub(r"^Model:.*$", f"Model: \t\t {_other_family(g.name, rng)}", text, count=1, flags=re.M)
    return None if new == text else Edit(f"the driver's Model of {g.id} another family's", files={rel: new.encode()})


def _driver_gpus(rng: random.Random, snap: Snapshot, root: Path, nvml: list[str] | None) -> Edit | None:
    """One GPU gone from the driver's list while NVML still lists it."""
    gpus = [g for g in snap.gpus if (root / DRIVER / g.id).is_dir() and g.index is not None]
    if nvml is None or not gpus:
        return None
    g = rng.choice(gpus)
    return Edit(f"{g.id} gone from {DRIVER}", removed=(f"{DRIVER}/{g.id}",))


def _pcie_ends(rng: random.Random, snap: Snapshot, root: Path, nvml: list[str] | None) -> Edit | None:
    """The port above a function trained to another width than the function says (one link)."""
    pci = {f.id: f for f in snap.pci}
    pairs = [(f, pci[f.parent]) for f in snap.pci if f.parent in pci and f.link and f.link.current_width
             and f.link.current_width > 1 and pci[f.parent].link and pci[f.parent].is_bridge
             and (root / "sys/bus/pci/devices" / f.parent).exists() and facing_down(pci, pci[f.parent])]
    if not pairs or _vm(snap):
        return None
    f, port = rng.choice(pairs)
    assert f.link is not None and f.link.current_width is not None
    width = f.link.current_width // 2
    return Edit(f"{port.id} trained x{width} above {f.id} at x{f.link.current_width}",
                files={f"{_function_dir(root, port.id)}/current_link_width": f"{width}\n".encode()})


def _cpumask(cpus: tuple[int, ...]) -> bytes:
    """A CPU set as the kernel writes ``local_cpus``: 32-bit hex words, most significant first."""
    value = sum(1 << c for c in cpus)
    words = [f"{(value >> (32 * i)) & 0xFFFFFFFF:08x}" for i in range(max(1, (max(cpus, default=0) // 32) + 1))]
    return (",".join(reversed(words)) + "\n").encode()


def _local_cpus_elsewhere(rng: random.Random, snap: Snapshot, root: Path, nvml: list[str] | None) -> Edit | None:
    """A function (a NIC's first, else any) whose numa_node names one node lists another node's CPUs as local."""
    nodes = {n.os_index: n for n in snap.numa_nodes if n.cpus}
    nics = {n.pci_bus_id for n in snap.nics}
    placed = [f for f in snap.pci if f.numa_node in nodes and f.local_cpus is not None
              and (root / "sys/bus/pci/devices" / f.id / "local_cpus").exists()]
    if len(nodes) < 2 or not placed:
        return None
    f = rng.choice([p for p in placed if p.id in nics] or placed)
    other = nodes[next(i for i in sorted(nodes) if i != f.numa_node)]
    return Edit(f"local_cpus of {f.id} (node {f.numa_node}) lists {other.id}'s CPUs",
                files={f"{_function_dir(root, f.id)}/local_cpus": _cpumask(other.cpus)})


def _empty_memory_node(rng: random.Random, snap: Snapshot, root: Path, nvml: list[str] | None) -> Edit | None:
    """The NUMA node holding a GPU's memory says it holds none."""
    held = sorted({g.gpu_numa_id for g in snap.gpus if g.gpu_numa_id is not None})
    if not held:
        return None
    node = rng.choice(held)
    return Edit(f"node{node}'s meminfo (a GPU's memory) says MemTotal 0",
                files={f"sys/devices/system/node/node{node}/meminfo": f"Node {node} MemTotal: 0 kB\n".encode()})


def _width_down(rng: random.Random, snap: Snapshot, root: Path, nvml: list[str] | None) -> Edit | None:
    """A trained function's current_link_width says the link is down (0) while its speed says it is up."""
    up = [f for f in snap.pci if f.link is not None and f.link.current_gen is not None
          and f.link.current_width is not None and (root / "sys/bus/pci/devices" / f.id).exists()]
    if not up:
        return None
    f = rng.choice(up)
    return Edit(f"current_link_width of {f.id} 0 (down) under a current speed",
                files={f"{_function_dir(root, f.id)}/current_link_width": b"0\n"})


PLANNERS: dict[str, Planner] = {
    "pcie-speed-width": _width_down,
    "pci-numa-cpus": _local_cpus_elsewhere,
    "gpu-memory-numa": _empty_memory_node,
    "nvlink-version": _bond_version,
    "nvlink-remote-type": _plan(r"^gpu (\d+) link (\d+) 1 (\d+) 0 ", lambda m: f"gpu {m[1]} link {m[2]} 1 {m[3]} 2 ",
                                "NVML calls a GPU at the far end of an NVLink an NVSwitch", _direct),
    "driver-version": _plan(r"^driver \S+$", lambda m: "driver 999.88.77", "NVML's driver version not the module's"),
    "pci-bus-id": _twin,
    "nic-function": _netdev_elsewhere,
    "numa-cpus": _sysfs(contradict.PLANNERS[0]),
    "root-numa": _sysfs(contradict.PLANNERS[1]),
    "pcie-over-max": _sysfs(contradict.PLANNERS[2]),
    "numa-distance": _sysfs(contradict.PLANNERS[3]),
    "rdma-infiniband": _sysfs(contradict.PLANNERS[4]),
    "gpu-pcie": _gpu_pcie,
    "gpu-affinity": _gpu_affinity,
    "gpu-pci-identity": _plan(r"^gpu (\d+) busid (\S+) 0x[0-9a-f]{4}10de", lambda m: f"gpu {m[1]} busid {m[2]} "
                              "0x0bad10de", "NVML's PCI device id another one"),
    "gpu-memory-node": _memory_node,
    "gpu-minor": _plan(r"^gpu (\d+) minor \d+$", lambda m: f"gpu {m[1]} minor {100 + int(m[1])}",
                       "NVML's minor not the driver's"),
    "gpu-uuid": _plan(r"^gpu (\d+) uuid GPU-(\S+)$", lambda m: f"gpu {m[1]} uuid GPU-{m[2][::-1]}",
                      "NVML's UUID not the driver's"),
    "nvml-ancestor": _ancestor,
    "nvml-p2p-nvlink": _p2p_nvlink,
    "nvlink-count": _plan(r"^gpu (\d+) links (\d+)$", lambda m: f"gpu {m[1]} links {int(m[2]) // 2}",
                          "INVALID_ARGUMENT from the middle of the link range"),
    "nvswitch-links": _plan(r"^gpu (\d+) field 147 0 ([1-9]\d*)$",
                            lambda m: f"gpu {m[1]} field 147 0 {int(m[2]) - 1}", "field 147 one less"),
    "nvlink-ends": _plan(r"^gpu (\d+) link (\d+) 1 (\d+) 0 ", lambda m: f"gpu {m[1]} link {m[2]} 0 {m[3]} 0 ",
                         "one end of a direct NVLink down", _direct),
    "fabric": _fabric,
    "gpu-model": _gpu_model,
    "gpu-driver-model": _driver_model,
    "driver-gpus": _driver_gpus,
    "pcie-ends": _pcie_ends,
    "fabric-domain": _plan(r"^gpu (\d+) fabric (\d+) (\d+) (\d+) ", lambda m: f"gpu {m[1]} fabric {m[2]} {m[3]} "
                           f"{int(m[4]) + 1} ", "one GPU's fabric clique another than its NVSwitch peers'"),
    "gpu-architecture": _plan(r"^gpu (\d+) arch (\d+)$", lambda m: f"gpu {m[1]} arch {5 if m[2] != '5' else 9}",
                              "NVML's architecture another than its compute capability's"),
    "nvml-version": _plan(r"^nvml (\d+)\.(\S+)$", lambda m: f"nvml {int(m[1]) + 1}.{m[2]}",
                          "NVML's version another CUDA major than its CUDA version's"),
}
