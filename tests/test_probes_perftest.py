"""GPUDirect RDMA through perftest, with a fake ``ib_write_bw`` and the fake CUDA runtime: what the command
lines ask for (the GPU's memory written, from host memory, warmed up where perftest can), what is waived
and why, the client started only once the server listens, and the path (loopback or a second NIC) said."""

from __future__ import annotations

from pathlib import Path

import pytest

import probes
import topology as t
from probes import Status
from probes.cuda._perftest import Ends, command, listening, perftest_from_help, validation_problem
from tests.fakecuda_support import TINY, configure
from tests.probe_snapshots import G0, G1, G2, G3, NIC, four_gpu_box
from topology import replace

BOX_GPUS = ",".join((G0, G1, G2, G3))


def one_gpu(snap: t.Snapshot) -> t.Snapshot:
    """Only GPU0 of the box, under the same PCIe switch as mlx5_0: one perftest run per test."""
    return replace(snap, gpus=snap.gpus[:1], links=())


def gdr(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, snap: t.Snapshot | None = None,
        **env: str) -> tuple[probes.ProbeOutcome, list[dict[str, object]]]:
    fake = configure(monkeypatch, tmp_path, gpus=4, FAKECUDA_BUS=BOX_GPUS, **env)
    report = probes.run_probes(one_gpu(snap or four_gpu_box()), profile_name=TINY, backend="cuda",
                               tests=["gdr_write_bw"])
    (outcome,) = report.outcomes
    assert outcome.subjects == (G0, NIC)
    return outcome, fake.perftest()


def argv(log: list[dict[str, object]], role: str) -> list[str]:
    runs = [c for c in log if c.get("role") == role and "argv" in c]
    return [str(a) for a in runs[-1]["argv"]]  # type: ignore[attr-defined]


@pytest.mark.slow
def test_the_nic_writes_into_gpu_memory_from_host_memory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    out, log = gdr(monkeypatch, tmp_path, FAKE_PERFTEST_LISTEN_DELAY="1.5")
    assert out.status is Status.OK, out.reason
    server, client = argv(log, "server"), argv(log, "client")
    assert f"--use_cuda_bus_id={G0}" in server and "--perform_warm_up" in server
    assert not any(a.startswith("--use_cuda") for a in client) and "--perform_warm_up" in client
    assert client[client.index("-d") + 1] == server[server.index("-d") + 1] == "mlx5_0"
    listened = next(c["t"] for c in log if c.get("event") == "listening")
    started = next(c["t"] for c in log if c.get("role") == "client")
    assert started >= listened  # the client waited for the port (the server took 1.5 s), no fixed sleep
    (m,) = out.measurements
    cond = dict(m.conditions)
    assert cond["path"].startswith("loopback: mlx5_0 reads the host buffer and writes the GPU's memory")
    assert cond["writer"].startswith("the client, from host memory")
    assert cond["warm_up"] == "--perform_warm_up" and cond["registration"] == "peer memory"
    assert m.value == pytest.approx(175e9 / 8) and m.source is t.Source.SIMULATED
    assert "--data_validation" in server and "--data_validation" in client  # perftest checks what arrived
    assert cond["data_check"].startswith("perftest --data_validation on both ends, every sample")


@pytest.mark.slow
def test_a_validation_failure_fails_the_test(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    out, _ = gdr(monkeypatch, tmp_path, FAKE_PERFTEST_CORRUPT="1")
    assert out.status is Status.FAILED and not out.measurements
    assert out.reason.startswith("data check failed at ")
    assert "sample 1: VALIDATION: FAILED - 1 error(s)" in out.reason


@pytest.mark.slow
def test_dmabuf_without_the_option_is_waived(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    dmabuf_only = four_gpu_box(gdr=t.GdrFacts(peermem_loaded=False, dmabuf_supported=True))
    out, log = gdr(monkeypatch, tmp_path, dmabuf_only, FAKE_PERFTEST_FLAGS="cuda,bus_id,warm_up")
    assert out.status is Status.WAIVED
    assert "has no --use_cuda_dmabuf, and dma-buf is how this node registers GPU memory" in out.reason
    assert not [c for c in log if "argv" in c]  # nothing was started


@pytest.mark.slow
def test_an_older_perftest_selects_the_gpu_by_ordinal_and_does_not_warm_up(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    out, log = gdr(monkeypatch, tmp_path, FAKE_PERFTEST_FLAGS="cuda")
    assert out.status is Status.OK, out.reason
    server = argv(log, "server")
    assert "--use_cuda=0" in server and "--perform_warm_up" not in server
    cond = dict(out.measurements[0].conditions)
    assert cond["gpu_selected_by"].startswith("--use_cuda=<CUDA ordinal>")
    assert cond["warm_up"] == "none (this perftest has no --perform_warm_up)"
    assert "--data_validation" not in server and cond["data_check"] == "none (this perftest has no --data_validation)"


@pytest.mark.slow
def test_a_second_nic_writes_and_an_unreachable_one_falls_back_to_loopback(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    box = four_gpu_box()
    second = replace(box.nics[0], id="0000:87:00.0", name="mlx5_1", pci_bus_id="0000:87:00.0")
    snap = replace(box, nics=(*box.nics, second))
    out, log = gdr(monkeypatch, tmp_path / "a", snap)
    assert out.status is Status.OK, out.reason
    assert argv(log, "client")[argv(log, "client").index("-d") + 1] == "mlx5_1"
    assert dict(out.measurements[0].conditions)["path"] == "mlx5_1 -> mlx5_0 over the fabric"
    out, log = gdr(monkeypatch, tmp_path / "b", snap, FAKE_PERFTEST_UNREACHABLE="mlx5_1")
    assert out.status is Status.OK, out.reason
    devices = [c["argv"][c["argv"].index("-d") + 1] for c in log if c.get("role") == "client"]  # type: ignore[index,union-attr]
    assert devices == ["mlx5_1"] + ["mlx5_0"] * TINY.samples  # tried once; the other samples in loopback
    path = dict(out.measurements[0].conditions)["path"]
    assert path.startswith("loopback") and "the path from mlx5_1 did not work" in path


@pytest.mark.slow
def test_a_path_that_changes_mid_test_fails_it_and_loopback_is_never_held_to_the_port_rate(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    box = four_gpu_box()
    second = replace(box.nics[0], id="0000:87:00.0", name="mlx5_1", pci_bus_id="0000:87:00.0")
    snap = replace(box, nics=(*box.nics, second))
    out, log = gdr(monkeypatch, tmp_path / "a", snap, FAKE_PERFTEST_FABRIC_RUNS="1")
    assert out.status is Status.FAILED and not out.measurements
    assert "the path mlx5_1 -> mlx5_0 failed after 1 sample(s) on it" in out.reason
    assert "one result would mix the fabric and loopback" in out.reason
    devices = [c["argv"][c["argv"].index("-d") + 1] for c in log if c.get("role") == "client"]  # type: ignore[index,union-attr]
    assert devices == ["mlx5_1", "mlx5_1"]  # no loopback sample after a fabric one
    monkeypatch.delenv("FAKE_PERFTEST_FABRIC_RUNS")
    fabric, _ = gdr(monkeypatch, tmp_path / "b", snap)
    loopback, _ = gdr(monkeypatch, tmp_path / "c")
    capability = t.LinkCapability(snap)
    (over_wire,), (looped,) = fabric.measurements, loopback.measurements
    assert capability.of(over_wire) == 200e9 / 8  # the port's rate: the data crossed the wire
    assert capability.of(looped) is None  # both ends on one NIC: never compared with the port


def test_command_lines_and_help_detection() -> None:
    help_text = ("  --use_cuda=<cuda device id> Use CUDA\n  --use_cuda_bus_id=<cuda full BUS id> Use CUDA\n"
                 "  --use_cuda_dmabuf Use CUDA DMA-BUF\n  --perform_warm_up Perform some iterations\n"
                 "      --data_validation  Enable data validation (tx_depth must be same on both sides)\n")
    found = perftest_from_help("/usr/bin/ib_write_bw", help_text, "Version: 6.22")
    assert (found.cuda, found.bus_id, found.dmabuf, found.warm_up, found.validation, found.version) == (
        True, True, True, True, True, "6.22")
    ends = Ends(nic="mlx5_0", gpu_bus_id=G0, gpu_ordinal=0, writer_nic="mlx5_0", dmabuf=True)
    server = command(found, ends, size=65536, iters=5000, port=18515, server=True)
    client = command(found, ends, size=65536, iters=5000, port=18515, server=False)
    assert f"--use_cuda_bus_id={G0}" in server and "--use_cuda_dmabuf" in server and "--report_gbits" in server
    assert client[-1] == "127.0.0.1" and not [a for a in client if a.startswith("--use_cuda")]
    old = perftest_from_help("/usr/bin/ib_write_bw", "  --use_cuda=<cuda device id> Use CUDA\n")
    assert (old.bus_id, old.dmabuf, old.warm_up, old.validation) == (False, False, False, False)
    assert "--use_cuda=0" in command(old, ends, size=1, iters=1, port=1, server=True)


def test_validation_verdicts_are_read_from_perftests_lines() -> None:
    assert validation_problem("...\nVALIDATION: PASSED - 3 chunks, 196608 bytes\n") is None
    failed = "VALIDATION: FAILED - 2 error(s), first at QP 0, Chunk 1, Offset 8 (expected 0x02, got 0x00)"
    assert validation_problem(f"VALIDATION: PASSED - 1 chunks, 1 bytes\n{failed}\n") == failed
    assert validation_problem("VALIDATION: WARNING - no data validated\n") == "VALIDATION: WARNING - no data validated"
    assert validation_problem(" #bytes #iterations\n") == "perftest --data_validation printed no verdict"


def test_listening_reads_the_kernels_socket_table(tmp_path: Path) -> None:
    table = tmp_path / "tcp"
    table.write_text(
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
        "   0: 00000000:4857 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1\n"
        "   1: 0100007F:4858 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 2\n")
    assert listening(0x4857, (str(table),))
    assert not listening(0x4858, (str(table),))  # established, not listening
    assert not listening(1, (str(tmp_path / "missing"),))
