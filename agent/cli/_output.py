"""Where command output goes: standard output, or a file replaced atomically."""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from pathlib import Path

from topology import TopolinkError


class OutputError(TopolinkError):
    """The ``-o`` file cannot be written."""


def _stat(output: str, path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise OutputError(f"-o {output}: {exc.strerror or exc}") from exc


def check_output(output: str | None) -> None:
    """Fail before any work when ``-o`` names a file that cannot be written; ``None`` and ``-`` are stdout."""
    if output is None or output == "-":
        return
    path = Path(output)
    target = _stat(output, path)
    if target is not None and stat.S_ISDIR(target.st_mode):
        raise OutputError(f"-o {output}: is a directory")
    parent = _stat(output, path.parent)
    if parent is None:
        raise OutputError(f"-o {output}: no such directory")
    if not stat.S_ISDIR(parent.st_mode):
        raise OutputError(f"-o {output}: {path.parent} is not a directory")
    # The file is replaced by a rename, which needs write and search permission on the directory.
    if not os.access(path.parent, os.W_OK | os.X_OK) or (target is not None and not os.access(path, os.W_OK)):
        raise OutputError(f"-o {output}: not writable")


def write_output(text: str, output: str | None) -> None:
    """Write ``text`` to stdout, or replace ``output`` so that readers see the old file or the new one."""
    if output is None or output == "-":
        sys.stdout.write(text)
        return
    import tempfile  # with random and math: ~8 ms that printing to standard output need not pay

    path = Path(output)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise OutputError(f"-o {output}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), _new_file_mode())
            f.write(text)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise OutputError(f"-o {output}: {exc.strerror or exc}") from exc
        raise


def _new_file_mode() -> int:
    """The mode ``open()`` gives a new file, 0666 less the umask (``mkstemp`` makes it private)."""
    umask = os.umask(0o022)  # the only way to read the umask: set it straight back
    os.umask(umask)
    return 0o666 & ~umask
