"""``--format claims`` of ``topolink place`` (one node) and ``topolink cluster`` (a fleet): the settings of the
GPU and NIC drivers the claims select from, and the YAML of the DeviceClasses and ResourceClaimTemplates with
a comment per class saying which nodes it holds, the node selector its pods need, and why a template is missing.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    from exporter.kube import ClaimClass, ClaimConfig, ClaimPlan, ClusterRead
    from topology import Snapshot

_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"


def _rules() -> tuple[Any, Any, Any, Any]:
    """The drivers' names, the attribute domain (or ''), the bus id attribute and the namespace."""
    from exporter._core._settings import Pattern

    subdomain = "a lowercase DNS subdomain of at most 63 characters"
    return (Pattern(subdomain, _SUBDOMAIN, 63, bad=("GPU.nvidia.com", "gpu..nvidia", "-gpu")),
            Pattern(subdomain + " (or '' for none)", _SUBDOMAIN, 63, empty=True, bad=("Gpu", "a_b")),
            Pattern("an attribute name DOMAIN/NAME (a C identifier, at most 32)",
                    r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z_][A-Za-z0-9_]{0,31}", 63 + 1 + 32,
                    bad=("pciBusID", "resource.kubernetes.io/9bus", "a/" + "b" * 33)),
            Pattern("a namespace name (a DNS label)", r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", 63,
                    bad=("kube.system", "Default", "-a")))


def add_claim_args(p: argparse.ArgumentParser) -> None:
    driver, domain, attribute, namespace = _rules()
    g = p.add_argument_group("claims (--format claims)")
    g.add_argument("--gpu-driver", type=driver, default="gpu.nvidia.com", metavar="NAME",
                   help="the DRA driver whose GPUs the claims select (default gpu.nvidia.com, NVIDIA's)")
    g.add_argument("--gpu-attribute-domain", type=domain, default="gpu.nvidia.com", metavar="DOMAIN",
                   help="the domain of that driver's `type` attribute, which must be `gpu` (default gpu.nvidia.com; "
                        "'' to select every device of the driver)")
    g.add_argument("--nic-driver", type=driver, default="dra.net", metavar="NAME",
                   help="the DRA driver whose RDMA NICs the GPU+NIC claims select (default dra.net)")
    g.add_argument("--bus-id-attribute", type=attribute, default="resource.kubernetes.io/pciBusID", metavar="ATTR",
                   help="the attribute the GPU driver publishes PCI bus ids in (default "
                        "resource.kubernetes.io/pciBusID, the standard one)")
    g.add_argument("--nic-bus-id-attribute", type=attribute, action="append", metavar="ATTR",
                   help="an attribute the NIC driver publishes PCI bus ids in (repeat: a NIC matches by any; default "
                        "the standard one and, for dra.net, dra.net/pciAddress)")
    g.add_argument("--namespace", type=namespace, default="default", help="the templates' namespace (default default)")


def claim_config(args: argparse.Namespace, prefix: str = "gpu.topology") -> ClaimConfig:
    from exporter.kube import ClaimConfig

    return ClaimConfig(gpu_driver=args.gpu_driver, gpu_domain=args.gpu_attribute_domain, nic_driver=args.nic_driver,
                       bus_id_attribute=args.bus_id_attribute,
                       nic_bus_attributes=tuple(args.nic_bus_id_attribute or ()), namespace=args.namespace,
                       prefix=prefix)


def claims_yaml(plan: ClaimPlan, classes: Sequence[ClaimClass], n: int, cfg: ClaimConfig,
                problems: Sequence[str] = ()) -> str:
    """The objects as YAML documents, each class's templates after a comment naming its nodes and the node
    selector its pods need; what could not be written is said in comments, never silently left out."""
    import yaml

    def dump(obj: object) -> str:
        return "---\n" + yaml.safe_dump(obj, sort_keys=False, width=200)

    lines = [f"# DeviceClasses and ResourceClaimTemplates for groups of {n} GPUs, from topolink's claim classes "
             f"(the {cfg.class_label} label).", f"# GPUs of {cfg.gpu_driver}, RDMA NICs of {cfg.nic_driver}, "
             f"selected by {cfg.bus_id_attribute} (NICs: {' or '.join(cfg.nic_buses)}), each read behind has()."]
    lines += [f"# not read: {p}" for p in problems]
    out = ["\n".join(lines) + "\n"]
    templates: dict[str, list[object]] = {}
    for obj in plan.objects:
        if obj["kind"] == "DeviceClass":
            out.append(dump(obj))
        else:
            templates.setdefault(obj["metadata"]["labels"][cfg.class_label], []).append(obj)
    for cls in classes:
        shown = ", ".join(cls.nodes[:5]) + (f" and {len(cls.nodes) - 5} more" if len(cls.nodes) > 5 else "")
        head = [f"# class {cls.id}: {len(cls.nodes)} node(s) ({shown}); {cls.groups.gpus} GPUs each.",
                f"# A pod using these templates must select the class: nodeSelector {{{cfg.class_label}: {cls.id}}}"]
        head += [f"# {kind}: {why}" for cid, kind, why in plan.skipped if cid == cls.id]
        out.append("\n".join(head) + "\n")
        out += [dump(t) for t in templates.get(cls.id, [])]
    return "".join(out)


def apply_plan(api: Any, plan: ClaimPlan) -> None:
    """Server-side apply of every object, field manager ``topolink``, forced (we own what we write); an
    error stops at the object it names (``PublishError``, which the command reports)."""
    import sys

    from exporter.kube import kind_of

    for obj in plan.objects:  # the kinds of the fleet controller's, which computes its objects with this same code
        api.apply(kind_of(obj), obj)
    print(f"topolink cluster: applied {len(plan.objects)} objects", file=sys.stderr)


def _groups_of_n(plan: ClaimPlan) -> bool:
    """Whether a template for groups of N was written (the GPU+NIC pair's is written whatever N is)."""
    return any(o["kind"] == "ResourceClaimTemplate" and o["spec"]["spec"]["devices"]["requests"][0]["name"] == "gpus"
               for o in plan.objects)


def cluster_claims(args: argparse.Namespace, api: Any, read: ClusterRead) -> int:
    """``topolink cluster --groups`` (the report with each claim class's groups) or ``--format claims`` (the
    objects); exit 4 when no class holds a group of N (for the objects) or N GPUs fit nowhere (for the report)."""
    import json
    import sys

    from exporter.kube import (
        claim_classes_document,
        claim_classes_table,
        claim_plan,
        cluster_document,
        cluster_table,
        read_claim_classes,
    )
    from topology import fleet_report

    claims = read_claim_classes(api, prefix=args.label_prefix, driver=args.dra_driver_name, limit=args.page_size)
    if args.format == "claims":
        cfg = claim_config(args, args.label_prefix)
        plan = claim_plan(claims.classes, args.gpus, cfg)
        sys.stdout.write(claims_yaml(plan, claims.classes, args.gpus, cfg, claims.problems))
        if args.apply:
            apply_plan(api, plan)
        return 0 if _groups_of_n(plan) else 4
    doc = cluster_document(read, fleet_report(read.summaries, gpus=args.gpus))
    groups = claim_classes_document(claims)
    if args.format == "json":
        sys.stdout.write(json.dumps(doc | {"claim_classes": groups}, indent=1) + "\n")
    else:
        sys.stdout.write(cluster_table(doc, top=args.top) + claim_classes_table(groups))
    return 4 if args.gpus is not None and not doc["fits"] else 0


def node_claims(args: argparse.Namespace, snap: Snapshot) -> int:
    """``topolink place --gpus N --format claims``: this node's class and its objects; exit 4 when no group of
    N exists on it."""
    import sys

    from exporter.kube import claim_plan, node_class

    cls = node_class(snap, snap.node or "this node")
    cfg = claim_config(args)
    plan = claim_plan([cls], args.gpus, cfg)
    sys.stdout.write(claims_yaml(plan, [cls], args.gpus, cfg))
    return 0 if _groups_of_n(plan) else 4
