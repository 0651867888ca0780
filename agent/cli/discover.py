"""``topolink discover``: discover the node and print it (summary, JSON snapshot or DOT).

Its usual command lines (``discover --format json -o FILE``) are read by ``plain_args`` without argparse;
anything else builds the parser as every command does."""

from __future__ import annotations

import sys

from ._common import EXIT_EPILOG, discover_from_args, discovery_flags, exit_for, plain_parse

TYPE_CHECKING = False  # not typing's: importing typing costs ~5 ms of start-up; mypy reads it as True
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from types import SimpleNamespace
    from typing import Any

FORMATS = ("table", "json", "dot")


def add_parsers(sub: Any, add_discovery_args: Callable[[argparse.ArgumentParser], None]) -> None:
    from exporter._core._settings import TEXT

    d = sub.add_parser("discover", help="discover the node's topology and print it",
                       description="Discover this node (NVML and sysfs) and print a summary, the JSON snapshot "
                                   "(topolink.topology/v2) or a Graphviz DOT picture.", epilog=EXIT_EPILOG)
    d.add_argument("--format", choices=FORMATS, default="table",
                   help="table: a summary for people; json: the snapshot; dot: a Graphviz picture")
    d.add_argument("-o", "--output", type=TEXT, metavar="FILE", help="write to FILE instead of standard output")
    add_discovery_args(d)
    d.set_defaults(handler=_cmd_discover)


def plain_args(argv: Sequence[str]) -> SimpleNamespace | None:
    """What ``topolink`` 's parser makes of ``discover ARGS`` (the same names and values), where ``ARGS``
    needs none of argparse's rules (``_common.plain_parse``); None otherwise."""
    if argv[:1] != ["discover"]:
        return None
    from exporter._core._settings import SettingError

    try:
        valued, switches, defaults = discovery_flags()
    except SettingError:  # a bad $TOPOLINK_ variable: argparse's usage error names it
        return None
    valued = {**valued, "--format": ("format", FORMATS), "-o": ("output", None), "--output": ("output", None)}
    values = plain_parse(argv[1:], valued, switches, {**defaults, "format": "table", "output": None})
    if values is None:
        return None
    from types import SimpleNamespace

    return SimpleNamespace(version=None, command="discover", handler=_cmd_discover, **values)


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
