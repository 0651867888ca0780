"""``python -m tests.fakenvml``: run any command against a machine profile, or write one out.

    python -m tests.fakenvml run PROFILE.yaml [--keep DIR] -- topolink topo
    python -m tests.fakenvml tree PROFILE.yaml DIR      # write the sysfs tree and NVML profile to DIR
    python -m tests.fakenvml build                      # print the compiled library's path

``run`` writes the machine to a temporary directory, then runs the command with TOPOLINK_SYSFS_ROOT,
TOPOLINK_NVML_LIBRARY (the test NVML) and TOPOLINK_FAKENVML_PROFILE set, and this interpreter's bin
directory first on PATH, so ``topolink`` resolves to the one installed beside it. The exit status is the
command's. PROFILE is a file path (anywhere) or a name in tests/machines.
"""

from __future__ import annotations

import argparse
import os
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
    with tempfile.TemporaryDirectory(prefix="topolink-machine-") as tmp:
        node = materialize(profile, Path(keep) if keep else Path(tmp))
        env = {**os.environ, **node.env()}
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        try:
            return subprocess.run(list(argv), env=env, check=False).returncode
        except FileNotFoundError:
            print(f"run: command not found: {argv[0]}", file=sys.stderr)
            return 127


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
