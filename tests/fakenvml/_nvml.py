"""The NVML view of a :class:`Machine`: the line file fakenvml.c reads at nvmlInit."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from topology import format_cpulist

from ._catalog import (
    ARCHITECTURE,
    FABRIC_STATE,
    FIELD_NVLINK_LINK_COUNT,
    FIELD_NVSWITCH_CONNECTED_LINK_COUNT,
    NVLINK_VERSION_ENUM,
    NVML_RETURN,
    P2P_CAPS,
    P2P_STATUS,
    REMOTE_GPU,
    REMOTE_IBMNPU,
    REMOTE_SWITCH,
    REMOTE_UNKNOWN,
    SENTINEL_BUS_ID,
    TOPOLOGY_LEVEL,
)
from ._profile import Machine
from ._tree import Function, PcieTree, ProfileError

_REMOTE_TYPES = {"gpu": REMOTE_GPU, "ibmnpu": REMOTE_IBMNPU, "switch": REMOTE_SWITCH, "unknown": REMOTE_UNKNOWN}


def nvml_bus_id(bdf: str) -> str:
    """``0000:3b:00.0`` as NVML spells it: ``00000000:3B:00.0``."""
    domain, bus, rest = bdf.split(":")
    return f"{int(domain, 16):08X}:{int(bus, 16):02X}:{rest.upper()}"


def link_plan(machine: Machine) -> list[list[tuple[int, int, str]]]:
    """Per GPU (NVML index), per link: (active, remote device type, remote NVML bus id)."""
    nv = machine.nvml["nvlink"]
    gpus = machine.gpus
    links = int(nv.get("links", 0)) if nv else 0
    plan: list[list[tuple[int, int, str]]] = [[] for _ in gpus]
    for a, b, n in (tuple(int(x) for x in p) for p in nv.get("pairs") or ()):
        plan[a] += [(1, REMOTE_GPU, nvml_bus_id(gpus[b].bdf))] * n
        plan[b] += [(1, REMOTE_GPU, nvml_bus_id(gpus[a].bdf))] * n
    switches = machine.nvswitches
    for i in range(len(gpus)):
        for s in nv.get("switch_of_link") or ():
            remote = SENTINEL_BUS_ID if s == "sentinel" else nvml_bus_id(switches[s].bdf)
            plan[i].append((1, REMOTE_SWITCH, remote))
        plan[i] += [(0, REMOTE_GPU, "00000000:00:00.0")] * (links - len(plan[i]))
    for gpu_index, dead in (nv.get("down") or {}).items():
        for link in dead:
            _, rtype, remote = plan[int(gpu_index)][int(link)]
            plan[int(gpu_index)][int(link)] = (0, rtype, remote)
    return plan


def _connected(plan: list[list[tuple[int, int, str]]], gpus: tuple[Function, ...], a: int, b: int) -> bool:
    peer = nvml_bus_id(gpus[b].bdf)
    direct = any(active and remote == peer for active, _, remote in plan[a])
    switched = all(any(active and rtype == REMOTE_SWITCH for active, rtype, _ in plan[i]) for i in (a, b))
    return direct or switched


def _gpu_lines(machine: Machine, i: int, gpu: Function, plan: list[tuple[int, int, str]]) -> Iterator[str]:
    s = gpu.spec
    yield f"gpu {i} busid {nvml_bus_id(gpu.bdf)} {gpu.device << 16 | 0x10DE:#010x} " \
          f"{int(s['subsystem']) << 16 | 0x10DE:#010x}"
    yield f"gpu {i} name {s['name']}"
    yield f"gpu {i} uuid {machine.gpu_uuid(gpu)}"
    yield f"gpu {i} memory {int(s['memory_mib']) * 2**20}"
    yield f"gpu {i} minor {machine.minor(gpu)}"
    if s.get("gpu_numa_id") is not None:
        yield f"gpu {i} numa {int(s['gpu_numa_id'])}"
    node = int(s.get("affinity_node", gpu.numa))
    cpus = str(s["cpu_affinity"]) if "cpu_affinity" in s else format_cpulist(machine.numa_cpus(node))
    yield f"gpu {i} cpus {cpus}"
    # NVML's memory affinity follows the device's NUMA node; a device the kernel gives no node (-1) has
    # none, and nvidia-smi prints N/A in its NUMA Affinity column.
    default_nodes = str(node) if node >= 0 else ""
    nodes = str(s["memory_affinity"]) if "memory_affinity" in s else default_nodes
    yield f"gpu {i} memnodes {nodes}"
    major, minor = (int(x) for x in s["compute_capability"])
    yield f"gpu {i} cc {major} {minor}"
    yield f"gpu {i} arch {ARCHITECTURE[str(s['architecture'])]}"
    if gpu.link is not None:
        yield f"gpu {i} pcie {' '.join(str(v) for v in gpu.link)}"
    yield from _mig_lines(i, s)
    busy = machine.nvml["busy"].get(i)
    if busy:
        yield (f"gpu {i} busy {int(busy.get('processes', 0))} {int(busy.get('gpu_percent', 0))} "
               f"{int(busy.get('memory_percent', 0))}")
    fabric = s.get("fabric")
    if fabric:
        uuid = str(fabric.get("cluster_uuid") or "0" * 32).replace("-", "")
        raw_state = fabric.get("state", "completed")
        state = raw_state if isinstance(raw_state, int) else FABRIC_STATE[str(raw_state)]
        yield f"gpu {i} fabric {state} {int(fabric.get('status', 0))} {int(fabric.get('clique', 0))} {uuid} " \
              f"{int(fabric.get('health_mask', 0))} 0"
        if fabric.get("max_struct_version"):
            yield f"gpu {i} fabricmax {int(fabric['max_struct_version'])}"
    platform = s.get("platform_info")
    if platform:  # module_id is the first GPU's; each next GPU's is one more
        yield (f"gpu {i} platform {platform['chassis_serial']} {int(platform.get('slot', 0))} "
               f"{int(platform.get('tray', 0))} {int(platform.get('host_id', 0))} {int(platform.get('peer_type', 0))} "
               f"{int(platform.get('module_id', 1)) + i}")
    yield from _link_lines(machine, i, plan)


def _mig_lines(i: int, s: Mapping[str, Any]) -> Iterator[str]:
    mig = s.get("mig")
    if mig is None:
        return
    enabled = int(bool(mig.get("enabled", False)))
    yield f"gpu {i} mig {enabled} {int(mig.get('pending', enabled))} {int(mig.get('max', 7))}"
    for slot, inst in enumerate(mig.get("instances") or ()):
        uuid = inst.get("uuid") or f"MIG-{i:02x}{slot:02x}0000-0000-0000-0000-000000000000"
        yield (f"gpu {i} migdev {slot} {int(inst['gi'])} {int(inst.get('ci', 0))} "
               f"{int(inst['memory_mib']) * 2**20} {uuid} {s['name']} MIG {inst['profile']}")


def _link_lines(machine: Machine, i: int, plan: list[tuple[int, int, str]]) -> Iterator[str]:
    nv = machine.nvml["nvlink"]
    if not nv:
        yield f"gpu {i} field {FIELD_NVLINK_LINK_COUNT} {NVML_RETURN['NOT_SUPPORTED']} 0"
        yield f"gpu {i} field {FIELD_NVSWITCH_CONNECTED_LINK_COUNT} {NVML_RETURN['NOT_SUPPORTED']} 0"
        return
    version = int(nv.get("version_enum", NVLINK_VERSION_ENUM[str(nv["version"])]))
    forced_type = _REMOTE_TYPES.get(str(nv.get("remote_type", "")))
    yield f"gpu {i} links {len(plan)}"
    for link, (active, rtype, remote) in enumerate(plan):
        yield f"gpu {i} link {link} {active} {version} {rtype if forced_type is None else forced_type} {remote}"
    to_switch = sum(1 for active, rtype, _ in plan if active and rtype == REMOTE_SWITCH)
    yield f"gpu {i} field {FIELD_NVLINK_LINK_COUNT} 0 {len(plan)}"
    yield f"gpu {i} field {FIELD_NVSWITCH_CONNECTED_LINK_COUNT} 0 {to_switch}"


def _inject_lines(machine: Machine) -> Iterator[str]:
    for rule in machine.nvml["inject"]:
        if "lose" in rule:
            yield f"lose {int(rule['lose'])} {rule['at']} {int(rule.get('nth', 1))}"
            continue
        code = rule["error"]
        if code not in NVML_RETURN:
            raise ProfileError(f"{machine.path}: inject: {code!r} is not an NVML return code")
        gpu, link = rule.get("gpu", "*"), rule.get("link", "*")
        when = f" {int(rule.get('nth', 0))} {int(rule.get('first', 0))}" if "nth" in rule or "first" in rule else ""
        yield f"error {rule['call']} {gpu} {link} {NVML_RETURN[code]}{when}"


def nvml_lines(machine: Machine) -> list[str]:
    nv = machine.nvml
    out = ["fakenvml 1"]
    for key in ("driver", "nvml"):
        if nv[key]:
            out.append(f"{key} {nv[key]}")
    if nv["cuda"] >= 0:
        out.append(f"cuda {nv['cuda']}")
    gpus = machine.gpus
    plan = link_plan(machine)
    tree = PcieTree(machine.functions, machine.host_bridges)
    for i, gpu in enumerate(gpus):
        out += _gpu_lines(machine, i, gpu, plan[i])
    for a in range(len(gpus)):
        for b in range(len(gpus)):
            if a == b:
                continue
            level = tree.level(gpus[a].bdf, gpus[b].bdf)
            out.append(f"pair {a} {b} ancestor {TOPOLOGY_LEVEL[level]}")
            group = "nvlink" if _connected(plan, gpus, a, b) else "pcie"
            for cap, status in nv["p2p"][group].items():
                out.append(f"pair {a} {b} p2p {P2P_CAPS[cap]} {P2P_STATUS[status]}")
    out += _inject_lines(machine)
    return out
