"""One ``topolink`` process under limits: wall time, address space, and an unprivileged user when root."""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NOBODY = 65534
MEMORY_LIMIT = 1536 * 1024 * 1024  # RLIMIT_AS, bytes
WALL_LIMIT = 20.0  # seconds


class PrivilegeDropError(RuntimeError):
    """Running as root and unable to become the unprivileged user: permission cases would prove nothing."""


@dataclass(frozen=True)
class Run:
    argv: tuple[str, ...]
    returncode: int | None  # None: killed at the wall-time limit
    stdout: str
    stderr: str
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def command(self) -> str:
        return " ".join(self.argv)


def topolink() -> list[str]:
    """The ``topolink`` installed beside this interpreter (the venv's), else ``python -m agent.cli``."""
    exe = Path(sys.executable).parent / "topolink"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "agent.cli"]


def child_env(extra: Mapping[str, str]) -> dict[str, str]:
    """This environment without coverage hooks or topolink settings of the developer's shell, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COVERAGE", "TOPOLINK_", "COV_CORE"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


_PR_CAPBSET_DROP = 24
_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH = 1, 2
_libc = ctypes.CDLL(None, use_errno=True)
# How children give up root: "uid" (become nobody), "caps" (stay uid 0 without the capabilities that
# override file permissions: for an interpreter nobody cannot reach, as /root/.pyenv), "none" (not root).
_mode = {"drop": "uid" if os.geteuid() == 0 else "none"}


def child_uid() -> int:
    """The user id the children run as (after ``check_privileges``)."""
    return NOBODY if _mode["drop"] == "uid" else os.geteuid()


def _limit_memory() -> None:  # runs in the child between fork and exec
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _drop_dac_caps() -> None:  # runs in the child between fork and exec
    _limit_memory()
    for cap in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH):
        if _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _user_kwargs() -> dict[str, Any]:
    if _mode["drop"] == "uid":
        return {"user": NOBODY, "group": NOBODY, "extra_groups": [], "preexec_fn": _limit_memory}
    if _mode["drop"] == "caps":
        return {"preexec_fn": _drop_dac_caps}
    return {"preexec_fn": _limit_memory}


def run(argv: Sequence[str], env: Mapping[str, str], cwd: Path, timeout: float = WALL_LIMIT) -> Run:
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(list(argv), env=dict(env), cwd=cwd, capture_output=True, timeout=timeout,
                              check=False, **_user_kwargs())
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else ""
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
        return Run(tuple(argv), None, out, err, time.perf_counter() - t0)
    except (PermissionError, OSError) as exc:
        if _mode["drop"] != "none":
            raise PrivilegeDropError(f"cannot run {argv[0]} as uid {NOBODY}: {exc}") from exc
        raise
    return Run(tuple(argv), proc.returncode, proc.stdout.decode(errors="replace"),
               proc.stderr.decode(errors="replace"), time.perf_counter() - t0)


_PROBE = """
import os, sys
try:
    open(sys.argv[1]).close()
    print(os.getuid(), "read")
except PermissionError:
    print(os.getuid(), "denied")
"""


def check_privileges(cwd: Path) -> str:
    """Proves that children cannot read a mode-000 file (else permission cases prove nothing); returns how
    they give up root. Tries uid 65534 first, then root without DAC capabilities; raises if neither works."""
    probe = cwd / "mode-000"
    probe.write_text("secret\n")
    os.chmod(probe, 0)
    tried = []
    for mode in (["uid", "caps"] if os.geteuid() == 0 else ["none"]):
        _mode["drop"] = mode
        try:
            r = run([sys.executable, "-c", _PROBE, str(probe)], child_env({}), cwd, timeout=20)
        except (PrivilegeDropError, OSError) as exc:
            tried.append(f"{mode}: {exc}")
            continue
        if r.returncode == 0 and r.stdout.split()[-1:] == ["denied"]:
            return {"uid": f"uid {NOBODY}", "caps": "uid 0 without CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH "
                    f"(uid {NOBODY} cannot run {sys.executable}: {tried[-1] if tried else ''})",
                    "none": f"uid {os.geteuid()}"}[mode]
        tried.append(f"{mode}: exit {r.returncode}, {r.stdout.strip()!r} {r.stderr.strip()[-300:]!r}")
    raise PrivilegeDropError("children can read a mode-000 file, permission cases would prove nothing: "
                             + "; ".join(tried))
