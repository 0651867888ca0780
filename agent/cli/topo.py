"""``topolink topo``: the GPU/NIC matrix as ``nvidia-smi topo -m`` prints it, from this node or a snapshot."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from ._common import EXIT_EPILOG, discover_from_args, exit_for, load_snapshot


def add_parsers(sub: Any, add_discovery_args: Callable[[argparse.ArgumentParser], None]) -> None:
    from exporter._core._rule import TEXT

    t = sub.add_parser("topo", help="print the GPU/NIC matrix as nvidia-smi topo -m does",
                       description="Print the GPU/NIC matrix of this node or of a saved snapshot (or probe report) "
                                   "as nvidia-smi topo -m does, or the measured bandwidth matrices.",
                       epilog=EXIT_EPILOG)
    t.add_argument("--from", type=TEXT, dest="from_file", metavar="SNAPSHOT.json", help="render a saved snapshot")
    t.add_argument("--bandwidth", action="store_true", help="print the measured bandwidth matrices instead")
    add_discovery_args(t)
    t.set_defaults(handler=_cmd_topo)


def _cmd_topo(args: argparse.Namespace) -> int:
    import topology

    snap = load_snapshot(args.from_file) if args.from_file else discover_from_args(args)
    if args.bandwidth:
        from probes import render_bandwidth_matrix

        sys.stdout.write(render_bandwidth_matrix(snap))
        return exit_for(snap)
    text = topology.matrix(snap)
    if text:
        sys.stdout.write(text)
    else:
        print(topology.no_gpu_reason(snap) or "No GPU or RDMA NIC to show.")
    return exit_for(snap)


