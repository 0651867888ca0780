"""nccl-tests' arithmetic for the collectives, pure: how many elements each rank sends and receives for a
size of the sweep, where the in-place buffers sit, how many bytes the algorithm bandwidth counts, the bus
factor, and the shift of the buffers per iteration. Shared by the NCCL and the gloo backends.

From NVIDIA/nccl-tests 2.19.6 (``src/<op>.cu``: ``*GetCollByteCount`` and ``*GetBw``; ``doc/PERFORMANCE.md``):

- the size of the sweep is S, the "size" column: count x sizeof(float) for all_reduce, the whole gathered
  (all_gather), scattered (reduce_scatter) or exchanged (alltoall) buffer for the others;
- for the gather-type ops each rank's share is ``(count / ranks)`` rounded down to a multiple of 16 bytes;
- algbw = S / t, busbw = algbw x 2(n-1)/n for all_reduce and x (n-1)/n for all_gather, reduce_scatter
  and alltoall;
- in place: all_gather sends from its own slot of the receive buffer (rank x share), reduce_scatter
  receives into its own slot of the send buffer; all_reduce and alltoall use one buffer for both ends
  (nccl-tests times the in-place alltoall but does not count its wrong elements);
- "Avg bus bandwidth" is the mean busbw over every printed cell (all sizes, out of place and in place);
- the data check's values depend on the sending rank and on the element's position, as nccl-tests'
  (``ncclVerifiablePrepareInput``) do, so an element from the wrong rank or the wrong place, or one not
  written, is counted wrong: here ``(position x 2654435761 + rank x 40503) mod 65521 + 1``, a sum of up
  to 256 of them exact in float32.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

FLOAT_BYTES = 4

# busbw = algbw x factor(ranks)
BUS_FACTORS: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall")
OUT_OF_PLACE = "out_of_place"
IN_PLACE = "in_place"


@dataclass(frozen=True, slots=True)
class Counts:
    """Elements of one rank for one size: its buffers, the count passed to the call, and where the
    in-place variant puts the send (or receive) part, in elements per rank index."""

    send: int
    recv: int
    param: int  # the count argument of the NCCL / gloo call
    send_in_place: int  # in place, send from recv + rank x this (all_gather)
    recv_in_place: int  # in place, receive into send + rank x this (reduce_scatter)


def counts(op: str, size: int, ranks: int, elt: int = FLOAT_BYTES) -> Counts:
    count = size // elt
    if op == "all_reduce":
        return Counts(count, count, count, 0, 0)
    share = (count // ranks) & ~(16 // elt - 1)
    if op == "all_gather":
        return Counts(share, share * ranks, share, share, 0)
    if op == "reduce_scatter":
        return Counts(share * ranks, share, share, 0, share)
    if op == "alltoall":
        return Counts(share * ranks, share * ranks, share, 0, 0)
    raise ValueError(f"{op} is not a collective")


def moved(op: str, size: int, ranks: int) -> int:
    """S of nccl-tests: the bytes algbw counts per operation, after the rounding of each rank's share."""
    c = counts(op, size, ranks)
    return max(c.send, c.recv) * FLOAT_BYTES


def all_reduce_bytes(size: int, ranks: int) -> int:
    """nccl-tests' S for all_reduce: count x sizeof(float), the count rounded down to whole floats."""
    return moved("all_reduce", size, ranks)


def modes(op: str) -> tuple[str, ...]:
    """The variants timed per size, in nccl-tests' order (out of place first), every op both."""
    del op
    return (OUT_OF_PLACE, IN_PLACE)


def checked(op: str, mode: str) -> bool:
    """Whether nccl-tests counts the wrong elements of this variant (not the in-place alltoall)."""
    return not (op == "alltoall" and mode == IN_PLACE)


def rotation_offset(iteration: int, size: int, capacity: int) -> int:
    """nccl-tests' shift of the buffer pointer per iteration: size x (iter mod (capacity // size))."""
    slots = max(1, capacity // size) if size else 1
    return size * (iteration % slots)


_MULT, _RANK_MULT, _MOD = 2654435761, 40503, 65521


def element_values(position: Any, ranks: tuple[int, ...]) -> Any:
    """The sum over ``ranks`` of what each puts at ``position`` (an int, or an int64 array of numpy, CuPy
    or torch): the data check's values."""
    total: Any = 0
    for r in ranks:
        total = total + (position * _MULT + r * _RANK_MULT) % _MOD + 1
    return total


def values_into(position: Any, ranks: tuple[int, ...], out: Any, scratch: Any) -> Any:
    """``element_values`` summed into ``out`` (float32) without allocating, for arrays that take in-place
    operators (numpy, torch): ``position`` (int64) is overwritten, ``scratch`` (int64) is working space,
    all three of one length. Each term is (position x 2654435761 mod 65521 + rank x 40503 mod 65521) mod
    65521 + 1, the same number; every partial sum is a whole number below 2**24, exact in float32. The
    CPU ranks check a chunk in buffers they keep: a fresh array per step faults in its pages every time."""
    position *= _MULT
    position %= _MOD
    out[...] = 0
    for r in ranks:
        scratch[...] = position
        scratch += (r * _RANK_MULT) % _MOD
        scratch %= _MOD
        scratch += 1
        out += scratch
    return out


def summed_values(xp: Any, position: Any, ranks: tuple[int, ...]) -> Any:
    """``element_values`` over an int64 array of an array module with ``searchsorted`` (numpy, CuPy), in a
    fixed number of array operations whatever the rank count: with b = position x 2654435761 mod 65521 and
    c_r = r x 40503 mod 65521, each term is b + c_r + 1, less 65521 where b + c_r >= 65521, and how many
    c_r reach 65521 - b is one binary search in the sorted c_r."""
    c = sorted((r * _RANK_MULT) % _MOD for r in ranks)
    n = len(c)
    b = position * _MULT % _MOD
    below = xp.searchsorted(xp.asarray(c, dtype=xp.int64), _MOD - b, side="left")
    return b * n + (sum(c) + n) - (n - below) * _MOD


@dataclass(frozen=True, slots=True)
class Segment:
    """``count`` elements from element ``offset`` of a buffer, each the sum over ``ranks`` of what they put
    at position ``base`` + i of their send buffers."""

    offset: int
    count: int
    ranks: tuple[int, ...]
    base: int


def sent_segment(rank: int, c: Counts) -> Segment:
    """What ``rank`` puts in its send buffer for the data check: its own values, by position."""
    return Segment(0, c.send, (rank,), 0)


def received_segments(op: str, rank: int, ranks: int, c: Counts) -> tuple[Segment, ...]:
    """What ``rank``'s receive buffer must hold after the operation, segment by segment."""
    everyone, share = tuple(range(ranks)), c.param
    if op == "all_reduce":
        return (Segment(0, c.recv, everyone, 0),)
    if op == "reduce_scatter":
        return (Segment(0, share, everyone, rank * share),)
    if op == "all_gather":
        return tuple(Segment(j * share, share, (j,), 0) for j in range(ranks))
    if op == "alltoall":
        return tuple(Segment(j * share, share, (j,), rank * share) for j in range(ranks))
    raise ValueError(f"{op} is not a collective")


def _size_arg(n: int) -> str:
    """A size as nccl-tests' ``parsesize`` reads it (K, M, G: powers of 1024)."""
    for suffix, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{suffix}"
    return str(n)


def nccl_tests_command(op: str, sizes: tuple[int, ...], ranks: int | str, *, iters: int, warmup: int,
                       timing: str, launches: int = 1) -> str:
    """The nccl-tests command line (one process, ``-g`` GPUs) whose sweep, counts and timing mode a run of
    ``op`` over ``sizes`` follows: ``-G 0`` for the stream, ``-G <launches>`` for graph launches; data type
    float, sum, the data check on (``-c 1``) are nccl-tests' defaults. Sizes that are not one geometric
    sweep have no one command line, and say so."""
    sweep = sorted(sizes)
    factor = sweep[1] // sweep[0] if len(sweep) > 1 and sweep[0] else 2
    if any(b != a * factor for a, b in itertools.pairwise(sweep)):
        return f"none: the sizes {', '.join(map(str, sweep))} are not one nccl-tests sweep (-b/-e/-f)"
    graphs = launches if timing == "graph" else 0
    return (f"{op}_perf -b {_size_arg(sweep[0])} -e {_size_arg(sweep[-1])} -f {factor} -g {ranks} -n {iters} "
            f"-w {warmup} -G {graphs}")
