"""``python -m tests.fakenvml``: run any command against a machine profile, or write one out.

    python -m tests.fakenvml run PROFILE.yaml [--keep DIR] -- topolink topo
    python -m tests.fakenvml tree PROFILE.yaml DIR      # write the sysfs tree and NVML profile to DIR
    python -m tests.fakenvml build                      # print the compiled library's path

``run`` writes the machine to a temporary directory, then runs the command with TOPOLINK_SYSFS_ROOT,
TOPOLINK_NVML_LIBRARY (the test NVML) and TOPOLINK_FAKENVML_PROFILE set, and this interpreter's bin
directory first on PATH, so ``topolink`` resolves to the one installed beside it. The exit status is the
command's. SIGTERM, SIGINT, SIGHUP (and QUIT, USR1, USR2) are passed on to the command; the temporary
tree is removed when it ends, however it ends. PROFILE is a file path (anywhere) or a name in tests/machines.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from . import BuildError, ProfileError, build_library, materialize


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tests.fakenvml", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a command against a profile")
    run.add_argument("profile")
    run.add_argument("--keep", metavar="DIR", help="write the machine to DIR and keep it")
    run.add_argument("argv", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    tree = sub.add_parser("tree", help="write a profile's sysfs tree and NVML profile")
    tree.add_argument("profile")
    tree.add_argument("directory")
    sub.add_parser("build", help="build the test NVML and print its path")
    return p


def _run(profile: str, keep: str | None, argv: Sequence[str]) -> int:
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        print("run: a command is needed after --", file=sys.stderr)
        return 2
    forwarder = Forwarder()  # from before the tree exists: a signal while it is written still removes it
    try:
        with tempfile.TemporaryDirectory(prefix="topolink-machine-") as tmp:
            node = materialize(profile, Path(keep) if keep else Path(tmp))
            env = {**os.environ, **node.env()}
            env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
            return forwarder.run(list(argv), env)
    finally:
        forwarder.restore()


# What a supervisor, a terminal or a test sends the wrapper: passed on to the command, which decides (serve
# stops on TERM and INT, rediscovers on HUP); the wrapper ends when the command does, and then removes the
# machine's tree. SIGKILL cannot be caught: only it leaves the tree (and the command) behind.
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


class Forwarder:
    """Passes every signal of :data:`FORWARDED` on to the command; one that comes before the command has
    started is sent as soon as it has (the command's own default then decides)."""

    def __init__(self) -> None:
        self.child: subprocess.Popen[bytes] | None = None
        self.pending: list[int] = []
        self.previous = {sig: signal.signal(sig, self._forward) for sig in FORWARDED}

    def _forward(self, signum: int, frame: object) -> None:
        del frame
        if self.child is None:
            self.pending.append(signum)
        elif self.child.poll() is None:
            self.child.send_signal(signum)

    def run(self, argv: list[str], env: dict[str, str]) -> int:
        """The command's exit status; 128 + N where signal N ended it, as a shell says it."""
        try:
            self.child = subprocess.Popen(argv, env=env)
        except FileNotFoundError:
            print(f"run: command not found: {argv[0]}", file=sys.stderr)
            return 127
        for signum in self.pending:
            self.child.send_signal(signum)
        code = self.child.wait()
        return 128 - code if code < 0 else code

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "build":
            print(build_library())
            return 0
        if args.command == "tree":
            node = materialize(args.profile, Path(args.directory))
            for key, value in node.env().items():
                print(f"{key}={value}")
            return 0
        return _run(args.profile, args.keep, args.argv)
    except (ProfileError, BuildError) as exc:
        print(f"fakenvml: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
