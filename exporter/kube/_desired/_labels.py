"""Node labels: small pure labelers ``(Snapshot, LabelConfig, previous) -> {key: value}``, merged strictly.

A labeler declares the keys it may produce and the facts it needs. When the snapshot marks one of those
facts unknown, its keys keep the values the Node already has; a value of ``None`` from a labeler means
the same for one key ("not measured this time"). Every value is coarse and deterministic.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from topology import (
    NODE,
    Aspect,
    GdrVerdict,
    Knowledge,
    PathClass,
    Snapshot,
    Source,
    gdr_readiness,
    gpu_nic_classes,
    nearest_nics,
    nvlink_islands,
    path_index,
    structure_hash,
)

from ..._core._claim_groups import claim_groups, places_of
from ..._core._health import BwKind, classify, degradation, node_ratio, ratios
from .._api._errors import InvalidObject
from ._busbw import SIZES, busbw_labels
from ._compat import compat_labels
from ._names import check_labels, check_prefix, joined_value, label_value, own_domain, sanitise_value
from ._rack import rack_labels

Values = dict[str, str | None]
_NODE_ASPECTS = frozenset({Aspect.GPUS, Aspect.NICS, Aspect.PCI, Aspect.NUMA, Aspect.NVLINKS, Aspect.GDR,
                           Aspect.VERSIONS})
_GPU_ASPECTS = frozenset({Aspect.IDENTITY, Aspect.PCIE_PATH, Aspect.PCIE_LINK, Aspect.NUMA, Aspect.NVLINKS,
                          Aspect.FABRIC})
# A NIC's identity (name, RDMA) follows the NIC inventory, which labelers about NICs need anyway: an
# IDENTITY need is the GPUs' (gpu.count must not wait for a NIC's name).
_NIC_ASPECTS = frozenset({Aspect.PCIE_PATH, Aspect.NUMA, Aspect.PORTS})


@dataclass(frozen=True, slots=True, kw_only=True)
class LabelConfig:
    prefix: str = "gpu.topology"
    compat: bool = False  # also the nvidia.com/ keys, where no other component owns them

    def __post_init__(self) -> None:
        check_prefix(self.prefix)


class LabelConflict(InvalidObject):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class Labeler:
    name: str
    keys: tuple[tuple[str, str], ...]  # (key suffix, what its value means); absolute keys contain a "/"
    needs: tuple[Aspect, ...]
    fn: Callable[[Snapshot, LabelConfig, Mapping[str, str]], Values]
    compat: bool = False

    def full_keys(self, cfg: LabelConfig) -> tuple[str, ...]:
        return tuple(k if "/" in k else f"{cfg.prefix}/{k}" for k, _ in self.keys)


def known(snap: Snapshot, k: Knowledge, needs: Sequence[Aspect]) -> bool:
    """Every fact of ``needs`` known, node-wide and for every GPU / NIC it applies to."""
    if Aspect.ALL in needs:
        return snap.complete
    for a in needs:
        if a in _NODE_ASPECTS and not k.knows(NODE, a):
            return False
        if a in _GPU_ASPECTS and not all(k.knows(g.id, a) for g in snap.gpus):
            return False
        if a in _NIC_ASPECTS and a is not Aspect.NUMA and not all(k.knows(n.id, a) for n in snap.nics):
            return False
    return True


def _live(snap: Snapshot) -> list[str]:
    return [g.id for g in snap.gpus if not g.lost]


def _counts(snap: Snapshot, cfg: LabelConfig, prev: Mapping[str, str]) -> Values:
    products = sorted({sanitise_value(g.name) for g in snap.gpus if g.name})
    out: Values = {"gpu.count": str(len(snap.gpus))}
    if snap.gpus:
        out["gpu.product"] = products[0] if len(products) == 1 else "mixed"
    return out


def _nvlink(snap: Snapshot, cfg: LabelConfig, prev: Mapping[str, str]) -> Values:
    if not snap.gpus:
        return {}
    islands = nvlink_islands(snap)
    largest = max((i.size for i in islands), default=1)
    gens = [v for lk in snap.links if lk.kind.value == "nvlink" and (v := lk.nvlink_version or 0) > 0]
    switched = any(lk.kind.value == "nvlink" and {lk.a, lk.b} & {s.id for s in snap.nvswitches} for lk in snap.links)
    kind = "nvswitch" if switched else "pcie" if largest < 2 else "nvlink-pairs" if largest == 2 else "nvlink-mesh"
    out: Values = {"interconnect": kind, "nvlink-domain-size": str(largest), "nvlink-islands": str(len(islands)),
                   "nvlink-island-max": str(largest)}
    if gens:
        out["nvlink-gen"] = str(min(gens))
    return out


def _domain(snap: Snapshot, cfg: LabelConfig, prev: Mapping[str, str]) -> Values:
    if not snap.gpus:
        return {}
    cliques = {g.fabric.clique if g.fabric else None for g in snap.gpus if not g.lost}
    clique = next(iter(cliques)) if len(cliques) == 1 else None
    return {"nvlink-domain": label_value(clique) if clique else own_domain(snap.node)}


def _numa(snap: Snapshot, cfg: LabelConfig, prev: Mapping[str, str]) -> Values:
    host = [n for n in snap.numa_nodes if n.cpus and not n.gpu_memory]
    if not host:
        return {}
    index = path_index(snap)
    per = Counter(index.numa_of(g) for g in _live(snap))
    most = max((per[n.os_index] for n in host), default=0)
    return {"numa-nodes": str(len(host)), "gpus-per-numa": str(most) if most else None}


def _pcie(snap: Snapshot, cfg: LabelConfig, prev: Mapping[str, str]) -> Values:
    gens = [p.max_gen for g in snap.gpus if (p := g.pcie) and p.max_gen and p.max_gen > 0]
    widths = [w for g in snap.gpus if (p := g.pcie) and (w := p.current_width or p.max_width) and w > 0]
    out: Values = {}
    if gens:
        out["pcie-gen-min"] = str(min(gens))
    if widths:
        out["pcie-width-min"] = str(min(widths))
    return out


_PATH_ORDER = ("PIX", "PXB", "PHB", "NODE", "SYS")
_GDR_ORDER = (GdrVerdict.NOT_READY, GdrVerdict.UNKNOWN, GdrVerdict.DEGRADED, GdrVerdict.READY)


def _nics(snap: Snapshot, cfg: LabelConfig, prev: Mapping[str, str]) -> Values:
    rdma = [n for n in snap.nics if n.rdma]
    out: Values = {"rdma-nics": str(len(rdma))}
    gpus = _live(snap)
    if rdma and gpus:
        rank = {c: i for i, c in enumerate(_PATH_ORDER)}  # "X" (a NIC on the GPU's own function) ranks first
        pairs = gpu_nic_classes(snap)  # every GPU and RDMA NIC pair, once per snapshot
        classes = [pairs.classes[g] for g in gpus]
        if any(c in (PathClass.UNKNOWN, PathClass.LOST) for row in classes for c in row):
            out["gpu-nic-path"] = None  # a class not known could be the nearest: keep what the Node has
        else:
            out["gpu-nic-path"] = _PATH_ORDER[max(min(rank.get(c.value, 0) for c in row) for row in classes)]
    return out


def _gdr(snap: Snapshot, cfg: LabelConfig, prev: Mapping[str, str]) -> Values:
    pairs = gpu_nic_classes(snap)
    if any(c in (PathClass.UNKNOWN, PathClass.LOST) for g in _live(snap) for c in pairs.classes[g]):
        return {"gdr": None}  # a GPU's nearest NIC is not known: keep what the Node has
    verdicts = [gdr_readiness(snap, g, n[0]).verdict for g in _live(snap) if (n := nearest_nics(snap, g))]
    return {"gdr": min(verdicts, key=_GDR_ORDER.index).value} if verdicts else {}


def _degraded(snap: Snapshot, cfg: LabelConfig, prev: Mapping[str, str]) -> Values:
    if not snap.gpus:
        return {}
    bad = degradation(snap)
    reasons = sorted({r for rs in bad.values() for r in rs})
    return {"degraded": "true" if bad else "false", "degraded-reason": joined_value(reasons) or "none"}


def _bandwidth(snap: Snapshot, cfg: LabelConfig, prev: Mapping[str, str]) -> Values:
    found, shown = ratios(snap), ratios(snap, every_profile=True)
    out: Values = {}
    for kind in BwKind:
        key = f"bw-{kind.value}"
        ratio = node_ratio(kind, found.get(kind, []))
        if ratio is None and shown.get(kind):
            continue  # measured, but only by a profile never classed (quick): no class, not an old one either
        out[key] = None if ratio is None else classify(ratio, prev.get(f"{cfg.prefix}/{key}"))
    named = {dict(m.conditions).get("profile", "") for m in snap.measurements if m.source is Source.MEASURED}
    profiles = sorted({p if p.isascii() and p.isalnum() and p.islower() and len(p) <= 20 else "other"
                       for p in named if p})
    out["probe-profile"] = joined_value(profiles) or None
    return out


def _busbw(snap: Snapshot, cfg: LabelConfig, prev: Mapping[str, str]) -> Values:
    return busbw_labels(snap, cfg.prefix, prev)


def _hash(snap: Snapshot, cfg: LabelConfig, prev: Mapping[str, str]) -> Values:
    return {"structure-hash": structure_hash(snap)[:12]}


def _claims(snap: Snapshot, cfg: LabelConfig, prev: Mapping[str, str]) -> Values:
    return {"claim-class": claim_groups(places_of(snap)).class_id} if snap.gpus else {}


A = Aspect
LABELERS: tuple[Labeler, ...] = (
    Labeler(name="counts", fn=_counts, needs=(A.GPUS, A.IDENTITY), keys=(
        ("gpu.count", "number of GPUs"),
        ("gpu.product", "GPU product name (GFD's sanitising), `mixed` when the node has several"))),
    Labeler(name="nvlink", fn=_nvlink, needs=(A.GPUS, A.NVLINKS), keys=(
        ("interconnect", "`nvswitch`, `nvlink-mesh` (an island of more than two), `nvlink-pairs` or `pcie`"),
        ("nvlink-domain-size", "GPUs of this node in its largest NVLink domain"),
        ("nvlink-islands", "NVLink islands (a GPU without NVLink is an island of one)"),
        ("nvlink-island-max", "GPUs in the largest NVLink island"),
        ("nvlink-gen", "lowest NVLink generation; absent without NVLink"))),
    Labeler(name="domain", fn=_domain, needs=(A.GPUS, A.FABRIC), keys=(
        ("nvlink-domain", "the fabric clique `<clusterUuid>.<cliqueId>` shared by every GPU, else `node_<node "
                          "name>` (a domain of its own, never equal to the host name): the value to use as a "
                          "topology level"),)),
    Labeler(name="rack", fn=rack_labels, needs=(A.GPUS, A.FABRIC), keys=(
        ("rack", "GB200/GB300: the rack's chassis serial number (NVML platform info), the same on every GPU: a "
                 "topology level"), ("tray", "GB200/GB300: the compute tray's index in its rack"))),
    Labeler(name="numa", fn=_numa, needs=(A.GPUS, A.NUMA, A.PCIE_PATH), keys=(
        ("numa-nodes", "NUMA nodes with CPUs"),
        ("gpus-per-numa", "most GPUs near one NUMA node"))),
    Labeler(name="pcie", fn=_pcie, needs=(A.GPUS, A.PCIE_LINK), keys=(
        ("pcie-gen-min", "lowest maximum PCIe generation among the GPUs (the current one falls at idle)"),
        ("pcie-width-min", "lowest current PCIe width among the GPUs"))),
    Labeler(name="nics", fn=_nics, needs=(A.GPUS, A.NICS, A.PCI, A.PCIE_PATH, A.NUMA), keys=(
        ("rdma-nics", "RDMA NICs"),
        ("gpu-nic-path", "every GPU has an RDMA NIC this close or closer (`PIX` ... `SYS`, as `topo -m`)"))),
    Labeler(name="gdr", fn=_gdr, needs=(A.GPUS, A.NICS, A.PCI, A.PCIE_PATH, A.NUMA, A.GDR), keys=(
        ("gdr", "GPUDirect RDMA readiness to the nearest NIC, the worst GPU's: `ready`, `degraded`, "
                "`unknown`, `not-ready`"),)),
    Labeler(name="degraded", fn=_degraded, needs=(A.GPUS, A.NVLINKS, A.PCIE_LINK, A.FABRIC), keys=(
        ("degraded", "`true` when a GPU's links are degraded"),
        ("degraded-reason", "`none`, or the reasons joined by `.`: `nvlink-down`, `pcie-slow`, `pcie-width`, "
                            "`fabric-degraded-bw`, `fabric-route-unhealthy`, `fabric-config`; where they do not "
                            "fit a label value (63 characters), those that fit in that order, then `more`"))),
    Labeler(name="bandwidth", fn=_bandwidth, needs=(A.GPUS, A.NVLINKS, A.PCIE_LINK), keys=(
        ("bw-gpu-gpu", "measured GPU-GPU copy class: `full`, `reduced`, `low` (hysteresis), from the `full` "
                       "probe profile's figures only (`quick` reads below it on fast links: not classed)"),
        ("bw-host-gpu", "measured host-GPU copy class (`full` profile)"),
        ("bw-allreduce", "measured NCCL all-reduce bus bandwidth class (`full` profile)"),
        ("probe-profile", "the probe profiles of the node's measured figures joined by `.` (`quick`, `full`, "
                          "`full.quick`; `other`: not a plain word); unchanged while none names its profile"))),
    Labeler(name="busbw", fn=_busbw, needs=(A.GPUS, A.NVLINKS, A.PCIE_PATH, A.PCIE_LINK, A.NUMA, A.MIG), keys=tuple(
        (f"allreduce-busbw-{n}", f"estimated all-reduce bus bandwidth of the best {n}-GPU group (cost model, 1 GiB, "
                                 "not measured) in GB/s, rounded down to a power of two (`512`: 512-1023) with "
                                 "hysteresis: a whole number for node affinity `Gt`/`Lt`; absent when the node has "
                                 f"fewer than {n} GPUs to group" if n == SIZES[0] else
         f"the same for the best {n}-GPU group") for n in SIZES)),
    Labeler(name="hash", fn=_hash, needs=(A.ALL,), keys=(
        ("structure-hash", "first 12 hex digits of the snapshot's structure hash"),)),
    Labeler(name="claims", fn=_claims, needs=(A.GPUS, A.IDENTITY, A.NVLINKS, A.PCI, A.PCIE_PATH, A.NICS), keys=(
        ("claim-class", "first 12 hex digits of a hash over the node's GPU groups by bus id (NVLink islands, "
                        "GPUs under one PCIe switch, GPU and nearest RDMA NIC): nodes with the same value take the "
                        "same ResourceClaimTemplates (docs/claims.md)"),)),
    Labeler(name="compat", fn=compat_labels, needs=(A.GPUS, A.NVLINKS, A.FABRIC), compat=True, keys=(
        ("nvidia.com/nvswitch.present", "opt-in: `true` when the node has NVSwitches"),
        ("nvidia.com/nvlink.version", "opt-in: lowest NVLink generation"),
        ("nvidia.com/gpu.clique", "opt-in: GFD's clique value; never written when another component owns it"))),
)


def labelers(cfg: LabelConfig) -> tuple[Labeler, ...]:
    return tuple(lb for lb in LABELERS if cfg.compat or not lb.compat)


def catalogue(cfg: LabelConfig) -> frozenset[str]:
    """Every key we could produce: the only keys we ever remove."""
    return frozenset(k for lb in labelers(cfg) for k in lb.full_keys(cfg))


def desired_labels(snap: Snapshot, cfg: LabelConfig, observed: Mapping[str, str]) -> dict[str, str]:
    """The labels this node should carry, given what it carries now (``observed``)."""
    k = snap.knowledge()
    merged: dict[str, str] = {}
    owner: dict[str, str] = {}
    for lb in labelers(cfg):
        keys = lb.full_keys(cfg)
        if known(snap, k, lb.needs):
            values = {key if "/" in key else f"{cfg.prefix}/{key}": v for key, v in lb.fn(snap, cfg, observed).items()}
            stray = set(values) - set(keys)
            if stray:
                raise LabelConflict(f"{lb.name} produced undeclared keys {sorted(stray)}")
        else:
            values = dict.fromkeys(keys)
        for key, produced in values.items():
            value = produced if produced is not None else observed.get(key)
            if value is None:
                continue
            if merged.get(key, value) != value:
                raise LabelConflict(f"{key}: {owner[key]} says {merged[key]!r}, {lb.name} says {value!r}")
            merged[key], owner[key] = value, lb.name
    if not snap.complete:  # never delete on partial knowledge
        ours = catalogue(cfg)
        merged |= {key: v for key, v in observed.items() if key in ours and key not in merged}
    return check_labels(dict(sorted(merged.items())))
