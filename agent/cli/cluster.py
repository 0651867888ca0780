"""``topolink cluster``: the fleet as the agents published it (node labels and ResourceSlices), grouped by
NVLink domain and GPU product, each class's median bus bandwidths and its outliers, and with ``--gpus N``
where a group of N GPUs fits best: in one node, across the nodes of one NVLink domain, or over NICs.

With ``--from FILE`` it reads a saved ``kubectl get nodes,resourceslices -o json`` instead of an API server.

Exit status: 0 reported; 1 the API server refused or failed a request; 2 usage, or no readable kubeconfig;
3 the --from file cannot be read or is not such a list; 4 with --gpus N: no node, NVLink domain or product
class holds N GPUs; with --emit slurm: no NVLink domain holds two nodes (a block topology would be empty).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._claims import add_claim_args, cluster_claims

if TYPE_CHECKING:
    from exporter.kube import ClusterRead

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INPUT, EXIT_NONE_FITS = 0, 1, 2, 3, 4
_EPILOG = ("Reads with a kubeconfig ($KUBECONFIG, ~/.kube/config) or in a pod with its service account: list on "
           "nodes and resourceslices; or, with --from, a saved `kubectl get nodes,resourceslices -o json`. Exit "
           "status: 0 reported; 1 an API request failed; 2 usage or no readable kubeconfig; 3 the --from file "
           "cannot be read or is not such a list; 4 N GPUs fit nowhere, or --emit slurm: no NVLink domain "
           "holds two nodes.")


def add_parsers(sub: Any, add_discovery_args: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``cluster`` (it discovers nothing on this machine: no discovery flags)."""
    del add_discovery_args
    from exporter._core._kube_names import DRIVER, PREFIX
    from exporter._core._settings import TEXT, count

    p = sub.add_parser("cluster", help="the fleet from its labels and slices: classes, outliers, where N GPUs fit",
                       description="Group the fleet's nodes by NVLink domain and GPU product from what topolink "
                                   "published, show each class's median estimated bus bandwidth and the nodes "
                                   "under 0.8 of their peers' median, and where a group of N GPUs fits best.",
                       epilog=_EPILOG)
    p.add_argument("--gpus", type=count(1, 1 << 20), metavar="N", help="also list where a group of N GPUs fits best")
    p.add_argument("--top", type=count(1, 10_000), default=5, metavar="K",
                   help="places to print for --gpus (default 5)")
    p.add_argument("--format", choices=("table", "json", "claims"), default="table",
                   help="json: the fleet document (topolink.cluster/v1); claims: with --gpus N, the DeviceClasses "
                        "and ResourceClaimTemplates of each claim class (YAML, docs/claims.md)")
    p.add_argument("--apply", action="store_true",
                   help="with --format claims: also apply the objects (server-side apply, field manager topolink; "
                        "needs patch on deviceclasses and resourceclaimtemplates)")
    p.add_argument("--groups", action="store_true",
                   help="also show each claim class's GPU groups (one slice list per class)")
    p.add_argument("--kubeconfig", type=TEXT, metavar="FILE",
                   help="default: in-cluster, else $KUBECONFIG or ~/.kube/config")
    p.add_argument("--from", type=TEXT, dest="from_file", metavar="FILE",
                   help="read a saved `kubectl get nodes,resourceslices -o json` (- for standard input) instead of "
                        "an API server")
    p.add_argument("--label-prefix", type=PREFIX, default="gpu.topology",
                   help="the agents' label prefix (default gpu.topology)")
    p.add_argument("--dra-driver-name", type=DRIVER, default="gpu.topology",
                   help="the agents' ResourceSlice driver (default gpu.topology)")
    p.add_argument("--page-size", type=count(1, 10_000), default=500, metavar="N",
                   help="objects per list request (limit/continue; default 500)")
    add_claim_args(p)
    from ._cluster_emit import add_emit_args

    add_emit_args(p)
    p.set_defaults(handler=_cmd_cluster)


def _cmd_cluster(args: argparse.Namespace) -> int:
    from exporter.kube import BadConfig, LightkubeApi, PublishError, read_cluster

    if args.format == "claims" and args.gpus is None:
        print("topolink cluster: --format claims needs --gpus N", file=sys.stderr)
        return EXIT_USAGE
    if args.apply and (args.format != "claims" or args.from_file is not None):
        print("topolink cluster: --apply needs --format claims and an API server (not --from)", file=sys.stderr)
        return EXIT_USAGE
    if args.from_file is not None and args.kubeconfig is not None:
        print("topolink cluster: --from and --kubeconfig exclude each other", file=sys.stderr)
        return EXIT_USAGE
    if args.emit is not None:
        from ._cluster_emit import run_emit

        return run_emit(args)

    if args.from_file is not None:
        try:
            read, saved = _read_saved(args)
            return _report(args, read, saved)
        except (OSError, ValueError, PublishError) as exc:
            print(f"topolink cluster: {exc}", file=sys.stderr)
            return EXIT_INPUT
    try:
        api = LightkubeApi.connect(kubeconfig=args.kubeconfig)
        read = read_cluster(api, prefix=args.label_prefix, driver=args.dra_driver_name, limit=args.page_size)
        return _report(args, read, api)
    except BadConfig as exc:
        print(f"topolink cluster: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except PublishError as exc:
        print(f"topolink cluster: {exc}", file=sys.stderr)
        return EXIT_FAILED


def _read_saved(args: argparse.Namespace) -> tuple[ClusterRead, Any]:
    """The saved list ``--from`` names (and, for the claim classes, the list to read them from); OSError or
    ValueError with one line saying why it cannot be read."""
    from exporter import UnsafeFile, read_regular
    from exporter.kube import MAX_SAVED_BYTES, InvalidObject, SavedApi, read_saved

    path = args.from_file
    try:
        data = sys.stdin.buffer.read(MAX_SAVED_BYTES + 1) if path == "-" else read_regular(path, MAX_SAVED_BYTES)
        if len(data) > MAX_SAVED_BYTES:
            raise ValueError(f"{path}: larger than the {MAX_SAVED_BYTES} bytes allowed: not read")
        name = "standard input" if path == "-" else path
        read = read_saved(data, name=name, prefix=args.label_prefix, driver=args.dra_driver_name)
        return read, SavedApi(data, name) if args.groups or args.format == "claims" else None
    except OSError as exc:
        raise OSError(f"{path}: {exc.strerror or exc}") from exc
    except (UnsafeFile, InvalidObject) as exc:
        raise ValueError(str(exc)) from exc


def _report(args: argparse.Namespace, read: ClusterRead, api: Any) -> int:
    import json

    from exporter.kube import cluster_document, cluster_table
    from topology import fleet_report

    if args.format == "claims" or args.groups:
        return cluster_claims(args, api, read)
    doc = cluster_document(read, fleet_report(read.summaries, gpus=args.gpus))
    sys.stdout.write(json.dumps(doc, indent=1) + "\n" if args.format == "json" else cluster_table(doc, top=args.top))
    return EXIT_NONE_FITS if args.gpus is not None and not doc["fits"] else EXIT_OK
