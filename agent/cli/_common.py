"""What the commands share: the discovery flags, discovery from them, reading a saved snapshot, exit status.

Imported before the parser is built: the model, discovery and output load inside the functions that need them.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (--help needs nothing of it); type
# checkers take any constant of this name as true

if TYPE_CHECKING:
    import argparse

    import topology

    from ..discovery import DiscoveryContext

EXIT_OK, EXIT_INCOMPLETE, EXIT_USAGE, EXIT_INPUT = 0, 1, 2, 3

# The statuses of discover and topo, as ``topolink --help`` states them for both.
EXIT_EPILOG = ("Exit status: 0 the snapshot is complete: nothing a topo -m cell, a label or a metric depends on is "
               "unknown; 1 some facts are unknown (listed on standard error: a source failed, was turned off or "
               "partial, NVML does not answer while NVIDIA GPUs are on the bus, two readings contradict each "
               "other); 2 usage; 3 an input file cannot be read or is not a coherent snapshot, or -o must not be "
               "written.")

_ENV_SYSFS_ROOT = "TOPOLINK_SYSFS_ROOT"
_ENV_NVML_LIBRARY = "TOPOLINK_NVML_LIBRARY"


class InputError(Exception):
    """An input file or directory that cannot be used: exit 3 with one line saying why."""


def version() -> str:
    """The distribution's version: ``agent.__version__``, which pyproject.toml takes at build time (no
    ``importlib.metadata``: its import, 0.8 MiB resident (measured), stayed in every agent for one string)."""
    from .. import __version__

    return __version__


def add_discovery_args(p: argparse.ArgumentParser) -> None:
    import argparse

    from exporter._core._rule import TEXT, env_value

    from ..discovery import SOURCE_FLAGS  # names, defaults and help without importing the sources

    p.add_argument("--sysfs-root", type=TEXT, metavar="DIR", default=env_value(None, _ENV_SYSFS_ROOT, TEXT, "/"),
                   help=f"read /sys and /proc below DIR (a gathered tree); default ${_ENV_SYSFS_ROOT} or /. "
                        "A root other than / turns NVML off unless --nvml-library names the tree's own")
    p.add_argument("--nvml-library", type=TEXT, metavar="PATH",
                   default=env_value(None, _ENV_NVML_LIBRARY, TEXT, None),
                   help="load NVML from PATH instead of libnvidia-ml.so.1 (its SONAME must be libnvidia-ml.so.1, as "
                        f"NVIDIA's and the test NVML's are); default ${_ENV_NVML_LIBRARY}")
    p.add_argument("--node-name", type=TEXT, metavar="NAME", help="node name to record (default: the host name)")
    for name, enabled_by_default, help_text in SOURCE_FLAGS:
        p.add_argument(f"--source.{name}", dest=f"source_{name}", action=argparse.BooleanOptionalAction,
                       default=enabled_by_default,
                       help=f"{help_text} (default: {'on' if enabled_by_default else 'off'})")


def _context(args: argparse.Namespace) -> DiscoveryContext:
    from ..discovery import DiscoveryContext, FsRoot

    root = os.path.normpath(args.sysfs_root)  # a string: pathlib costs start-up
    if not os.path.isdir(root):
        raise InputError(f"--sysfs-root {root}: not a directory")
    return DiscoveryContext(root=FsRoot(root), nvml_library=args.nvml_library, node_name=args.node_name)


def discover_from_args(args: argparse.Namespace) -> topology.Snapshot:
    """Run discovery with the sources the flags enabled."""
    from ..discovery import discover, source_table

    enabled = [name for name in source_table() if getattr(args, f"source_{name}")]
    return discover(_context(args), enabled)


def fixture_reason(args: argparse.Namespace) -> str | None:
    """Why nothing may be measured with these discovery flags, or None when discovery reads this machine.
    Probes time this machine: a tree from another one (a gathered ``--sysfs-root``, a machine profile's test
    NVML) would put this machine's numbers on that tree's NUMA nodes and GPUs. ``probe``, ``selftest`` and
    ``serve`` all ask this one question.

    This machine is ``/``, or a root whose ``sys`` and ``proc`` are this kernel's sysfs and procfs mounted
    there (the DaemonSet's ``/host``); NVML is the system's when named as the dynamic linker finds it (the
    soname ``libnvidia-ml.so.1``), not a file path."""
    root = getattr(args, "sysfs_root", "/")
    library = getattr(args, "nvml_library", None)
    why = []
    if not _this_machine(root):
        why.append(f"--sysfs-root {root} is a gathered tree (its sys and proc are not this kernel's sysfs and "
                   "procfs mounted there)")
    if library and "/" in library:
        why.append(f"--nvml-library {library} is a file, not the system's NVML (libnvidia-ml.so.1, as the "
                   "dynamic linker finds it)")
    if not why:
        return None
    return ("discovery reads a machine from elsewhere: " + "; ".join(why) + ". The numbers would be this "
            "machine's put on its devices. Run with the live root (/) or this host's /sys and /proc mounted "
            "below the root, and the system NVML.")


def _this_machine(root: str) -> bool:
    """``root`` shows this machine's kernel: ``/``, or ``root/sys`` a sysfs and ``root/proc`` a procfs mount
    (``/proc/self/mountinfo``, the process's own mount table); a gathered tree is plain directories."""
    if os.path.realpath(root) == "/":
        return True
    import re  # only for a root other than /: start-up loads nothing it does not need

    octal = re.compile(r"\\([0-7]{3})")  # mountinfo writes a space in a path as \040
    want = {os.path.realpath(os.path.join(root, "sys")): "sysfs", os.path.realpath(os.path.join(root, "proc")): "proc"}
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as table:
            for line in table:
                head, _, tail = line.partition(" - ")
                fields, kind = head.split(), tail.split()[:1]
                if len(fields) >= 5 and kind:
                    point = octal.sub(lambda m: chr(int(m.group(1), 8)), fields[4])
                    if want.get(point) == kind[0]:
                        del want[point]
    except OSError:
        return False
    return not want


def exit_for(snap: topology.Snapshot) -> int:
    import topology

    if snap.complete:
        return EXIT_OK
    bad = [f"{topology.shown(o.name)} {o.status.value}" for o in snap.sources
           if o.status is not topology.SourceStatus.OK and o.status is not topology.SourceStatus.ABSENT]
    print("topolink: incomplete snapshot" + (f" ({', '.join(bad)})" if bad else "") + "; unknown:", file=sys.stderr)
    for line in topology.describe_unknown(snap.unknown):
        print(f"  {line}", file=sys.stderr)
    return EXIT_INCOMPLETE


def load_snapshot(path: str) -> topology.Snapshot:
    """A saved snapshot, or the snapshot inside a saved ``topolink probe --format json`` report. Any
    input, however broken, is an :class:`InputError` with one line saying why: not a regular file (``-`` is
    standard input), over 64 MiB, not JSON, not the schema, or a document whose meaning does not hold
    together (``topology.codec._coherence``)."""
    import topology
    from exporter import UnsafeFile, read_regular

    try:
        if path == "-":
            data = sys.stdin.buffer.read(topology.MAX_DOCUMENT_BYTES + 1)
        else:  # a regular file only, opened without blocking: a FIFO or a device cannot hang the command
            data = read_regular(path, topology.MAX_DOCUMENT_BYTES)
        doc = topology.parse_json(data)
        if isinstance(doc, dict) and isinstance(doc.get("snapshot"), dict):
            doc = doc["snapshot"]
        if not isinstance(doc, dict):
            raise topology.SchemaError(f"not a {topology.SCHEMA} document")
        from ..discovery.assemble import witnessed  # the witness table's rules, as live discovery keeps them

        return witnessed(topology.from_dict(doc))
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from exc
    except UnsafeFile as exc:
        raise InputError(f"{exc} (standard input is --from -)") from exc
    except topology.SchemaError as exc:
        raise InputError(f"{path}: {exc}") from exc
    except RecursionError as exc:
        raise InputError(f"{path}: not a snapshot: nested too deep") from exc


