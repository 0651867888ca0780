"""``topolink prune``: remove what topolink published to Kubernetes, on one node or the whole cluster.

Exit status: 0 pruned (also when there was nothing to remove, or the server does not serve a kind at all);
1 the API server refused or failed a request (what was removed before it stays removed; run it again);
2 usage (neither --node-name nor --all-nodes), or no readable kubeconfig.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
_EPILOG = ("Say which nodes: --node-name NODE prunes that node, --all-nodes every node of the cluster (what the "
           "uninstall Job does); with neither, nothing is pruned and the exit status is 2. $NODE_NAME is never "
           "read: a variable left in a shell must not narrow an uninstall. Stop the agents and the fleet controller "
           "first (delete the DaemonSet and the Deployment topolink-controller), or they write again what was "
           "removed. Exit status: 0 pruned; 1 an API request failed; 2 usage or no "
           "readable kubeconfig.")


def add_parsers(sub: Any, add_discovery_args: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``prune`` to the ``topolink`` subcommands (it discovers nothing: no discovery flags)."""
    del add_discovery_args
    from exporter._core._kube_names import NODE

    from ._claims import _rules

    namespace = _rules()[3]  # the rule of the controller's --lease-namespace
    from exporter.kube import add_kube_args

    p = sub.add_parser("prune", help="remove every label, NodeFeature, ResourceSlice and taint rule topolink made",
                       description="The uninstall path: clears our labels (an empty server-side apply, so only "
                                   "keys our field manager owns go), and deletes our NodeFeatures, ResourceSlices "
                                   "and DeviceTaintRules, on one node or on every node; on every node, also the "
                                   "objects `topolink cluster --apply` and the fleet controller made (their label "
                                   "and their field manager's fields, never another's).", epilog=_EPILOG)
    which = p.add_mutually_exclusive_group()
    # `--node-name "$NODE"` with $NODE unset is refused by the text rule: it must not mean every node
    which.add_argument("--node-name", type=NODE, metavar="NODE",
                       help="prune this node only (no default; $NODE_NAME is not read)")
    which.add_argument("--all-nodes", action="store_true", help="prune every node of the cluster, and the objects "
                       "of `topolink cluster --apply` and of the fleet controller")
    p.add_argument("--controller-namespace", type=namespace, default=None, metavar="NS",
                   help="where the fleet controller keeps its Slurm ConfigMap (its Lease's namespace; default "
                        "$POD_NAMESPACE, else topolink)")
    add_kube_args(p, node_name=False)
    p.set_defaults(handler=_cmd_prune)


def _cmd_prune(args: argparse.Namespace) -> int:
    from exporter.kube import BadConfig, InvalidObject, PublishError, config_from_args, prune

    try:
        cfg = config_from_args(args)
    except (ValueError, InvalidObject) as exc:  # a prefix or driver name the API would refuse
        print(f"topolink prune: {exc}", file=sys.stderr)
        return EXIT_USAGE
    target = args.node_name  # only the flag: $NODE_NAME in a shell must not narrow an uninstall
    if target is None and not args.all_nodes:
        print("topolink prune: say which nodes: --node-name NODE for one, --all-nodes for every node of the "
              "cluster", file=sys.stderr)
        return EXIT_USAGE
    import os

    namespace = args.controller_namespace or os.environ.get("POD_NAMESPACE") or "topolink"
    try:
        done = prune(cfg, target, controller_namespace=namespace)
    except BadConfig as exc:
        print(f"topolink prune: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except PublishError as exc:
        print(f"topolink prune: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(f"pruned {'node ' + target if target else 'every node'}: labels cleared on {done.labels} node(s), "
          f"{done.node_features} NodeFeature(s), {done.slices} ResourceSlice(s), {done.taint_rules} "
          f"DeviceTaintRule(s), {done.files} feature file(s) removed")
    for kind, removed in done.cluster_objects:
        print(f"{removed} {kind} removed")
    if done.node_marks:
        print(f"the GPUTopologyDegraded condition or gpu topology taint removed from {done.node_marks} node(s)")
    for kind in done.not_served:
        print(f"{kind}: not served by this API server, nothing to prune")
    return EXIT_OK
