"""What the cuda backend does, decided without a GPU: which copies a test makes, which GPU's stream
issues each (that is what makes a copy a read or a write), the pointer-chase chain, and the kernels.

nvbandwidth: the copy engine that runs a copy belongs to the context of the stream it is issued on.
A *write* is issued on the source GPU's stream (the source pushes); a *read* on the destination's
(the destination pulls). Host copies are issued on the GPU's stream.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..core._errors import ProbeError
from ..core._model import Target


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


WORD = 8  # one pointer


def chain_next(index: int, words: int, stride_words: int) -> int:
    """Word ``index`` of the chain points at word ``index + stride`` (wrapping), as nvbandwidth builds it."""
    return (index + stride_words) % words


def chain_end(hops: int, words: int, stride_words: int) -> int:
    """The word a chase of ``hops`` loads from word 0 ends on."""
    return (hops * stride_words) % words


def chain_words(base: int, size: int, stride: int) -> list[int]:
    """The chain's content: word i holds the address of word i+stride (``base`` is where it will live)."""
    words, step = size // WORD, stride // WORD
    if words < 1 or step < 1:
        raise ProbeError(f"a {size}-byte chain with a {stride}-byte stride has no hops")
    return [base + chain_next(i, words, step) * WORD for i in range(words)]


def per_launch(accesses: int, launches: int) -> int:
    """nvbandwidth runs one launch per SM, each chasing accesses / SMs hops; latency = sum(t) / accesses."""
    return max(1, accesses // max(1, launches))


KERNELS = r"""
extern "C" __global__ void topolink_latch(unsigned long long flag_addr, unsigned long long timeout_clocks)
{
    // Holds the stream until the host writes a non-zero flag, or the timeout passes (never forever).
    const volatile int* flag = (const volatile int*)flag_addr;
    const long long end = clock64() + (long long)timeout_clocks;
    while (*flag == 0) {
        if (clock64() > end) {
            break;
        }
    }
}

extern "C" __global__ void topolink_chase(unsigned long long start, unsigned long long hops,
                                          unsigned int target_block, unsigned long long sink_addr)
{
    // One thread of one block follows the chain: every load depends on the one before.
    if (blockIdx.x != target_block || threadIdx.x != 0) {
        return;
    }
    const unsigned long long* p = (const unsigned long long*)start;
    for (unsigned long long i = 0; i < hops; ++i) {
        p = (const unsigned long long*)(*p);
    }
    *(unsigned long long*)sink_addr = (unsigned long long)p;
}
"""
KERNEL_NAMES = ("topolink_latch", "topolink_chase")
LATCH_TIMEOUT_MS = 10_000  # nvbandwidth's DEFAULT_SPIN_KERNEL_TIMEOUT_MS
