"""``topolink doctor``: what the agent's settings need and what is missing, each with its fix, before a rollout
that would only time out. On the node: the NVIDIA driver (NVML loads and initialises, as discovery opens it).
In the cluster: the RuntimeClass the DaemonSet names, the NodeFeature CRD when labels go through NFD, and the
permissions of every sink asked for (a SelfSubjectAccessReview each, as the caller: run it with the agent's
account to check the agent's). The settings are the agent's own flags and ``TOPOLINK_*`` variables.

Exit status: 0 nothing missing; 1 something missing (each line says what and the fix); 2 usage or no readable
kubeconfig.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

EXIT_OK, EXIT_MISSING, EXIT_USAGE = 0, 1, 2
_EPILOG = ("Run it on a GPU node (or in a pod like the agent's) for the driver check, with the agent's kubeconfig "
           "or service account for the cluster checks; --no-node or --no-cluster leaves either out. Exit status: 0 "
           "nothing missing; 1 something missing; 2 usage or no readable kubeconfig.")


def add_parsers(sub: Any, add_discovery_args: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``doctor`` (no discovery: it only loads NVML)."""
    del add_discovery_args
    from exporter._core._kube_names import Subdomain
    from exporter._core._settings import TEXT, Pattern, env_value
    from exporter.kube import add_kube_args

    p = sub.add_parser("doctor", help="check what the agent needs on this node and in the cluster, with the fixes",
                       description="Report what the agent's settings need and what is missing, each with its fix: "
                                   "the NVIDIA driver, the RuntimeClass, the NodeFeature CRD (labels through NFD), "
                                   "and the RBAC of every sink asked for.", epilog=_EPILOG)
    p.add_argument("--node", action=argparse.BooleanOptionalAction, default=True,
                   help="check the NVIDIA driver on this machine (default: on)")
    p.add_argument("--cluster", action=argparse.BooleanOptionalAction, default=True,
                   help="check the cluster through the API server (default: on)")
    p.add_argument("--nvml-library", type=TEXT, metavar="PATH",
                   default=env_value(None, "TOPOLINK_NVML_LIBRARY", TEXT, None),
                   help="load NVML from PATH instead of libnvidia-ml.so.1 ($TOPOLINK_NVML_LIBRARY)")
    p.add_argument("--runtime-class", type=Subdomain("a RuntimeClass name", 253), default="nvidia", metavar="NAME",
                   help="the RuntimeClass the DaemonSet names (default nvidia)")
    p.add_argument("--service-account", type=Pattern(
        "NAMESPACE/NAME of a ServiceAccount", r"[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9.]*[a-z0-9])?", 317,
        bad=("topolink", "Topolink/agent", "a/b/c")), metavar="NAMESPACE/NAME",
        help="check the permissions of this account (the agent's: topolink/topolink) instead of the caller's")
    add_kube_args(p)
    p.set_defaults(handler=_cmd_doctor)


def _cmd_doctor(args: argparse.Namespace) -> int:
    from exporter.kube import BadConfig, InvalidObject, LightkubeApi, PublishError, config_from_args
    from exporter.kube._config._doctor import cluster_findings

    from ._checks import driver

    findings = [driver(args.nvml_library)] if args.node else []
    if args.cluster:
        try:
            cfg = config_from_args(args)
            api = LightkubeApi.connect(kubeconfig=cfg.kubeconfig)
            findings += cluster_findings(api, cfg, args.runtime_class, args.service_account)
        except (BadConfig, InvalidObject, ValueError) as exc:
            print(f"topolink doctor: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except PublishError as exc:
            print(f"topolink doctor: the API server: {exc}", file=sys.stderr)
            return EXIT_MISSING
    for f in findings:
        print(f"{'ok' if f.ok else 'MISSING':8}{f.check}: {f.detail}")
        if not f.ok:
            print(f"        fix: {f.fix}")
    return EXIT_OK if all(f.ok for f in findings) else EXIT_MISSING

