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
from importlib import import_module

from ._common import EXIT_INPUT, EXIT_OK, EXIT_USAGE, InputError, add_discovery_args, version

_TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a start-up cost)

if _TYPE_CHECKING:
    from typing import Any

# Every command in the order ``--help`` lists them: its name, its module and the one line ``--help`` shows.
# Each module has ``add_parsers(subparsers, add_discovery_args)`` (``probe`` adds ``selftest`` too) and sets a
# ``handler`` default; heavy dependencies load only inside the handlers. A run builds the parser of its own
# command alone: the others are listed by name and line with an empty parser, their modules not imported
# (tests/test_cli_startup.py holds these lines to the modules' own).
_COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("discover", "discover", "discover the node's topology and print it"),
    ("topo", "topo", "print the GPU/NIC matrix as nvidia-smi topo -m does"),
    ("place", "place", "the best groups of N GPUs on this node for a collective (estimates)"),
    ("probe", "probe", "measure bandwidth and latency (copies, all-reduce, GPUDirect RDMA)"),
    ("selftest", "probe", "run every probe at tiny sizes and say pass/fail per test"),
    ("serve", "serve", "run the node agent: discovery, probes, metrics and the HTTP API"),
    ("prune", "prune", "remove every label, NodeFeature, ResourceSlice and taint rule topolink made"),
    ("cluster", "cluster", "the fleet from its labels and slices: classes, outliers, where N GPUs fit"),
    ("controller", "controller", "keep the schedulers' objects current for the fleet (one leader of replicas)"),
    ("doctor", "doctor", "check what the agent needs on this node and in the cluster, with the fixes"),
)
_MODULE_OF = {name: module for name, module, _ in _COMMANDS}


class _Version(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        print(f"topolink {version()}")
        parser.exit()


class _FixedWidth(argparse.HelpFormatter):
    """argparse's formatter at a set width, for a parser while it is built: argparse formats each argument as it is
    added (to check its metavar) and the commands' prefix, none of which a width changes, and a formatter given no
    width asks the terminal for one (``shutil``, which loads zlib, bz2 and lzma: about 5 ms, half of argparse's own
    import). Built, every parser formats with argparse's own formatter: help, usage and errors at the terminal's
    width, as argparse writes them."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=80)


class _Building(argparse.ArgumentParser):
    """argparse's parser, built with :class:`_FixedWidth` (``build_parser`` gives it argparse's formatter back)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**{"formatter_class": _FixedWidth, **kwargs})


def build_parser(command: str | None = None,
                 parser_class: type[argparse.ArgumentParser] = argparse.ArgumentParser, *,
                 listed: bool = True) -> argparse.ArgumentParser:
    """The ``topolink`` parser: every command's (``command`` None), or only ``command``'s, the others listed by
    name and help line with an empty parser (an unknown ``command`` builds none); with ``listed`` False, a
    ``command`` given is the only one there (for a command line that starts with it, where the top level
    never writes its list of commands). The commands' parsers are of ``parser_class`` too (argparse's default
    for subparsers)."""
    if parser_class is argparse.ArgumentParser:
        parser_class = _Building
    parser = parser_class(
        prog="topolink",
        description="Discover this node's GPU topology (NVML + sysfs), measure it, and publish it.",
        epilog="Exit status: 0 complete; 1 some facts unknown (listed on standard error: a source failed, NVML "
               "does not answer while NVIDIA GPUs are on the bus, two readings contradict each other); 2 usage; 3 "
               "bad input file (not a regular file, not a coherent snapshot) or an -o that must not be written "
               "(only a new path or a regular file is replaced; a character device or a FIFO with a reader is "
               "written through). Optional facts (ACS on bridges, which needs root to read PCI config space) are "
               "left empty when not readable and never make a snapshot incomplete.",
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    built: set[str] = set()
    for name, module, help_text in _COMMANDS:
        if module in built:
            continue
        if command is None or _MODULE_OF.get(command) == module:
            import_module(f"{__name__}.{module}").add_parsers(sub, add_discovery_args)
            built.add(module)
        elif listed:
            sub.add_parser(name, help=help_text, add_help=False)  # listed, never parsed: no -h to build
    # A value a flag's rule refuses (ArgumentError) reaches the caller, which says it in one line (``main``),
    # not after argparse's usage text; argparse's other errors (a flag it does not know, one missing) keep it.
    parser.exit_on_error = False
    for each in (parser, *sub.choices.values()):
        each.exit_on_error = False
        if each.formatter_class is _FixedWidth:  # a parser that asked for a formatter of its own keeps it
            each.formatter_class = argparse.HelpFormatter  # from here on, at the terminal's width
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    """The command a command line runs: its first word that is not an option (the top level's options,
    ``-h`` and ``--version``, take no value)."""
    return next((a for a in argv if not a.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = _command_of(argv)
    # A command line that starts with a command's name hands the rest to that command's parser: the top level
    # writes nothing of its own there (its usage names COMMAND, not the list), so the other commands are not
    # listed, which spares an empty parser each (about 0.5M instructions apiece, measured: argparse looks up
    # translations for every parser's group titles).
    starts = bool(argv) and argv[0] == command and command in _MODULE_OF
    try:
        parser = build_parser(command or "", listed=not starts)
        args = parser.parse_args(argv)
    except (ValueError, argparse.ArgumentError) as exc:  # a bad value, or a variable (the settings' SettingError)
        print(f"topolink{' ' + command if command in _MODULE_OF else ''}: {exc}", file=sys.stderr)
        return EXIT_USAGE
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

