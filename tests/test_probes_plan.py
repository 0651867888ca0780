"""The plan is a pure function of snapshot, profile and capabilities: endpoints, sizes, budgets, and a
stated reason for everything that will not run."""

from __future__ import annotations

import copy

import pytest

import topology as t
from probes import CUDA_SPECS, FULL, QUICK, SELFTEST, Capabilities, Device, ProbeError, Profile, make_plan
from probes.core import SM_TESTS, GiB, MiB, with_collective_timing
from tests.probe_snapshots import G0, G1, G2, G3, NIC, four_gpu_box
from topology import replace

ALL_PEERS = tuple((a, b) for a in (G0, G1, G2, G3) for b in (G0, G1, G2, G3) if a != b)


def cuda_caps(*, peers: tuple[tuple[str, str], ...] = ALL_PEERS, busy: dict[str, str] | None = None,
              unavailable: tuple[tuple[str, str], ...] = (), visible: tuple[str, ...] = (G0, G1, G2, G3),
              error: str = "") -> Capabilities:
    devices = tuple(Device(id=g, ordinal=i, busy=(busy or {}).get(g, "")) for i, g in enumerate(visible))
    return Capabilities(backend="cuda", devices=devices, peer_pairs=peers, unavailable=unavailable, error=error)


def keys(plan: object, test: str) -> list[tuple[str, ...]]:
    return [i.subjects for i in plan.items if i.test == test]  # type: ignore[attr-defined]


def reasons(plan: object, test: str) -> dict[tuple[str, ...], str]:
    return {w.subjects: w.reason for w in plan.waived if w.test == test}  # type: ignore[attr-defined]


def test_pure_and_deterministic() -> None:
    snap, caps = four_gpu_box(), cuda_caps()
    before = copy.deepcopy(snap)
    assert make_plan(snap, FULL, caps) == make_plan(snap, FULL, caps)
    assert snap == before


def test_host_copies_from_every_numa_node_in_full_and_the_local_one_in_quick() -> None:
    snap, caps = four_gpu_box(), cuda_caps()
    full = keys(make_plan(snap, FULL, caps), "host_to_device_memcpy_ce")
    assert len(full) == 8 and ("numa1", G0) in full  # misaligned pairs are measured too
    quick = keys(make_plan(snap, QUICK, caps), "host_to_device_memcpy_ce")
    assert quick == [("numa0", G0), ("numa0", G1), ("numa1", G2), ("numa1", G3)]
    item = make_plan(snap, FULL, caps).items[0]
    host, gpu = item.targets
    assert (host.kind, host.index, host.cpus) == ("host", 0, (0, 1, 2, 3))
    assert (gpu.kind, gpu.index) == ("gpu", 0)


def test_full_profile_is_nvbandwidths_defaults() -> None:
    item = next(i for i in make_plan(four_gpu_box(), FULL, cuda_caps()).items
                if i.test == "device_to_device_memcpy_write_ce")
    assert (item.sizes, item.warmup, item.iters, item.samples) == ((512 * MiB,), 4, 16, 3)
    lat = next(i for i in make_plan(four_gpu_box(), FULL, cuda_caps()).items if i.test == "host_device_latency_sm")
    assert (lat.sizes, lat.iters) == ((2 * MiB,), 1_000_000)


def test_pairs_without_peer_access_are_na_never_staged() -> None:
    peers = ((G0, G1), (G1, G0))
    plan = make_plan(four_gpu_box(), SELFTEST, cuda_caps(peers=peers))
    assert sorted(keys(plan, "device_to_device_memcpy_read_ce")) == [(G0, G1), (G1, G0)]
    why = reasons(plan, "device_to_device_memcpy_write_ce")
    assert len(why) == 10
    assert "N/A" in why[G0, G2] and "staged" in why[G0, G2]


def test_busy_gpus_are_refused_unless_forced() -> None:
    caps = cuda_caps(busy={G1: "2 compute processes running"})
    plan = make_plan(four_gpu_box(), QUICK, caps)
    assert all(G1 not in i.subjects for i in plan.items)
    assert "busy (2 compute processes running)" in reasons(plan, "device_local_copy")[(G1,)]
    forced = make_plan(four_gpu_box(), QUICK, caps, force=True)
    assert (G1,) in keys(forced, "device_local_copy")


def test_gpu_unseen_by_cuda_is_waived() -> None:
    plan = make_plan(four_gpu_box(), QUICK, cuda_caps(visible=(G0, G1, G2)))
    assert "not visible" in reasons(plan, "device_local_copy")[(G3,)]


def test_collectives_over_all_gpus_and_each_island_with_memory_bounded_sizes() -> None:
    plan = make_plan(four_gpu_box(), FULL, cuda_caps())
    groups = {i.subjects: i for i in plan.items if i.test == "all_reduce"}
    assert set(groups) == {(G0, G1, G2, G3), (G0, G1), (G2, G3)}
    assert max(groups[G0, G1].sizes) == 8 * GiB
    assert max(groups[G0, G1, G2, G3].sizes) == 4 * GiB  # GPU3 has 16 GiB: send + recv within half
    assert groups[G0, G1].warmup == 1 and groups[G0, G1].iters == 20


@pytest.mark.parametrize(("profile", "timing"), [(FULL, None), (FULL, "stream"), (QUICK, None), (SELFTEST, None)])
def test_each_collective_item_names_its_mode_and_the_nccl_tests_command_it_follows(
        profile: Profile, timing: str | None) -> None:
    """nccl-tests times one window per cell, 20 iterations after one warm-up, -G 0 by default; every profile
    times -G 1 (graph launches) unless the setting asks for the stream, and each item says which command line
    (its own sizes and GPU count) it follows."""
    plan = make_plan(four_gpu_box(), with_collective_timing(profile, timing), cuda_caps())
    groups = {i.subjects: i for i in plan.items if i.test == "all_reduce"}
    whole, pair = groups[G0, G1, G2, G3], groups[G0, G1]
    graphs = "0" if timing == "stream" else "1"
    options = dict(pair.options)
    assert options["timing"] == (timing or "graph") and pair.samples == 1 and pair.profile == profile.name
    top = {"full": "8G", "quick": "256M", "selftest": "1M"}[profile.name]
    step = {"full": 2, "quick": 16, "selftest": 2}[profile.name]
    iters = profile.collective_iters
    assert options["nccl_tests"] == f"all_reduce_perf -b 1M -e {top} -f {step} -g 2 -n {iters} -w 1 -G {graphs}"
    if profile is FULL:  # GPU3's 16 GiB stop the four-GPU sweep at 4 GiB: the command says so
        assert dict(whole.options)["nccl_tests"] == f"all_reduce_perf -b 1M -e 4G -f 2 -g 4 -n 20 -w 1 -G {graphs}"
    with pytest.raises(ProbeError, match="unknown collective timing 'events'"):
        with_collective_timing(profile, "events")


def test_backend_wide_and_per_test_unavailability() -> None:
    plan = make_plan(four_gpu_box(), QUICK, cuda_caps(error="CuPy is not installed"))
    assert not plan.items
    assert {w.reason for w in plan.waived} == {"CuPy is not installed"}
    plan = make_plan(four_gpu_box(), QUICK, cuda_caps(unavailable=(("all_reduce", "no NCCL"),)))
    assert set(reasons(plan, "all_reduce").values()) == {"no NCCL"}
    assert keys(plan, "device_local_copy")


def test_gdr_waived_with_the_readiness_verdict() -> None:
    missing = (("gdr_write_bw", "perftest's ib_write_bw is not installed"),)
    plan = make_plan(four_gpu_box(), SELFTEST, cuda_caps(unavailable=missing))
    why = reasons(plan, "gdr_write_bw")[G0, NIC]
    assert why.startswith("perftest's ib_write_bw is not installed; readiness ready")
    assert "PCIe path PIX" in why and "nvidia_peermem" in why
    no_peer = four_gpu_box(gdr=t.GdrFacts(peermem_loaded=False, dmabuf_supported=False))
    why = reasons(make_plan(no_peer, SELFTEST, cuda_caps()), "gdr_write_bw")[G0, NIC]
    assert why.startswith("readiness not-ready") and "neither nvidia_peermem nor dma-buf" in why
    ready = make_plan(four_gpu_box(gdr=t.GdrFacts(peermem_loaded=False, dmabuf_supported=True)), SELFTEST,
                      cuda_caps())
    gdr = {i.subjects: i for i in ready.items if i.test == "gdr_write_bw"}
    assert set(gdr) == {(G0, NIC), (G1, NIC), (G2, NIC), (G3, NIC)}  # far GPUs too: degraded, still measured
    item = gdr[G0, NIC]
    assert dict(item.options) == {"registration": "dmabuf"}  # one NIC: the writer is on it too (loopback)
    assert item.targets[1].name == "mlx5_0"
    no_nic = replace(four_gpu_box(), nics=())
    assert reasons(make_plan(no_nic, SELFTEST, cuda_caps()), "gdr_write_bw") == {(): "no RDMA NIC in the snapshot"}


def test_gdr_writer_uses_a_second_nic_on_the_same_link_layer() -> None:
    box = four_gpu_box()
    second = replace(box.nics[0], id="0000:87:00.0", name="mlx5_1", pci_bus_id="0000:87:00.0",
                                 numa_node=1)
    ethernet = replace(second, id="0000:88:00.0", name="mlx5_2", pci_bus_id="0000:88:00.0",
                                   ports=(t.NicPort(number=1, state="ACTIVE", rate_gbps=200.0, link_layer="Ethernet"),))
    snap = replace(box, nics=(*box.nics, ethernet, second))
    item = next(i for i in make_plan(snap, SELFTEST, cuda_caps()).items
                if i.test == "gdr_write_bw" and i.subjects == (G0, NIC))
    assert dict(item.options) == {"registration": "peermem", "writer_nic": "mlx5_1"}


def test_single_gpu_waives_the_pair_tests() -> None:
    one = replace(four_gpu_box(), gpus=four_gpu_box().gpus[:1], links=())
    plan = make_plan(one, SELFTEST, cuda_caps())
    assert reasons(plan, "device_to_device_memcpy_read_ce") == {(): "needs two GPUs"}
    assert reasons(plan, "all_reduce") == {(): "needs two GPUs"}


def test_cpu_plan_and_unknown_tests() -> None:
    caps = Capabilities(backend="cpu")
    plan = make_plan(four_gpu_box(), QUICK, caps)
    assert {i.test for i in plan.items} == {"host_memcpy", "all_reduce"}
    assert keys(plan, "host_memcpy") == [("numa0", "numa0"), ("numa0", "numa1"), ("numa1", "numa0"),
                                         ("numa1", "numa1")]
    assert keys(plan, "all_reduce") == [("numa0", "numa1")]
    bare = make_plan(t.Snapshot(node="x"), QUICK, caps)
    assert keys(bare, "host_memcpy") == [("host", "host")]  # no NUMA facts: unbound, and said so
    with pytest.raises(ProbeError, match="unknown test"):
        make_plan(four_gpu_box(), QUICK, caps, tests=["host_to_device_memcpy_ce"])


def test_quick_runs_its_bounded_selection_unless_tests_are_named() -> None:
    plan = make_plan(four_gpu_box(), QUICK, cuda_caps())
    assert {i.test for i in plan.items} | {w.test for w in plan.waived} == set(QUICK.tests or ()) - {"host_memcpy"}
    named = make_plan(four_gpu_box(), QUICK, cuda_caps(), tests=["gdr_write_bw", "alltoall"])
    assert {i.test for i in named.items} == {"gdr_write_bw", "alltoall"}
    full = make_plan(four_gpu_box(), FULL, cuda_caps())
    assert {i.test for i in full.items} == {s.name for s in CUDA_SPECS}


def test_all_to_host_times_one_gpu_while_every_other_copies_to_its_own_node() -> None:
    plan = make_plan(four_gpu_box(), FULL, cuda_caps())
    item = next(i for i in plan.items if i.test == "all_to_host_memcpy_ce" and i.subjects == ("numa0", G0))
    assert [(b.id, b.kind) for b in item.background] == [("numa0", "host"), (G1, "gpu"), ("numa1", "host"),
                                                         (G2, "gpu"), ("numa1", "host"), (G3, "gpu")]
    assert item.memory_budget_bytes == 16 * GiB + 2 * 512 * MiB * 7  # the timed copy and 3 of twice its size
    busy = make_plan(four_gpu_box(), FULL, cuda_caps(busy={G3: "1 compute process running"}))
    why = reasons(busy, "all_to_host_memcpy_ce")[("numa0", G0)]
    assert "GPU 0000:86:00.0 is busy" in why  # an interfering GPU must be idle too
    one = replace(four_gpu_box(), gpus=four_gpu_box().gpus[:1], links=())
    assert reasons(make_plan(one, FULL, cuda_caps()), "host_to_all_memcpy_ce") == {
        (): "needs two GPUs (with one, it is the plain host copy)"}


def test_kernel_tests_waived_when_nvrtc_cannot_build_them() -> None:
    why = "NVRTC could not compile the probe kernels: libnvrtc.so not found"
    caps = cuda_caps(unavailable=tuple((name, why) for name in (*SM_TESTS, "host_device_latency_sm")))
    plan = make_plan(four_gpu_box(), FULL, caps)
    assert set(reasons(plan, "device_to_device_memcpy_write_sm").values()) == {why}
    assert keys(plan, "device_to_device_memcpy_write_ce")


def test_budgets_grow_with_the_work() -> None:
    quick = make_plan(four_gpu_box(), QUICK, cuda_caps()).items[0]
    full = make_plan(four_gpu_box(), FULL, cuda_caps()).items[0]
    assert full.wall_budget_s > quick.wall_budget_s > 0
    assert full.memory_budget_bytes >= 2 * 512 * MiB
