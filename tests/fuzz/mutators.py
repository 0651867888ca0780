"""Seeded mutations of a sysfs tree: what a broken kernel, a bad gatherer or a hostile tree could show.

``plan(rng, root, targets)`` picks one :class:`Mutation` (deterministic for a seed); ``apply`` makes it on a
hard-linked copy of the tree. Files are always replaced (unlink, then create), never written in place, so
the pristine tree that shares their inodes stays intact.
"""

from __future__ import annotations

import os
import random
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ._targets import Targets

# Removals ("remove", "remove-dir", "remove-link") are not drawn: a file that is simply not there is a
# machine without that device or attribute, which no reader can tell from a broken one. Required attributes
# that go missing are still problems (the sysfs source tests cover them); the kinds below all leave a trace.
FILE_KINDS = ("truncate", "random-bytes", "huge-number", "negative-number", "non-ascii-digits", "reversed-range",
              "to-dir", "to-fifo", "dangling-symlink", "self-loop", "pair-loop", "abs-live", "abs-decoy",
              "dotdot-escape", "chmod-000")
DIR_KINDS = ("chmod-000-dir", "dir-to-file", "dir-loop", "abs-live-dir", "dir-to-fifo")
LINK_KINDS = ("dangling-link", "link-loop", "link-to-parent", "abs-live-link", "dotdot-escape-link", "link-to-file")
LIVE_FILES = ("/sys/devices/system/cpu/online", "/proc/self/status", "/sys/devices/system/cpu/possible",
              "/proc/meminfo")
_CPULIST = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")
_HEXMASK = re.compile(r"^[0-9a-fA-F]+(,[0-9a-fA-F]+)*$")
_ARABIC_INDIC = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")
BIG_MASK_BYTES = 10 * 1024 * 1024


@dataclass(frozen=True)
class Mutation:
    """One change to one path. ``payload``: new content, or a link target for link kinds; ``repeat``: the
    payload is repeated this many times (10 MB of ``f``); ``decoy``: content of a file outside the tree
    that an escaping link points at; ``leak_ref``: what the file would read as if the escape were followed
    (a reference run places it inside the tree to tell what a leak would look like)."""

    kind: str
    path: str
    payload: bytes = b""
    repeat: int = 1
    decoy: bytes | None = None
    leak_ref: bytes | None = None
    note: str = ""

    def __str__(self) -> str:
        what = self.note or (self.payload[:40].decode(errors="backslashreplace") if self.payload else "")
        return f"{self.kind} {self.path}" + (f" [{what}]" if what else "")


def _read(root: Path, rel: str) -> bytes:
    try:
        with open(root / rel, "rb") as f:
            return f.read(65536)
    except OSError:
        return b""


def _huge(text: str, name: str, rng: random.Random) -> tuple[bytes, int, str]:
    if name in ("local_cpus", "cpumap") or (_HEXMASK.match(text) and "," in text):
        if rng.random() < 0.15:
            return b"f", BIG_MASK_BYTES, "10 MB of f"
        return b"f", 100_000, "100 kB of f"
    if _CPULIST.match(text) or name in ("cpulist", "local_cpulist", "online", "possible"):
        return rng.choice([b"0-4294967295", b"0-18446744073709551615", b"4294967295"]), 1, ""
    big = rng.choice(["9" * 400, str(2**64), str(2**63), "1" + "0" * 30])
    if text.isdigit() or re.fullmatch(r"-?\d+", text):
        return big.encode(), 1, ""
    if re.search(r"\d+", text):  # "16.0 GT/s PCIe", "MemTotal: 123 kB", "10 21", "4: ACTIVE"
        return re.sub(r"\d+", big, text, count=1 if rng.random() < 0.5 else 0).encode(), 1, ""
    return (text + " " + big).encode(), 1, ""


def _negative(text: str, rng: random.Random) -> bytes:
    neg = rng.choice(["-7", str(-(2**40)), "-2"])
    if re.search(r"\d+", text):
        return re.sub(r"\d+", neg, text, count=1).encode()
    return neg.encode()


def perturb(content: bytes) -> bytes:
    """A plausible value that differs from ``content``: what a leak of another machine's file looks like."""
    text = content.decode(errors="replace").strip()
    if re.fullmatch(r"-?\d+", text):
        n = int(text)
        return str(n + 1 if n >= 0 else 0).encode() + b"\n"
    if _CPULIST.match(text):
        cpus = sorted({c for part in text.split(",") for c in _span(part)})
        cpus = cpus[:-1] if len(cpus) > 1 else [*cpus, cpus[-1] + 1]
        return ",".join(map(str, cpus)).encode() + b"\n"
    if _HEXMASK.match(text):
        return (text[:-1] + format(int(text[-1], 16) ^ 1, "x")).encode() + b"\n"
    for old, new in (("ACTIVE", "DOWN"), ("InfiniBand", "Ethernet"), ("up", "down")):
        if old in text:
            return text.replace(old, new).encode() + b"\n"
    if m := re.search(r"\d+", text):
        return (text[: m.start()] + str(int(m.group()) + 1) + text[m.end():]).encode() + b"\n"
    return (text + "x").encode() + b"\n"


def _span(part: str) -> range:
    lo, _, hi = part.partition("-")
    return range(int(lo), int(hi or lo) + 1)


def plan(rng: random.Random, root: Path, targets: Targets) -> Mutation:
    """One mutation of one path discovery reads, chosen by ``rng``."""
    typ, cat = rng.choice(targets.categories())
    rel = rng.choice(targets.paths(typ, cat))
    if typ == "dir":
        return _plan_dir(rng, rel)
    if typ == "link":
        return _plan_link(rng, root, rel)
    return _plan_file(rng, root, rel)


def _plan_file(rng: random.Random, root: Path, rel: str) -> Mutation:
    kind = rng.choice(FILE_KINDS)
    content = _read(root, rel)
    text = content.decode(errors="replace").strip()
    name = os.path.basename(rel)
    if kind == "truncate":
        return Mutation(kind, rel)
    if kind == "random-bytes":
        n = rng.randint(1, 64)
        data = bytes(rng.randrange(256) for _ in range(n))
        return Mutation(kind, rel, rng.choice([b"", b"\xff\xfe", b"\x00"]) + data, note=f"{n} random bytes")
    if kind == "huge-number":
        payload, repeat, note = _huge(text, name, rng)
        return Mutation(kind, rel, payload, repeat=repeat, note=note)
    if kind == "negative-number":
        return Mutation(kind, rel, _negative(text, rng))
    if kind == "non-ascii-digits":
        return Mutation(kind, rel, (text.translate(_ARABIC_INDIC) if re.search(r"\d", text) else "٣").encode())
    if kind == "reversed-range":
        return Mutation(kind, rel, rng.choice([b"7-3", b"3-", b"-", b",,", b"0-3,,5", b"1-2-3"]))
    if kind == "abs-live":
        live = "/" + rel if os.path.isfile("/" + rel) and rng.random() < 0.5 else rng.choice(LIVE_FILES)
        ref = None if live.startswith("/proc/self") else _read(Path("/"), live.lstrip("/"))
        return Mutation(kind, rel, live.encode(), leak_ref=ref)
    if kind in ("abs-decoy", "dotdot-escape"):
        decoy = perturb(content)
        return Mutation(kind, rel, b"", decoy=decoy, leak_ref=decoy, note=f"decoy {decoy[:40]!r}")
    return Mutation(kind, rel)  # to-dir, to-fifo, dangling-symlink, self-loop, pair-loop, remove, chmod-000


def _plan_dir(rng: random.Random, rel: str) -> Mutation:
    kind = rng.choice(DIR_KINDS)
    if kind == "abs-live-dir":
        return Mutation(kind, rel, ("/" + rel).encode())
    return Mutation(kind, rel)


def _plan_link(rng: random.Random, root: Path, rel: str) -> Mutation:
    kind = rng.choice(LINK_KINDS)
    target = os.readlink(root / rel)
    if kind == "dangling-link":  # a device path that does not exist: a NIC must not appear on it
        fake = re.sub(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d$", "0000:ee:1f.7", target.rstrip("/"))
        if fake == target.rstrip("/"):
            fake = target.rstrip("/") + "-gone"
        return Mutation(kind, rel, fake.encode())
    if kind == "abs-live-link":  # the same device on the live host
        resolved = os.path.relpath(os.path.realpath(root / rel), os.path.realpath(root))
        return Mutation(kind, rel, ("/" + resolved).encode())
    if kind == "dotdot-escape-link":
        return Mutation(kind, rel, ("../" * 24 + "sys/devices/system/cpu").encode())
    if kind == "link-loop":
        return Mutation(kind, rel, os.path.basename(rel).encode())
    if kind == "link-to-parent":
        return Mutation(kind, rel, b"..")
    return Mutation(kind, rel)  # remove-link, link-to-file


def _unlink(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


def replace_file(path: Path, data: bytes, repeat: int = 1) -> None:
    _unlink(path)
    with open(path, "wb") as f:
        for _ in range(repeat // 65536):
            f.write(data * 65536)
        f.write(data * (repeat % 65536))
    os.chmod(path, 0o444)


def apply(m: Mutation, root: Path, decoy_dir: Path) -> None:
    """Makes ``m`` under ``root`` (a copy). Decoys (files outside the tree) go to ``decoy_dir``."""
    p = root / m.path
    k = m.kind
    if k in ("truncate", "random-bytes", "huge-number", "negative-number", "non-ascii-digits", "reversed-range"):
        replace_file(p, m.payload, m.repeat)
    elif k in ("leak-ref", "contra-file"):
        replace_file(p, m.payload)
    elif k in ("to-dir",):
        _unlink(p)
        p.mkdir()
        os.chmod(p, 0o755)
    elif k in ("to-fifo", "dir-to-fifo"):
        _unlink(p)
        os.mkfifo(p, 0o666)
    elif k == "dangling-symlink":
        _unlink(p)
        os.symlink(p.name + ".gone", p)
    elif k == "self-loop":
        _unlink(p)
        os.symlink(p.name, p)
    elif k == "pair-loop":
        _unlink(p)
        os.symlink(p.name + ".loop", p)
        os.symlink(p.name, p.parent / (p.name + ".loop"))
    elif k in ("abs-live", "abs-live-dir", "dangling-link", "abs-live-link", "dotdot-escape-link", "link-loop",
               "link-to-parent"):
        _unlink(p)
        os.symlink(m.payload.decode(), p)
    elif k in ("abs-decoy", "dotdot-escape"):
        decoy = decoy_dir / (m.path.replace("/", "_"))
        decoy.write_bytes(m.decoy or b"")
        os.chmod(decoy, 0o444)
        _unlink(p)
        depth = len(Path(m.path).parts) - 1 + len(root.parts) + 2
        os.symlink(str(decoy) if k == "abs-decoy" else "../" * depth + str(decoy).lstrip("/"), p)
    elif k in ("remove", "remove-dir", "remove-link", "contra-remove-dir"):
        _unlink(p)
    elif k in ("chmod-000", "chmod-000-dir"):
        if p.is_file():
            data = p.read_bytes()
            replace_file(p, data)  # a fresh inode: the pristine tree keeps its mode
        os.chmod(p, 0)
    elif k in ("dir-to-file", "link-to-file"):
        _unlink(p)
        replace_file(p, b"0\n")
    elif k == "dir-loop":
        _unlink(p)
        os.symlink(".", p)
    else:  # pragma: no cover - a planner bug
        raise ValueError(f"unknown mutation kind {k}")


def touched(m: Mutation) -> list[str]:
    """The paths ``apply`` replaces or creates (relative): what ``restore`` must put back."""
    return [m.path, m.path + ".loop"] if m.kind == "pair-loop" else [m.path]
