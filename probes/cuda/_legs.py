"""Which copies a copy test makes, which GPU's stream issues each (that is what makes a copy a read or a
write), with which engine, and which of them are timed, decided without a GPU.

nvbandwidth (v0.8): the engine that runs a copy belongs to the context of the stream it is issued on. A
*write* is issued on the source GPU's stream (the source pushes); a *read* on the destination's (the
destination pulls). Host copies are issued on the GPU's stream. An SM copy is a kernel on the issuing
GPU that loads from the source and stores to the destination (host memory through its mapped address).
Interfering copies move a buffer twice the timed size, so that they cover the whole timed window; they
are not reported.

The bidirectional SM host tests (``SPLIT_TESTS``) are nvbandwidth's split-warp copy: one kernel per GPU
between its host buffer and its device buffer, half its warps copying one way and half the other, the
same size everywhere (the all-host forms run it on every GPU at once); nvbandwidth reports half the
bytes it moved (its estimate of each direction), of the measured GPU's kernel only. Its
device_to_host form launches the very same kernel as the host_to_device one.

All-to-one and one-to-all (``TOTAL_TESTS``): the target GPU against every other GPU at once, one copy of
the timed size per other GPU, every copy counted: nvbandwidth reports the bytes of all of them over the
time from the first start to the last end. Which GPU issues each copy follows nvbandwidth's context
preference: the CE tests issue a write on the source and a read on the destination; its SM tests issue
every copy on the source GPU (its "read" tests only reverse the copies' direction).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..core import ProbeError, Target


class Initiator(enum.StrEnum):
    SOURCE = "source"  # write: the source pushes
    DESTINATION = "destination"  # read: the destination pulls


@dataclass(frozen=True, slots=True)
class Leg:
    """One copy stream: from ``src`` to ``dst``, issued on the stream of GPU ``issuer``; ``scale`` times the
    timed size; ``timed`` legs are the test's channels, in order, the others only interfere."""

    src: Target
    dst: Target
    issuer: Target
    engine: str = "ce"  # ce | sm | sm-split (both ways between src and dst, one kernel)
    scale: int = 1
    timed: bool = True

    @property
    def peer(self) -> bool:
        return self.src.kind == self.dst.kind == "gpu" and self.src.index != self.dst.index


def issuer(src: Target, dst: Target, initiator: Initiator) -> Target:
    """The GPU whose stream issues a copy. Host memory has no stream: the GPU side issues."""
    if src.kind != "gpu":
        return dst
    if dst.kind != "gpu":
        return src
    return src if initiator is Initiator.SOURCE else dst


def _pairs(background: tuple[Target, ...]) -> list[tuple[Target, Target]]:
    """(host node, GPU) of each other GPU, as the plan lists them."""
    return [(background[i], background[i + 1]) for i in range(0, len(background) - 1, 2)]


TOTAL_TESTS = tuple(f"{w}_{how}_{e}" for w in ("all_to_one", "one_to_all") for how in ("write", "read")
                    for e in ("ce", "sm"))


def is_total(test: str) -> bool:
    """Whether the test reports one bandwidth for all its copies together (nvbandwidth's TOTAL_BW)."""
    return test in TOTAL_TESTS


SPLIT_TESTS = ("host_to_device_bidirectional_memcpy_sm", "device_to_host_bidirectional_memcpy_sm",
               "all_to_host_bidirectional_memcpy_sm", "host_to_all_bidirectional_memcpy_sm")


def _split_legs(test: str, host: Target, gpu: Target, others: list[tuple[Target, Target]]) -> tuple[Leg, ...]:
    """nvbandwidth's buffer order: the host buffer first for the host-device pair and host_to_all's
    measured GPU, the device buffer first for all_to_host's and for every interfering GPU."""
    first = (gpu, host) if test.startswith("all_to_host") else (host, gpu)
    return (Leg(*first, gpu, "sm-split"), *(Leg(g, h, g, "sm-split", timed=False) for h, g in others))


def _total_legs(test: str, target: Target, others: tuple[Target, ...]) -> tuple[Leg, ...]:
    """Every other GPU with the target, in CUDA order: the data flows into the target in all_to_one_write
    and one_to_all_read, out of it in the other two."""
    kind, how, engine = test.rsplit("_", 2)
    into = (kind == "all_to_one") == (how == "write")
    out: list[Leg] = []
    for o in others:
        src, dst = (o, target) if into else (target, o)
        pull = how == "read" and engine == "ce"  # PREFER_DST_CONTEXT; the SM tests always prefer the source
        out.append(Leg(src, dst, dst if pull else src, engine))
    return tuple(out)


def legs(test: str, targets: tuple[Target, ...], background: tuple[Target, ...] = ()) -> tuple[Leg, ...]:
    """The copies of one copy test: the timed ones first, in channel order (the spec's ``channels``)."""
    engine = "sm" if test.endswith("_sm") else "ce"
    if is_total(test):
        return _total_legs(test, targets[0], background)

    def leg(src: Target, dst: Target, how: Initiator = Initiator.SOURCE, *, scale: int = 1) -> Leg:
        return Leg(src, dst, issuer(src, dst, how), engine, scale, scale == 1)

    read, write = Initiator.DESTINATION, Initiator.SOURCE
    if test == "device_local_copy":
        (g,) = targets
        return (leg(g, g),)
    a, b = targets
    kind = test.removesuffix("_ce").removesuffix("_sm")
    others = _pairs(background)
    if test in SPLIT_TESTS:
        return _split_legs(test, a, b, others)
    table = {
        "host_to_device_memcpy": (leg(a, b),),
        "device_to_host_memcpy": (leg(b, a),),
        "host_to_device_bidirectional_memcpy": (leg(a, b), leg(b, a, scale=2)),
        "device_to_host_bidirectional_memcpy": (leg(b, a), leg(a, b, scale=2)),
        "device_to_device_memcpy_read": (leg(b, a, read),),  # the row GPU pulls from the column
        "device_to_device_memcpy_write": (leg(a, b, write),),  # the row GPU pushes to the column
        "device_to_device_bidirectional_memcpy_read": (leg(b, a, read), leg(a, b, read)),
        "device_to_device_bidirectional_memcpy_write": (leg(a, b, write), leg(b, a, write)),
        "all_to_host_memcpy": (leg(b, a), *(leg(g, h, scale=2) for h, g in others)),
        "host_to_all_memcpy": (leg(a, b), *(leg(h, g, scale=2) for h, g in others)),
        "all_to_host_bidirectional_memcpy": (
            leg(b, a), leg(a, b, scale=2), *(x for h, g in others for x in (leg(g, h, scale=2), leg(h, g, scale=2)))),
        "host_to_all_bidirectional_memcpy": (
            leg(a, b), leg(b, a, scale=2), *(x for h, g in others for x in (leg(h, g, scale=2), leg(g, h, scale=2)))),
    }
    if kind not in table:
        raise ProbeError(f"{test} is not a copy test")
    return table[kind]


def peer_pairs(copies: tuple[Leg, ...]) -> tuple[tuple[int, int], ...]:
    """The GPU pairs whose peer access the copies need, each unordered pair once, by CUDA ordinal."""
    out: dict[tuple[int, int], None] = {}
    for c in copies:
        if c.peer and c.src.index is not None and c.dst.index is not None:
            a, b = sorted((c.src.index, c.dst.index))
            out[a, b] = None
    return tuple(out)
