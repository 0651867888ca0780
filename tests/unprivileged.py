"""Running a check as an unprivileged user from tests that run as root (permission errors need one)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

NOBODY = 65534
CANNOT_DROP = 77


def as_nobody(check: Callable[[], None], cwd: Path) -> int:
    """Run ``check`` in ``cwd`` in a forked child that is not root: its exit status, or ``CANNOT_DROP``.

    The child enters ``cwd`` while still root, so it need not traverse the private parents of ``tmp_path``.
    """
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.chdir(cwd)
            if os.geteuid() == 0:
                try:
                    os.setgroups([])
                    os.setgid(NOBODY)
                    os.setuid(NOBODY)
                except OSError:
                    os._exit(CANNOT_DROP)
            check()
            status = 0
        except BaseException as exc:
            os.write(2, f"{type(exc).__name__}: {exc}\n".encode())
        finally:
            os._exit(status)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
