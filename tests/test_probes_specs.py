"""Test definitions against their reference tools: nccl-tests' bytes and bus factors, nvbandwidth's
read/write semantics (which GPU's stream issues each copy) and its pointer-chase chain."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from probes import BUS_FACTORS, CPU_SPECS, CUDA_SPECS, Target
from probes.core import (
    ProbeError,
    Segment,
    all_reduce_bytes,
    checked,
    counts,
    element_values,
    modes,
    moved,
    received_segments,
    sent_segment,
    summed_values,
    values_into,
)
from probes.cuda._kernels import KERNEL_NAMES, KERNELS, chain_end, chain_next, chain_words, per_launch, sm_copy_bytes
from probes.cuda._legs import Initiator, issuer, legs, peer_pairs

H = Target(id="numa0", kind="host", index=0, cpus=(0,))
A = Target(id="0000:05:00.0", kind="gpu", index=0)
B = Target(id="0000:06:00.0", kind="gpu", index=1)
C = Target(id="0000:07:00.0", kind="gpu", index=2)
H1 = Target(id="numa1", kind="host", index=1, cpus=(1,))


@pytest.mark.parametrize("ranks, factor", [(2, 1.0), (4, 1.5), (8, 1.75), (72, 2 * 71 / 72)])
def test_all_reduce_bus_factor_is_2_n_minus_1_over_n(ranks: int, factor: float) -> None:
    assert BUS_FACTORS["all_reduce"](ranks) == pytest.approx(factor)


@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter", "alltoall"])
def test_gather_type_factors(op: str) -> None:
    assert BUS_FACTORS[op](8) == pytest.approx(7 / 8)
    assert BUS_FACTORS["broadcast"](8) == 1.0


def test_collective_counts_are_nccl_tests() -> None:
    # each rank's share rounded down to 16 bytes (4 floats); S = the larger of send and receive
    ag = counts("all_gather", 1000, 3)
    assert (ag.send, ag.recv, ag.param, ag.send_in_place, ag.recv_in_place) == (80, 240, 80, 80, 0)
    rs = counts("reduce_scatter", 1000, 3)
    assert (rs.send, rs.recv, rs.param, rs.send_in_place, rs.recv_in_place) == (240, 80, 80, 0, 80)
    a2a = counts("alltoall", 1 << 20, 8)
    assert (a2a.send, a2a.recv, a2a.param) == (1 << 18, 1 << 18, 1 << 15)
    assert moved("all_gather", 1000, 3) == 960 and moved("all_reduce", 1000, 3) == 1000
    assert modes("alltoall") == modes("all_gather") == ("out_of_place", "in_place")  # nccl-tests times both
    assert not checked("alltoall", "in_place") and checked("alltoall", "out_of_place")
    with pytest.raises(ValueError):
        counts("broadcast", 1, 1)


def _values(seg: Segment) -> np.ndarray:
    return np.asarray(element_values(np.arange(seg.base, seg.base + seg.count, dtype=np.int64), seg.ranks),
                      dtype=np.float32)


def _collective(op: str, sends: list[np.ndarray], share: int) -> list[np.ndarray]:
    """What each rank receives, by the collective's definition (a reference, in numpy)."""
    n = len(sends)
    if op == "all_reduce":
        return [sum(sends)] * n  # type: ignore[list-item]
    if op == "reduce_scatter":
        total = sum(sends)
        return [total[p * share:(p + 1) * share] for p in range(n)]  # type: ignore[index]
    if op == "all_gather":
        return [np.concatenate(sends)] * n
    return [np.concatenate([sends[j][p * share:(p + 1) * share] for j in range(n)]) for p in range(n)]


def _wrong(op: str, received: list[np.ndarray], n: int, size: int) -> int:
    c = counts(op, size, n)
    return sum(int(np.count_nonzero(received[p][seg.offset:seg.offset + seg.count] != _values(seg)))
               for p in range(n) for seg in received_segments(op, p, n, c))


@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter", "alltoall"])
def test_the_data_check_values_depend_on_rank_and_position(op: str) -> None:
    n, size = 5, 4000
    c = counts(op, size, n)
    sends = [_values(sent_segment(r, c)) for r in range(n)]
    assert all(len(set(s.tolist())) > 1 for s in sends)  # not one constant per rank
    assert not np.array_equal(sends[0], sends[1])  # nor the same for every rank
    right = _collective(op, sends, c.param)
    assert _wrong(op, right, n, size) == 0
    shifted = [np.roll(r, 1) for r in right]  # every element in the same wrong place
    assert _wrong(op, shifted, n, size) > 0.9 * sum(len(r) for r in right)
    if op in ("all_gather", "alltoall"):
        swapped = _collective(op, [sends[1], sends[0], *sends[2:]], c.param)  # two ranks' data exchanged
        assert _wrong(op, swapped, n, size) > 0
    else:
        left_out = _collective(op, [sends[0] * 0, *sends[1:]], c.param)  # one rank's data not summed
        assert _wrong(op, left_out, n, size) == sum(len(r) for r in right)
    missing = [r.copy() for r in right]
    missing[3][-1] = 0  # one element not written
    assert _wrong(op, missing, n, size) == 1


def test_the_data_check_values_are_exact_in_float32() -> None:
    everyone = tuple(range(256))
    biggest = max(int(element_values(i, everyone)) for i in range(0, 10_000_000, 9973))
    assert biggest < 2**24  # every sum a float32 holds exactly
    assert element_values(7, (3,)) == (7 * 2654435761 + 3 * 40503) % 65521 + 1
    where = np.arange(0, 3_000_000, 7, dtype=np.int64)
    for ranks in ((0,), (2, 5), tuple(range(8)), tuple(range(72))):  # the closed form the GPUs use agrees
        assert np.array_equal(summed_values(np, where, ranks), element_values(where, ranks))


def test_the_values_made_in_place_are_the_same_numbers() -> None:
    where = np.arange(5_000_000, 5_000_000 + 3 * 65521, 3, dtype=np.int64)  # every residue, far positions
    out, scratch = np.full(len(where), -1.0, dtype=np.float32), np.empty_like(where)
    for ranks in ((0,), (1,), (2, 5), tuple(range(8)), tuple(range(256))):
        made = values_into(where.copy(), ranks, out, scratch)
        assert made is out and made.dtype == np.float32
        assert np.array_equal(made, element_values(where, ranks).astype(np.float32))


def test_all_reduce_counts_whole_floats_once() -> None:
    # nccl-tests: S = count x sizeof(float), whatever the rank count
    assert all_reduce_bytes(1 << 20, 8) == 1 << 20
    assert all_reduce_bytes(1027, 2) == 1024


# nvbandwidth v0.8's test keys (createTestcases) that this probe implements, and nccl-tests' collectives
NVBANDWIDTH = {
    "host_to_device_memcpy_ce", "device_to_host_memcpy_ce", "host_to_device_bidirectional_memcpy_ce",
    "device_to_host_bidirectional_memcpy_ce", "device_to_device_memcpy_read_ce", "device_to_device_memcpy_write_ce",
    "device_to_device_bidirectional_memcpy_read_ce", "device_to_device_bidirectional_memcpy_write_ce",
    "all_to_host_memcpy_ce", "all_to_host_bidirectional_memcpy_ce", "host_to_all_memcpy_ce",
    "host_to_all_bidirectional_memcpy_ce", "host_to_device_memcpy_sm", "device_to_host_memcpy_sm",
    "device_to_device_memcpy_read_sm", "device_to_device_memcpy_write_sm",
    "device_to_device_bidirectional_memcpy_read_sm", "device_to_device_bidirectional_memcpy_write_sm",
    "all_to_host_memcpy_sm", "host_to_all_memcpy_sm", "host_device_latency_sm", "device_to_device_latency_sm",
    "device_local_copy", "all_to_one_write_ce", "all_to_one_read_ce", "one_to_all_write_ce", "one_to_all_read_ce",
    "all_to_one_write_sm", "all_to_one_read_sm", "one_to_all_write_sm", "one_to_all_read_sm",
    "host_to_device_bidirectional_memcpy_sm", "device_to_host_bidirectional_memcpy_sm",
    "all_to_host_bidirectional_memcpy_sm", "host_to_all_bidirectional_memcpy_sm",
}
NCCL_TESTS = {"all_reduce", "all_gather", "reduce_scatter", "alltoall"}


def test_specs_are_named_as_their_reference_tools() -> None:
    names = {s.name for s in CUDA_SPECS}
    assert names == NVBANDWIDTH | NCCL_TESTS | {"gdr_write_bw"}
    assert {s.name for s in CPU_SPECS} == {"host_memcpy", "host_bidirectional_memcpy"} | NCCL_TESTS
    for s in (*CUDA_SPECS, *CPU_SPECS):
        assert s.unit == ("seconds" if "latency" in s.name else "bytes_per_second")


def test_a_write_is_issued_by_the_source_and_a_read_by_the_destination() -> None:
    assert issuer(A, B, Initiator.SOURCE) == A
    assert issuer(A, B, Initiator.DESTINATION) == B
    # host memory has no stream: the GPU issues, whichever way the data goes
    assert issuer(H, A, Initiator.SOURCE) == A
    assert issuer(A, H, Initiator.DESTINATION) == A


def test_copy_legs_per_test() -> None:
    (h2d,) = legs("host_to_device_memcpy_ce", (H, A))
    assert (h2d.src, h2d.dst, h2d.issuer) == (H, A, A)
    (d2h,) = legs("device_to_host_memcpy_ce", (H, A))
    assert (d2h.src, d2h.dst, d2h.issuer) == (A, H, A)
    # read: the row GPU (A) pulls from the column (B) on its own stream
    (read,) = legs("device_to_device_memcpy_read_ce", (A, B))
    assert (read.src, read.dst, read.issuer) == (B, A, A)
    # write: the row GPU (A) pushes to the column on its own stream
    (write,) = legs("device_to_device_memcpy_write_ce", (A, B))
    assert (write.src, write.dst, write.issuer) == (A, B, A)
    r1, r2 = legs("device_to_device_bidirectional_memcpy_read_ce", (A, B))
    assert (r1.issuer, r2.issuer) == (A, B) and (r1.src, r2.src) == (B, A)
    w1, w2 = legs("device_to_device_bidirectional_memcpy_write_ce", (A, B))
    assert (w1.issuer, w2.issuer) == (A, B) and (w1.src, w2.src) == (A, B)
    (local,) = legs("device_local_copy", (A,))
    assert (local.src, local.dst, local.issuer) == (A, A, A)
    with pytest.raises(ProbeError):
        legs("all_reduce", (A, B))


def test_interfering_copies_are_nvbandwidths() -> None:
    # host <-> GPU bidirectional: the timed copy, and twice its size the other way on the same GPU, untimed
    timed, back = legs("host_to_device_bidirectional_memcpy_ce", (H, A))
    assert (timed.src, timed.dst, timed.scale, timed.timed) == (H, A, 1, True)
    assert (back.src, back.dst, back.issuer, back.scale, back.timed) == (A, H, A, 2, False)
    # all to host: GPU A timed into its node; every other GPU copies twice the size into its own node
    mine, b, c = legs("all_to_host_memcpy_ce", (H, A), (H, B, H1, C))
    assert (mine.src, mine.dst, mine.timed) == (A, H, True)
    assert [(x.src, x.dst, x.scale, x.timed) for x in (b, c)] == [(B, H, 2, False), (C, H1, 2, False)]
    both = legs("host_to_all_bidirectional_memcpy_ce", (H, A), (H1, C))
    assert [(x.src.id, x.dst.id, x.scale) for x in both] == [
        ("numa0", A.id, 1), (A.id, "numa0", 2), ("numa1", C.id, 2), (C.id, "numa1", 2)]
    # SM variants: the same copies, as kernels on the issuing GPU
    (read,) = legs("device_to_device_memcpy_read_sm", (A, B))
    assert (read.engine, read.src, read.issuer) == ("sm", B, A)
    assert peer_pairs(legs("device_to_device_bidirectional_memcpy_write_ce", (B, A))) == ((0, 1),)
    assert peer_pairs(legs("host_to_device_memcpy_ce", (H, A))) == ()


def test_sm_copy_bytes_are_nvbandwidths() -> None:
    # from 64 MiB up: a whole number of 16-byte words per thread of SMs x 512 threads
    assert sm_copy_bytes(512 << 20, 132) == (512 * 2**20 // 16 // (132 * 512)) * 132 * 512 * 16
    assert sm_copy_bytes(64 << 20, 132) == 62 * 67584 * 16  # 4194304 words // 67584 threads = 62
    assert sm_copy_bytes(4 << 20, 132) == 4 << 20  # below: every whole word
    assert sm_copy_bytes(1000, 132) == 992


def test_leg_directions_match_the_spec_channels() -> None:
    for spec in CUDA_SPECS:
        if spec.kind.value != "copy" or spec.name == "device_local_copy":
            continue
        if spec.name.startswith(("all_to_one", "one_to_all")):  # every copy counts in the one total
            (direction,) = spec.channels
            assert {"all->a" if leg.dst == A else "a->all" for leg in legs(spec.name, (A,), (B, C))} == {direction}
            continue
        targets = (H, A) if "host" in spec.name else (A, B)
        timed = [leg for leg in legs(spec.name, targets) if leg.timed]
        for leg, direction in zip(timed, spec.channels, strict=True):
            a, b = targets
            if leg.engine == "sm-split":  # both ways at once: one figure, one channel for both directions
                assert direction == "a<->b"
                continue
            assert direction == ("a->b" if (leg.src, leg.dst) == (a, b) else "b->a")


def test_pointer_chase_chain_is_nvbandwidths() -> None:
    words = chain_words(0x1000, 2 << 20, 128)
    assert len(words) == 262144
    assert words[0] == 0x1000 + 16 * 8
    assert words[-1] == 0x1000 + 15 * 8  # wraps
    assert chain_next(262143, 262144, 16) == 15
    # 16384 distinct nodes on the cycle from word 0: one per 128-byte line
    seen, i = set(), 0
    while i not in seen:
        seen.add(i)
        i = chain_next(i, 262144, 16)
    assert len(seen) == 16384
    assert chain_end(16384, 262144, 16) == 0
    assert chain_end(3, 262144, 16) == 48
    assert per_launch(1_000_000, 132) == 7575
    with pytest.raises(ProbeError):
        chain_words(0, 4, 128)


def test_kernels_compile_with_nvcc(tmp_path: Path) -> None:
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)
    if nvcc is None:
        pytest.skip("nvcc is not installed: the embedded CUDA kernels were NOT compile-checked")
    src = tmp_path / "kernels.cu"
    src.write_text(KERNELS)
    done = subprocess.run([nvcc, "-ptx", str(src), "-o", str(tmp_path / "k.ptx")], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    ptx = (tmp_path / "k.ptx").read_text()
    for name in KERNEL_NAMES:
        assert f".entry {name}" in ptx
