"""``topolink discover``: discover the node and print it (summary, JSON snapshot or DOT)."""

from __future__ import annotations

import sys

from ._common import EXIT_EPILOG, discover_from_args, exit_for

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a start-up cost)

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from typing import Any

FORMATS = ("table", "json", "dot")


def add_parsers(sub: Any, add_discovery_args: Callable[[argparse.ArgumentParser], None]) -> None:
    from exporter._core._rule import TEXT

    d = sub.add_parser("discover", help="discover the node's topology and print it",
                       description="Discover this node (NVML and sysfs) and print a summary, the JSON snapshot "
                                   "(topolink.topology/v2) or a Graphviz DOT picture.", epilog=EXIT_EPILOG)
    d.add_argument("--format", choices=FORMATS, default="table",
                   help="table: a summary for people; json: the snapshot; dot: a Graphviz picture")
    d.add_argument("-o", "--output", type=TEXT, metavar="FILE", help="write to FILE instead of standard output")
    add_discovery_args(d)
    d.set_defaults(handler=_cmd_discover)


def _cmd_discover(args: argparse.Namespace) -> int:
    import topology

    from ._output import check_output, write_output

    check_output(args.output)
    snap = discover_from_args(args)
    if args.format == "json":
        text = topology.dumps(snap) + "\n"
    elif args.format == "dot":
        text = topology.to_dot(snap)
    else:
        text = topology.summary(snap)
    write_output(text, args.output)
    if args.format != "table" and (reason := topology.no_gpu_reason(snap)):
        print(reason, file=sys.stderr)
    return exit_for(snap)
