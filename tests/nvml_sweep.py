"""The NVML half of the truth sweep: every NVML call a discovery made, its answer edited in the test library.

The test NVML (tests/fakenvml) answers from a line file it reads at each ``nvmlInit`` that opens a session, so
an answer is edited by rewriting that file: one ``gpu N <key>`` (or ``pair``, ``driver``...) line changed, or
one ``error <call> <gpu> <link> <code>`` rule added. :func:`edits_of` lists, for one call the recorder saw,
the edits of the file sweep's kinds where they apply to an NVML answer:

- ``error <CODE>``: the call fails with NVML_ERROR_UNKNOWN, GPU_IS_LOST or NOT_SUPPORTED (its GPU and link);
- ``other-gpu``: the value another GPU (link, pair) answers, where it differs;
- ``out-of-range``: a value no hardware gives (PCIe Gen0/Gen99, x0/x33, 64 NVLinks, no memory, CPU 4000);
- ``sibling``: a plausible value that disagrees with the reading beside it (sysfs's bus id, link, NUMA node;
  the architecture beside the compute capability; an NVLink end where nothing is);
- ``garbage``, ``empty``: a string of bytes that are no text, or none.

Each must end as a file edit must (``tests.truth_sweep.verdict``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ERRORS = {"UNKNOWN": 999, "GPU_IS_LOST": 15, "NOT_SUPPORTED": 3}
GARBAGE = "\udcff\udcfe\udc9cgarbage\x01"  # bytes 0xff 0xfe 0x9c: no UTF-8 (written with surrogateescape)
_LINK_CALLS = ("nvmlDeviceGetNvLinkState", "nvmlDeviceGetNvLinkVersion", "nvmlDeviceGetNvLinkRemoteDeviceType",
               "nvmlDeviceGetNvLinkRemotePciInfo_v2")
_PAIR_CALLS = ("nvmlDeviceGetTopologyCommonAncestor", "nvmlDeviceGetP2PStatus")
_SYSTEM = {"nvmlSystemGetDriverVersion": "driver", "nvmlSystemGetNVMLVersion": "nvml",
           "nvmlSystemGetCudaDriverVersion": "cuda"}
# Calls answered by one ``gpu N <key>`` line: (key, which value of the line, or None for all of it).
_GPU_LINE = {"nvmlDeviceGetUUID": "uuid", "nvmlDeviceGetName": "name", "nvmlDeviceGetMemoryInfo": "memory",
             "nvmlDeviceGetMinorNumber": "minor", "nvmlDeviceGetNumaNodeId": "numa",
             "nvmlDeviceGetCpuAffinity": "cpus", "nvmlDeviceGetMemoryAffinity": "memnodes",
             "nvmlDeviceGetCudaComputeCapability": "cc", "nvmlDeviceGetArchitecture": "arch",
             "nvmlDeviceGetMigMode": "mig", "nvmlDeviceGetGpuFabricInfoV": "fabric",
             "nvmlDeviceGetPlatformInfo": "platform"}
_PCIE = {"nvmlDeviceGetCurrPcieLinkGeneration": 0, "nvmlDeviceGetCurrPcieLinkWidth": 1,
         "nvmlDeviceGetMaxPcieLinkGeneration": 2, "nvmlDeviceGetMaxPcieLinkWidth": 3}
_OTHER_CC = {"9": "8 0"}  # any other major: Hopper's
_GPU = re.compile(r"^gpu (\d+) (\S+) ?(.*)$")


@dataclass(frozen=True)
class NvmlEdit:
    call: str
    edit: str
    target: str  # "gpu 3", "gpu 3 link 5", "pair 0 1", "system"
    lines: tuple[str, ...]

    def write(self, path: Path) -> None:
        path.write_bytes(("\n".join(self.lines) + "\n").encode(errors="surrogateescape"))


class Profile:
    """The test NVML's line file, indexed by what each line answers."""

    def __init__(self, text: str, root: Path) -> None:
        self.lines = tuple(text.splitlines())
        self.root = root
        self.gpu: dict[tuple[int, str], int] = {}  # (gpu, key) -> line; link and field lines by "link 3", "field 91"
        self.pairs: dict[tuple[int, int, str], int] = {}  # (a, b, "ancestor" | "p2p 2") -> line
        self.system: dict[str, int] = {}
        for n, line in enumerate(self.lines):
            m = _GPU.match(line)
            if m is not None:
                i, key, rest = int(m.group(1)), m.group(2), m.group(3)
                sub = f"{key} {rest.split()[0]}" if key in ("link", "field") else key
                self.gpu[(i, sub)] = n
            elif line.startswith("pair "):
                _, a, b, what, *rest = line.split()
                self.pairs[(int(a), int(b), what if what == "ancestor" else f"p2p {rest[0]}")] = n
            else:
                self.system[line.split(" ", 1)[0]] = n
        self.count = 1 + max((i for i, _ in self.gpu), default=-1)

    def value(self, gpu: int, key: str) -> str | None:
        n = self.gpu.get((gpu, key))
        return None if n is None else self.lines[n].split(" ", 3 if " " not in key else 4)[-1]

    def with_line(self, n: int, line: str) -> tuple[str, ...]:
        return (*self.lines[:n], line, *self.lines[n + 1:])

    def set_gpu(self, gpu: int, key: str, rest: str) -> tuple[str, ...]:
        n = self.gpu.get((gpu, key))
        line = f"gpu {gpu} {key} {rest}"
        return (*self.lines, line) if n is None else self.with_line(n, line)

    def links(self, gpu: int, *, active: bool = True) -> list[int]:
        return [int(k.split()[1]) for (i, k), n in self.gpu.items() if i == gpu and k.startswith("link ")
                and (self.lines[n].split()[4] == "1" or not active)]

    def bus_ids(self) -> list[str]:
        return [v.split()[0] for i in range(self.count) if (v := self.value(i, "busid"))]

    def nothing_at(self) -> str:
        """An NVML bus id no function of the sysfs tree has."""
        have = {p.name for p in (self.root / "sys/bus/pci/devices").iterdir()}
        bus = next(b for b in range(0xFE, 0, -1) if not any(h.startswith(f"0000:{b:02x}:") for h in have))
        return f"00000000:{bus:02X}:00.0"


def _other(values: list[str], mine: str) -> str | None:
    return next((v for v in values if v != mine), None)


def _gpu_values(p: Profile, gpu: int, key: str, call: str) -> Iterator[tuple[str, str]]:
    """(edit, new rest of the line) for one GPU's line."""
    mine = p.value(gpu, key)
    other = _other([v for i in range(p.count) if (v := p.value(i, key)) is not None], mine or "")
    if other is not None and mine is not None:
        yield "other-gpu", other
    if key in ("uuid", "name"):
        yield "garbage", GARBAGE
        yield "empty", ""
        yield "sibling", ("GPU-00000000-0000-0000-0000-00000000beef" if key == "uuid" else
                          "NVIDIA A100-SXM4-80GB" if "H100" in (mine or "") else "NVIDIA H100 80GB HBM3")
    elif key == "memory":
        yield "out-of-range", "0"
        yield "out-of-range", str(2**52)
    elif key in ("minor", "numa"):
        yield "out-of-range", "4096000"
        if key == "numa":
            yield "sibling", "0" if mine != "0" else "1"  # a node of CPUs, or another node
    elif key in ("cpus", "memnodes"):
        yield "empty", ""
        yield "out-of-range", "4000" if key == "cpus" else "1000"
        if key == "memnodes":
            yield "sibling", "1" if mine != "1" else "0"
    elif key == "cc" and mine is not None:
        yield "out-of-range", "99 99"
        yield "sibling", _OTHER_CC.get(mine.split()[0], "9 0")
    elif key == "arch" and mine is not None:
        yield "out-of-range", "99"
        yield "sibling", "7" if mine != "7" else "9"
    elif key == "mig":
        yield "sibling", "1 1 7" if mine is None or mine.startswith("0") else "0 0 7"
    elif key == "fabric" and mine is not None:
        state, status, clique, uuid, *rest = mine.split()
        yield "out-of-range", " ".join(("99", status, clique, uuid, *rest))
        yield "sibling", " ".join((state, status, str(int(clique) + 1), uuid, *rest))
        yield "empty", " ".join((state, status, clique, "0" * 32, *rest))
    elif key == "platform" and mine is not None:
        yield "sibling", " ".join(("S" * 16, *mine.split()[1:]))  # another chassis than its tray peers'


def _value_edits(p: Profile, call: str, gpu: int, link: int | None, pair: tuple[int, int] | None
                 ) -> Iterator[tuple[str, tuple[str, ...]]]:
    if call in _SYSTEM:
        key = _SYSTEM[call]
        n = p.system.get(key)
        if n is None:
            return
        if key == "cuda":
            yield "out-of-range", p.with_line(n, "cuda 0")
            yield "out-of-range", p.with_line(n, "cuda 99999999")
            yield "sibling", p.with_line(n, "cuda 10010")
        else:
            yield "sibling", p.with_line(n, f"{key} 999.99.99" if key == "driver" else f"{key} 99.999.99.99")
            yield "garbage", p.with_line(n, f"{key} {GARBAGE}")
            yield "empty", p.with_line(n, key)
    elif call == "nvmlDeviceGetCount_v2":
        last = p.count - 1
        yield "other-gpu", tuple(ln for ln in p.lines if not ln.startswith(f"gpu {last} ") and not (
            ln.startswith("pair ") and str(last) in ln.split()[1:3]))
        yield "out-of-range", (*p.lines, f"gpu {p.count} name NVIDIA H100 80GB HBM3")
    elif call == "nvmlDeviceGetPciInfo_v3" and (busid := p.value(gpu, "busid")) is not None:
        bus, device, subsystem = busid.split()
        other = _other(p.bus_ids(), bus)
        if other is not None:
            yield "other-gpu", p.set_gpu(gpu, "busid", f"{other} {device} {subsystem}")
        yield "sibling", p.set_gpu(gpu, "busid", f"{p.nothing_at()} {device} {subsystem}")
        yield "garbage", p.set_gpu(gpu, "busid", f"zz:zz {device} {subsystem}")
        yield "out-of-range", p.set_gpu(gpu, "busid", f"{bus} 0xffff10de {subsystem}")
        yield "sibling", p.set_gpu(gpu, "busid", f"{bus} {0x20B010DE if device != '0x20b010de' else 0x233010DE:#010x} "
                                                 f"{subsystem}")
    elif call in _GPU_LINE:
        key = _GPU_LINE[call]
        for edit, rest in _gpu_values(p, gpu, key, call):
            yield edit, p.set_gpu(gpu, key, rest)
    elif call in _PCIE and (pcie := p.value(gpu, "pcie")) is not None:
        values, k = pcie.split(), _PCIE[call]
        v = int(values[k])
        for edit, new in (("out-of-range", (0, 99) if k % 2 == 0 else (0, 33)),
                          ("sibling", (v - 1 if v > 1 else v + 1,) if k % 2 == 0 else (v // 2 if v > 1 else 2,))):
            for x in new:
                yield edit, p.set_gpu(gpu, "pcie", " ".join(str(x) if j == k else s for j, s in enumerate(values)))
    elif call == "nvmlDeviceGetFieldValues":
        for fid in ("91", "147"):
            mine = p.value(gpu, f"field {fid}")
            if mine is None:
                continue
            code, value = mine.split()
            yield "out-of-range", p.set_gpu(gpu, f"field {fid}", "0 64")
            if code == "0":
                yield "sibling", p.set_gpu(gpu, f"field {fid}", f"0 {int(value) - 1 if int(value) else 1}")
                yield "error UNKNOWN", p.set_gpu(gpu, f"field {fid}", "999 0")
    elif call in _LINK_CALLS and link is not None:
        state, version, rtype, remote = (p.value(gpu, f"link {link}") or "").split()

        def line(s: str = state, v: str = version, t: str = rtype, r: str = remote) -> tuple[str, ...]:
            return p.set_gpu(gpu, f"link {link}", f"{s} {v} {t} {r}")

        if call == "nvmlDeviceGetNvLinkState":
            yield "sibling", line(s="0" if state == "1" else "1")
            links = p.value(gpu, "links")
            if links is not None:
                yield "out-of-range", p.set_gpu(gpu, "links", str(int(links) + 1))
        elif call == "nvmlDeviceGetNvLinkVersion":
            yield "out-of-range", line(v="0")
            yield "out-of-range", line(v="99")
            yield "sibling", line(v=str(int(version) - 1))
        elif call == "nvmlDeviceGetNvLinkRemoteDeviceType":
            yield "sibling", line(t="2" if rtype == "0" else "0")
            yield "out-of-range", line(t="99")
        else:
            ends = [p.lines[n].split()[-1] for (_, k), n in p.gpu.items() if k.startswith("link ")]
            others = [b for b in (*p.bus_ids(), *ends) if b != remote]
            if others:
                yield "other-gpu", line(r=others[0])
            yield "sibling", line(r=p.nothing_at())
            own = p.value(gpu, "busid")
            if own is not None:
                yield "sibling", line(r=own.split()[0])
            yield "garbage", line(r="zz:zz")
    elif call in _PAIR_CALLS and pair is not None:
        a, b = pair
        if call == "nvmlDeviceGetTopologyCommonAncestor":
            n = p.pairs.get((a, b, "ancestor"))
            if n is not None:
                level = p.lines[n].split()[-1]
                yield "sibling", p.with_line(n, f"pair {a} {b} ancestor {10 if level != '10' else 50}")
                yield "out-of-range", p.with_line(n, f"pair {a} {b} ancestor 99")
        else:
            for (x, y, what), n in p.pairs.items():
                if (x, y) == (a, b) and what.startswith("p2p "):
                    cap, status = what.split()[1], p.lines[n].split()[-1]
                    yield "sibling", p.with_line(n, f"pair {a} {b} p2p {cap} {5 if status == '0' else 0}")
                    yield "out-of-range", p.with_line(n, f"pair {a} {b} p2p {cap} 99")


Target = tuple[int, int | None, tuple[int, int] | None]  # (GPU, link, pair)


def targets(p: Profile, call: str, rng: random.Random, every: bool) -> list[Target]:
    """Which GPU (link, pair) an edit of ``call`` aims at: one drawn, or every one."""
    gpus = list(range(p.count))
    out: list[Target] = []
    for g in gpus if every else [rng.choice(gpus)] if gpus else []:
        if call in _LINK_CALLS:
            links = p.links(g, active=call != "nvmlDeviceGetNvLinkState")  # any link's state, an active one's rest
            out += [(g, lk, None) for lk in (links if every else [rng.choice(links)] if links else [])]
        elif call in _PAIR_CALLS:
            peers = [b for b in gpus if b > g] or [b for b in gpus if b < g]
            out += [(g, None, (min(g, b), max(g, b))) for b in (peers if every else [rng.choice(peers)] if peers
                                                               else [])]
        else:
            out.append((g, None, None))
    return out


def unanswered(p: Profile, call: str) -> bool:
    """Whether no GPU answers ``call`` with a value (NOT_SUPPORTED everywhere: only its errors are edits)."""
    key = _GPU_LINE.get(call) or ("pcie" if call in _PCIE else "field 91" if call == "nvmlDeviceGetFieldValues"
                                  else "link 0" if call in _LINK_CALLS else None)
    return key is not None and all(p.value(i, key) is None for i in range(p.count))


def edits_of(p: Profile, call: str, rng: random.Random, *, every: bool = False) -> list[NvmlEdit]:
    """Every edit of the answers of ``call``: errors of each kind and edited values, at one drawn target (or
    every target)."""
    system = call.startswith(("nvmlSystem", "nvmlInit", "nvmlShutdown")) or call == "nvmlDeviceGetCount_v2"
    out = []
    for gpu, link, pair in [(0, None, None)] if system else targets(p, call, rng, every):
        where = "system" if system else f"pair {pair[0]} {pair[1]}" if pair else f"gpu {gpu}" + (
            f" link {link}" if link is not None else "")
        for name, code in ERRORS.items():
            rule = f"error {call} {'*' if system else gpu} {'*' if link is None else link} {code}"
            out.append(NvmlEdit(call, f"error {name}", where, (*p.lines, rule)))
        out += [NvmlEdit(call, edit, where, lines) for edit, lines in _value_edits(p, call, gpu, link, pair)
                if lines != p.lines]
    return out
