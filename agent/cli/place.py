"""``topolink place --gpus N``: the K best groups of N GPUs on this node (or a saved snapshot) for a collective,
by the cost model's estimate, with each group's time, bus bandwidth, bottleneck and the source of its inputs.

Lost GPUs are left out, and so are busy ones (compute processes, or utilisation over 10%, asked of NVML as
the agent asks before probing) unless ``--include-busy``; a saved snapshot cannot say which GPUs are busy
now, and the output says so.

Exit status: 0 answered; 1 answered, but some facts of the snapshot are unknown (listed on standard error);
2 usage (a bad --size, --top or --gpus, an --exclude that names no GPU); 3 the --from file cannot be read;
4 no group of N GPUs: fewer are available.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._claims import add_claim_args, node_claims
from ._common import EXIT_USAGE, discover_from_args, exit_for, load_snapshot

if TYPE_CHECKING:
    from exporter import BusyInfo
    from topology import Snapshot

EXIT_NONE_FITS = 4
_EPILOG = ("Every figure is an estimate of the cost model (measured rates where the snapshot has them, else "
           "theoretical ones), never a measurement. Exit status: 0 answered; 1 answered, some facts unknown "
           "(listed on standard error); 2 usage; 3 unreadable --from file; 4 fewer than N GPUs available.")


def add_parsers(sub: Any, add_discovery_args: Callable[[argparse.ArgumentParser], None]) -> None:
    from exporter._core._settings import GPUS, SIZE, TEXT, count

    p = sub.add_parser("place", help="the best groups of N GPUs on this node for a collective (estimates)",
                       description="Rank groups of N GPUs of this node by the estimated time of a collective "
                                   "over them (ring order chosen, shared links shared, NVLink SHARP where the "
                                   "switches do it), and print the K best.", epilog=_EPILOG)
    p.add_argument("--gpus", type=count(1, 1 << 16), required=True, metavar="N", help="GPUs in a group")
    p.add_argument("--size", type=SIZE, default="1GiB", metavar="BYTES",
                   help="the collective's buffer: 1GiB, 256M (binary, as nccl-tests), 1GB (decimal), 4096 or "
                        "4096B; a lowercase b (bits) is refused (default 1GiB: large enough that bandwidth decides)")
    p.add_argument("--top", type=count(1, 16), default=3, metavar="K",
                   help="how many groups to print (default 3, at most 16)")
    p.add_argument("--exclude", type=GPUS, default="", metavar="GPUS",
                   help="leave these out: NVML indices or bus ids, comma separated (0,3 or 0000:18:00.0)")
    p.add_argument("--collective", default="all_reduce",
                   choices=("all_reduce", "all_gather", "reduce_scatter", "alltoall"),
                   help="the collective whose time is estimated (nccl-tests' names)")
    p.add_argument("--include-busy", action="store_true", help="also choose GPUs that are busy now")
    p.add_argument("--from", type=TEXT, dest="from_file", metavar="SNAPSHOT.json",
                   help="a saved snapshot (discover --format json, or a probe report) instead of this node")
    p.add_argument("--format", choices=("table", "json", "claims"), default="table",
                   help="json: the placement document (topolink.placement/v1); claims: this node's DeviceClasses "
                        "and ResourceClaimTemplates for N GPUs (YAML, docs/claims.md)")
    add_claim_args(p)
    add_discovery_args(p)
    p.set_defaults(handler=_cmd_place)


def busy_now(args: argparse.Namespace, snap: Snapshot) -> BusyInfo:
    """What NVML says of ``snap``'s busy GPUs, asked the way the agent asks before a probe; unknown when it
    cannot. A GPU whose busy state NVML cannot read counts as busy, with why."""
    from exporter import BusyInfo

    if args.from_file:
        return BusyInfo(known=False, detail="read from a saved snapshot, which cannot say which GPUs are busy now")
    if args.sysfs_root not in ("/", "") and not args.nvml_library:
        return BusyInfo(known=False, detail="a gathered tree (--sysfs-root) without its own NVML (--nvml-library)")
    import contextlib

    from probes import busy_of, read_busy

    from ..discovery.access import NvmlError, open_nvml

    try:
        port = open_nvml(args.nvml_library)  # sets the library pynvml loads; read_busy nests a session in it
    except NvmlError as exc:
        return BusyInfo(known=False, detail=f"NVML is not available ({exc})")
    try:
        answer = read_busy()
    except Exception as exc:  # pynvml raises more than NVMLError (a library that lacks a function)
        return BusyInfo(known=False, detail=f"NVML could not say: {type(exc).__name__}: {exc}")
    finally:
        with contextlib.suppress(NvmlError):
            port.close()
    why = {g.id: busy_of(answer, g.id, g.index) for g in snap.gpus}
    return BusyInfo(known=True, detail="asked NVML: compute processes, utilisation over 10%",
                    gpus={gpu: reason for gpu, reason in why.items() if reason})


def _cmd_place(args: argparse.Namespace) -> int:
    import json

    from exporter import QueryError, placement_answer, placement_table, query_from_params
    from topology import PlacementError

    params = {"gpus": str(args.gpus), "size": str(args.size), "top": str(args.top), "exclude": args.exclude,
              "collective": args.collective, "include_busy": "1" if args.include_busy else "0"}
    try:
        query = query_from_params(params)
    except QueryError as exc:
        print(f"topolink place: {exc}", file=sys.stderr)
        return EXIT_USAGE
    snap = load_snapshot(args.from_file) if args.from_file else discover_from_args(args)
    if args.format == "claims":
        return max(node_claims(args, snap), exit_for(snap))
    busy = busy_now(args, snap)
    try:
        doc = placement_answer(snap, query, busy)
    except PlacementError as exc:
        print(f"topolink place: --exclude: {exc}", file=sys.stderr)
        return EXIT_USAGE
    sys.stdout.write(json.dumps(doc, indent=2) + "\n" if args.format == "json" else placement_table(doc))
    status = exit_for(snap)
    if not doc["groups"]:
        from topology import shown_text

        print(f"topolink place: no group of {args.gpus} GPUs: {shown_text(doc['note'])}", file=sys.stderr)
        return EXIT_NONE_FITS
    return status
