"""Which copies a copy test makes and which GPU's stream issues each (that is what makes a copy a read or
a write), decided without a GPU.

nvbandwidth: the copy engine that runs a copy belongs to the context of the stream it is issued on.
A *write* is issued on the source GPU's stream (the source pushes); a *read* on the destination's
(the destination pulls). Host copies are issued on the GPU's stream.
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
    """One timed copy stream: from ``src`` to ``dst``, issued on the stream of GPU ``issuer``."""

    src: Target
    dst: Target
    issuer: Target


def issuer(src: Target, dst: Target, initiator: Initiator) -> Target:
    """The GPU whose stream issues a copy. Host memory has no stream: the GPU side issues."""
    if src.kind != "gpu":
        return dst
    if dst.kind != "gpu":
        return src
    return src if initiator is Initiator.SOURCE else dst


def legs(test: str, targets: tuple[Target, ...]) -> tuple[Leg, ...]:
    """The copies of one copy test, in channel order (the spec's ``channels``)."""

    def leg(src: Target, dst: Target, how: Initiator = Initiator.SOURCE) -> Leg:
        return Leg(src, dst, issuer(src, dst, how))

    read, write = Initiator.DESTINATION, Initiator.SOURCE
    if test == "device_local_copy":
        (g,) = targets
        return (leg(g, g),)
    a, b = targets
    table = {
        "host_to_device_memcpy_ce": (leg(a, b),),
        "device_to_host_memcpy_ce": (leg(b, a),),
        "device_to_device_memcpy_read_ce": (leg(b, a, read),),  # the row GPU pulls from the column
        "device_to_device_memcpy_write_ce": (leg(a, b, write),),  # the row GPU pushes to the column
        "device_to_device_bidirectional_memcpy_read_ce": (leg(b, a, read), leg(a, b, read)),
        "device_to_device_bidirectional_memcpy_write_ce": (leg(a, b, write), leg(b, a, write)),
    }
    if test not in table:
        raise ProbeError(f"{test} is not a copy test")
    return table[test]
