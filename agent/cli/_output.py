"""Where command output goes: standard output (no ``-o``, or ``-o -``), or the file ``-o`` names.

What may be written is decided before any work (``check_output``) by ``exporter.Target``: a new path or a
regular file is replaced atomically (readers see the old file or the new one, its mode kept) without an
``fsync``, as a shell's redirection, ``cp`` and lstopo write theirs (the state directory and the features
file are flushed: other processes read them after a reboot); a link is followed, a character device or a
FIFO with a reader is written through, and anything else (a directory, a block device, a FIFO nobody reads)
is refused. No command replaces a file it did not create.
"""

from __future__ import annotations

import sys

from topology import TopolinkError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a start-up cost)

if TYPE_CHECKING:
    from exporter import Target


class OutputError(TopolinkError):
    """The ``-o`` file cannot be written."""


_open: dict[str, Target] = {}  # -o path -> its target, decided by check_output


def check_output(output: str | None) -> None:
    """Fail before any work when ``-o`` names something that cannot or must not be written; ``None`` and
    ``-`` are standard output. A device or FIFO is opened now and written by ``write_output``."""
    if output is None or output == "-":
        return
    from exporter import Target, UnsafeFile

    if output in _open:  # decided by an earlier command of this process that did not write: decide again
        _open.pop(output).close()
    try:  # not durable: a command's output file is not flushed to the disk, as a shell's redirection's is not
        _open[output] = Target(output, durable=False)
    except UnsafeFile as exc:
        raise OutputError(f"-o {exc}") from exc


def write_output(text: str, output: str | None) -> None:
    """Write ``text`` to standard output or to the ``-o`` target."""
    if output is None or output == "-":
        sys.stdout.write(text)
        return
    from exporter import UnsafeFile

    if output not in _open:
        check_output(output)
    target = _open.pop(output)
    try:
        target.write(text.encode("utf-8"))
    except UnsafeFile as exc:
        raise OutputError(f"-o {exc}") from exc
    finally:
        target.close()
