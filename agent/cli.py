"""The ``topolink`` command line.

Exit status:
  0  done; for ``discover``/``topo`` the snapshot is complete: nothing a ``topo -m`` cell, a label or a
     metric depends on is unknown
  1  done, but some facts are unknown (a source failed, was turned off, or could not read some devices or
     calls): the output marks them and standard error lists them
  2  usage error
  3  an input file could not be read or is not a topolink snapshot, or ``-o`` cannot be written
  ``probe`` and ``selftest`` document their own codes in ``topolink probe --help``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

TYPE_CHECKING = False  # not typing's: importing typing costs ~5 ms of start-up; mypy reads it as True
if TYPE_CHECKING:  # the model, discovery and output load after parsing: --help and usage errors need none
    import topology

    from ._context import DiscoveryContext

EXIT_OK, EXIT_INCOMPLETE, EXIT_USAGE, EXIT_INPUT = 0, 1, 2, 3

# Modules that add subcommands: each has ``add_parsers(subparsers, add_discovery_args)`` and sets a
# ``handler`` default; they import their heavy dependencies only inside their handlers.
_COMMAND_MODULES = ("cli_probe", "cli_serve", "cli_kube")

_ENV_SYSFS_ROOT = "TOPOLINK_SYSFS_ROOT"
_ENV_NVML_LIBRARY = "TOPOLINK_NVML_LIBRARY"


def _version() -> str:
    from importlib import metadata  # about 35 ms: paid only by --version

    try:
        return metadata.version("topolink")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0+unknown"


class _VersionAction(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        print(f"topolink {_version()}")
        parser.exit()


def _add_discovery_args(p: argparse.ArgumentParser) -> None:
    from .sources._catalog import SOURCE_FLAGS  # names, defaults and help without importing the sources

    p.add_argument("--sysfs-root", metavar="DIR", default=os.environ.get(_ENV_SYSFS_ROOT, "/"),
                   help=f"read /sys and /proc below DIR (a gathered tree); default ${_ENV_SYSFS_ROOT} or /. "
                        "A root other than / turns NVML off unless --nvml-library names the tree's own")
    p.add_argument("--nvml-library", metavar="PATH", default=os.environ.get(_ENV_NVML_LIBRARY),
                   help=f"load NVML from PATH instead of libnvidia-ml.so.1; default ${_ENV_NVML_LIBRARY}")
    p.add_argument("--node-name", metavar="NAME", help="node name to record (default: the host name)")
    for name, enabled_by_default, help_text in SOURCE_FLAGS:
        p.add_argument(f"--source.{name}", dest=f"source_{name}", action=argparse.BooleanOptionalAction,
                       default=enabled_by_default,
                       help=f"{help_text} (default: {'on' if enabled_by_default else 'off'})")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="topolink",
        description="Discover this node's GPU topology (NVML + sysfs), measure it, and publish it.",
        epilog="Exit status: 0 complete; 1 some facts unknown (listed on standard error); 2 usage; 3 bad input "
               "file or unwritable -o. Optional facts (ACS on bridges, which needs root to read PCI config "
               "space) are left empty when not readable and never make a snapshot incomplete.",
    )
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    d = sub.add_parser("discover", help="discover the node's topology and print it")
    d.add_argument("--format", choices=("table", "json", "dot"), default="table")
    d.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    _add_discovery_args(d)

    t = sub.add_parser("topo", help="print the GPU/NIC matrix as nvidia-smi topo -m does")
    t.add_argument("--from", dest="from_file", metavar="SNAPSHOT.json", help="render a saved snapshot")
    t.add_argument("--bandwidth", action="store_true", help="print the measured bandwidth matrices instead")
    _add_discovery_args(t)

    for module in _COMMAND_MODULES:
        importlib.import_module(f"{__package__}.{module}").add_parsers(sub, _add_discovery_args)
    return parser


def _context(args: argparse.Namespace) -> DiscoveryContext:
    from pathlib import Path

    from ._context import DiscoveryContext
    from ._fsroot import FsRoot

    root = Path(args.sysfs_root)
    if not root.is_dir():
        raise _InputError(f"--sysfs-root {root}: not a directory")
    return DiscoveryContext(root=FsRoot(root), nvml_library=args.nvml_library, node_name=args.node_name)


class _InputError(Exception):
    pass


def discover_from_args(args: argparse.Namespace) -> topology.Snapshot:
    """Run discovery with the sources the flags enabled."""
    from .discover import discover
    from .sources import source_table

    enabled = [name for name in source_table() if getattr(args, f"source_{name}")]
    return discover(_context(args), enabled)


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
    return _exit_for(snap)


def _exit_for(snap: topology.Snapshot) -> int:
    import topology

    if snap.complete:
        return EXIT_OK
    bad = [f"{o.name} {o.status.value}" for o in snap.sources if o.status is not topology.SourceStatus.OK
           and o.status is not topology.SourceStatus.ABSENT]
    print("topolink: incomplete snapshot" + (f" ({', '.join(bad)})" if bad else "") + "; unknown:", file=sys.stderr)
    for line in topology.describe_unknown(snap.unknown):
        print(f"  {line}", file=sys.stderr)
    return EXIT_INCOMPLETE


def load_snapshot(path: str) -> topology.Snapshot:
    """A saved snapshot, or the snapshot inside a saved ``topolink probe --format json`` report. Any
    input, however broken, is an :class:`_InputError` with one line saying why."""
    import topology

    try:
        if path == "-":
            data = sys.stdin.buffer.read(topology.MAX_DOCUMENT_BYTES + 1)
        else:
            with open(path, "rb") as f:
                data = f.read(topology.MAX_DOCUMENT_BYTES + 1)
        doc = topology.parse_json(data)
        if isinstance(doc, dict) and isinstance(doc.get("snapshot"), dict):
            doc = doc["snapshot"]
        if not isinstance(doc, dict):
            raise topology.SchemaError(f"not a {topology.SCHEMA} document")
        return topology.from_dict(doc)
    except OSError as exc:
        raise _InputError(f"{path}: {exc.strerror or exc}") from exc
    except topology.SchemaError as exc:
        raise _InputError(f"{path}: {exc}") from exc
    except RecursionError as exc:
        raise _InputError(f"{path}: not a snapshot: nested too deep") from exc


def _cmd_topo(args: argparse.Namespace) -> int:
    import topology

    snap = load_snapshot(args.from_file) if args.from_file else discover_from_args(args)
    if args.bandwidth:
        from probes import render_bandwidth_matrix

        sys.stdout.write(render_bandwidth_matrix(snap))
        return _exit_for(snap)
    text = topology.matrix(snap)
    if text:
        sys.stdout.write(text)
    else:
        print(topology.no_gpu_reason(snap) or "No GPU or RDMA NIC to show.")
    return _exit_for(snap)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from ._output import OutputError

    handlers = {"discover": _cmd_discover, "topo": _cmd_topo}
    try:
        if args.command in handlers:
            return handlers[args.command](args)
        if args.command is None:
            parser.print_help()
            return EXIT_USAGE
        result: int = args.handler(args)
        return result
    except (_InputError, OutputError) as exc:
        print(f"topolink: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except BrokenPipeError:  # `topolink discover | head`
        sys.stderr.close()
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
