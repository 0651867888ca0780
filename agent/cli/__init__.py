"""The ``topolink`` command line: one module per command, each adding its parser and its handler.

Imports ``agent.serve`` and ``agent.discovery`` (inside the handlers, so ``--help`` loads neither), and
``probes``, ``exporter`` and ``topology`` likewise; imported by the ``topolink`` console script alone.

Exit status:
  0  done; for ``discover``/``topo`` the snapshot is complete: nothing a ``topo -m`` cell, a label or a
     metric depends on is unknown
  1  done, but some facts are unknown (a source failed, was turned off, or could not read some devices or
     calls; NVML does not answer while NVIDIA GPUs are on the bus; two readings contradict each other):
     the output marks them and standard error lists them
  2  usage error
  3  an input file could not be read, is not a regular file, or is not a coherent topolink snapshot; or ``-o``
     must not be written (a directory, a block device, a FIFO nobody reads: nothing but a new path or a
     regular file is ever replaced, see ``_output``)
  ``probe`` and ``selftest`` document their own codes in ``topolink probe --help``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import cluster, discover, place, probe, prune, serve, topo
from ._common import EXIT_INPUT, EXIT_OK, EXIT_USAGE, InputError, add_discovery_args, version

# One module per command, in the order ``--help`` lists them. Each has ``add_parsers(subparsers,
# add_discovery_args)`` and sets a ``handler`` default; heavy dependencies load only inside the handlers.
_COMMANDS = (discover, topo, place, probe, serve, prune, cluster)


class _VersionAction(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        print(f"topolink {version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="topolink",
        description="Discover this node's GPU topology (NVML + sysfs), measure it, and publish it.",
        epilog="Exit status: 0 complete; 1 some facts unknown (listed on standard error: a source failed, NVML "
               "does not answer while NVIDIA GPUs are on the bus, two readings contradict each other); 2 usage; 3 "
               "bad input file (not a regular file, not a coherent snapshot) or an -o that must not be written "
               "(only a new path or a regular file is replaced; a character device or a FIFO with a reader is "
               "written through). Optional facts (ACS on bridges, which needs root to read PCI config space) are "
               "left empty when not readable and never make a snapshot incomplete.",
    )
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    for command in _COMMANDS:
        command.add_parsers(sub, add_discovery_args)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from ._output import OutputError

    try:
        if args.command is None:
            parser.print_help()
            return EXIT_USAGE
        result: int = args.handler(args)
        return result
    except (InputError, OutputError) as exc:
        from topology import shown_text  # the line may quote a snapshot's ids: one line, nothing a terminal acts on

        print(f"topolink: {shown_text(exc)}", file=sys.stderr)
        return EXIT_INPUT
    except BrokenPipeError:  # `topolink discover | head`
        sys.stderr.close()
        return EXIT_OK

