"""Non-regular files at every path the commands write or read: ``discover -o``, ``topo --from``, the agent's
state directory and the NFD features file, each against FIFOs (no reader), character and block devices,
directories, links to each, dangling links, loops of links, missing parents and huge sparse files.

Device nodes are made in the case's own directory (``mknod`` as root; without root a FIFO stands in and the
case says so), never the machine's /dev. Every case must end in time with the promised exit status, and
leave every path as it was, except a regular file (or a new path) that was meant to be written.
"""

from __future__ import annotations

import json
import os
import random
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from topology import MAX_DOCUMENT_BYTES, SchemaError, loads

from . import _exec

WRITE = ("fifo", "chardev", "blockdev", "dir", "link-to-fifo", "link-to-chardev", "link-loop", "dangling-link",
         "regular", "link-to-regular", "missing-parent")
READ = ("fifo", "link-to-fifo", "chardev", "blockdev", "dir", "sparse-huge", "dangling-link", "link-loop")
REFUSED_WRITE = ("fifo", "blockdev", "dir", "link-to-fifo", "link-loop", "missing-parent")
WRITTEN = ("dangling-link", "regular", "link-to-regular")  # a regular file ends up there, replaced or new
_MODE = 0o640
_BLOCK = os.makedev(240, 0)  # a major for local use: no such disk, a write could reach nothing
_AGENT = """
import sys
from pathlib import Path
from agent.serve._state import StateDir
from exporter.kube import FeatureFileSink, LabelConfig
from topology import Snapshot, SourceOutcome, SourceStatus
snap = Snapshot(node="n", sources=(SourceOutcome(name="pci", status=SourceStatus.OK, duration_seconds=0.0),))
path = Path(sys.argv[2])
if sys.argv[1] == "state":
    state = StateDir(path.parent)
    print("loaded", state.load("0" * 64).errors)
    try:
        state.save_snapshot(snap)
        print("saved")
    except OSError as exc:
        print("refused", exc)
else:
    print(FeatureFileSink(path, LabelConfig()).publish(snap))
"""


@dataclass(frozen=True)
class IoCase:
    command: str  # discover-o | topo-from | state | features
    kind: str

    def __str__(self) -> str:
        return f"{self.command} on a {self.kind}"


def io_cases(rng: random.Random, n: int) -> list[IoCase]:
    combos = [IoCase(c, k) for c in ("discover-o", "state", "features") for k in WRITE if k != "missing-parent"
              or c == "discover-o"] + [IoCase("topo-from", k) for k in READ]
    rng.shuffle(combos)
    return [combos[i % len(combos)] for i in range(n)]


def _node(path: Path, mode: int, dev: int) -> str:
    if os.geteuid() == 0:
        os.mknod(path, mode | 0o666, dev)
        return ""
    os.mkfifo(path, 0o666)
    return " (not root: a FIFO stands in for the device)"


def make(kind: str, d: Path, name: str, *, read: bool = False) -> tuple[Path, str]:
    """The path ``d/name`` made as ``kind`` (a device like /dev/zero to read, /dev/null to write), and a note."""
    path = d / name
    note = ""
    if kind in ("fifo", "link-to-fifo"):
        os.mkfifo(d / "fifo" if kind == "link-to-fifo" else path, 0o666)
    if kind in ("chardev", "link-to-chardev"):
        note = _node(d / "dev" if kind == "link-to-chardev" else path, stat.S_IFCHR, os.makedev(1, 5 if read else 3))
    if kind == "blockdev":
        note = _node(path, stat.S_IFBLK, _BLOCK)
    if kind == "dir":
        path.mkdir()
        (path / "inside").write_text("x\n")
    if kind.startswith("link-to-"):
        path.symlink_to({"link-to-fifo": "fifo", "link-to-chardev": "dev", "link-to-regular": "real"}[kind])
    if kind == "link-loop":
        path.symlink_to(name + ".loop")
        (d / (name + ".loop")).symlink_to(name)
    if kind == "dangling-link":
        path.symlink_to("created")
    if kind in ("regular", "link-to-regular"):
        real = path if kind == "regular" else d / "real"
        real.write_text("old\n")
        os.chmod(real, _MODE)
        os.chown(real, _exec.child_uid(), -1) if os.geteuid() == 0 else None
    if kind == "sparse-huge":
        with open(path, "wb") as f:
            f.truncate(MAX_DOCUMENT_BYTES + 1)
    if kind == "missing-parent":
        path = d / "missing" / name
    return path, note


def state_of(d: Path) -> dict[str, tuple[int, int, str]]:
    """Every entry of ``d``: (type, device number, link target)."""
    out = {}
    for e in os.scandir(d):
        st = os.lstat(e.path)
        out[e.name] = (stat.S_IFMT(st.st_mode), st.st_rdev, os.readlink(e.path) if e.is_symlink() else "")
    return out


def run(case: IoCase, d: Path, root_args: list[str], nvml_profile: Path | None) -> tuple[_exec.Run, list[str]]:
    """Makes the path, runs the command on it (discover -o against the tree of ``root_args``), checks."""
    name = {"topo-from": "snap.json", "state": "snapshot.json", "features": "topolink"}.get(case.command, "out")
    path, note = make(case.kind, d, name, read=case.command == "topo-from")
    before = state_of(d)
    if case.command == "topo-from":
        argv = [*_exec.topolink(), "topo", "--from", str(path)]
    elif case.command == "discover-o":
        argv = [*_exec.topolink(), "discover", "--format", "json", "-o", str(path), *root_args]
    else:
        argv = [sys.executable, "-c", _AGENT, case.command, str(path)]
    env = _exec.child_env({"TOPOLINK_FAKENVML_PROFILE": str(nvml_profile)} if nvml_profile else {})
    result = _exec.run(argv, env, d)
    return result, [f"{e}{note}" for e in check(case, result, d, before)]


def check(case: IoCase, run: _exec.Run, d: Path, before: dict[str, tuple[int, int, str]]) -> list[str]:
    errors = []
    if run.timed_out:
        return [f"no result within {_exec.WALL_LIMIT:.0f} s: something waited on the {case.kind}"]
    if "Traceback" in run.stderr:
        errors.append("traceback: " + run.stderr.strip().splitlines()[-1][:300])
    after = state_of(d)
    for name, what in before.items():  # a regular file replaced is a regular file still, with its mode
        if after.get(name) != what:
            errors.append(f"{name} was {what}, now {after.get(name)}: not ours to change")
    stray = sorted(n for n in set(after) - set(before) if n != "created")
    if stray:
        errors.append(f"left behind: {stray}")
    if case.command == "topo-from":
        if run.returncode != 3 or len(run.stderr.strip().splitlines()) != 1:
            errors.append(f"--from a {case.kind}: exit {run.returncode}, {run.stderr.strip()[:200]!r}; want 3, "
                          "one line")
    elif case.command == "discover-o":
        errors += _check_written(case, run, d)
    elif run.returncode != 0:
        errors.append(f"the agent's file code failed: exit {run.returncode}")
    return errors


def _check_written(case: IoCase, run: _exec.Run, d: Path) -> list[str]:
    if case.kind in REFUSED_WRITE:
        ok = run.returncode == 3 and len(run.stderr.strip().splitlines()) == 1 and "-o" in run.stderr
        return [] if ok else [f"-o a {case.kind}: exit {run.returncode}, {run.stderr.strip()[:200]!r}; want 3"]
    if run.returncode not in (0, 1):
        return [f"-o a {case.kind}: exit {run.returncode}, {run.stderr.strip()[:200]!r}; want 0 or 1"]
    if case.kind not in WRITTEN:
        return []
    target = d / {"dangling-link": "created", "regular": "out", "link-to-regular": "real"}[case.kind]
    try:
        loads(target.read_text())
    except (OSError, SchemaError, json.JSONDecodeError) as exc:
        return [f"-o a {case.kind}: {target.name} holds no snapshot: {exc}"]
    mode = stat.S_IMODE(target.stat().st_mode)
    if case.kind != "dangling-link" and mode != _MODE:
        return [f"-o a {case.kind}: the replaced file's mode {mode:o} is not its old {_MODE:o}"]
    return []
