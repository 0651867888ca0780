"""The reader of real ``nvidia-smi topo -m`` outputs copes with what pasted outputs look like."""

from __future__ import annotations

import pytest

from tests import topo_reference

REFERENCES = sorted(p.name for p in topo_reference.REFERENCE_TOPO.glob("*.txt"))


@pytest.mark.parametrize("name", REFERENCES)
def test_every_reference_reads_as_a_square_matrix(name: str) -> None:
    ref = topo_reference.load(name)
    assert ref.gpus and ref.devices[: len(ref.gpus)] == ref.gpus
    assert len(ref.cells) == len(ref.devices) ** 2
    assert all(ref.cell(d, d) == "X" for d in ref.devices)
    assert all(ref.cell(a, b) == ref.cell(b, a) for a in ref.devices for b in ref.devices)
    assert set(ref.cpu_affinity) == set(ref.gpus)


def test_tabs_and_empty_cells() -> None:
    ref = topo_reference.load("rtx4090-8x-pcie-2numa-go-gpuallocator-17.txt")
    assert ref.nics == ("NIC0", "NIC1") and ref.nic_legend == {}
    assert (ref.cell("GPU6", "NIC1"), ref.cell("NIC0", "NIC1")) == ("PHB", "PIX")
    assert (ref.cpu_affinity["GPU4"], ref.numa_affinity["GPU4"], ref.gpu_numa_id["GPU4"]) == \
        ("56-111,168-223", "1", "N/A")


def test_old_format_names_nics_in_the_header() -> None:
    ref = topo_reference.load("dgx1-v100-dlperf.txt")
    assert ref.columns == ("CPU Affinity",) and ref.nic_legend == {"mlx5_0": "mlx5_0"}
    assert (ref.cell("GPU0", "GPU3"), ref.cell("mlx5_0", "GPU2")) == ("NV2", "PIX")


def test_only_the_first_table_is_read_and_the_legend_names_nics() -> None:
    ref = topo_reference.load("gb200-4gpu-8nic.txt")
    assert len(ref.nics) == 8  # source A; the partial source B below it is ignored
    assert ref.nic_legend["NIC7"] == "mlx5_7"
    assert (ref.numa_affinity["GPU0"], ref.gpu_numa_id["GPU3"]) == ("0,3-9,11-17", "26")


def test_text_before_the_table_with_a_lone_gpu0_line() -> None:
    ref = topo_reference.load("gh200-aerial.txt")
    assert ref.devices == ("GPU0", "NIC0", "NIC1", "NIC2", "NIC3")
    assert ref.gpu_numa_id == {"GPU0": "1"}


def test_a_row_that_does_not_read_is_an_error() -> None:
    text = "        GPU0    GPU1\nGPU0     X      NV4\nGPU1    NV4     ??\n"
    with pytest.raises(ValueError, match="row GPU1"):
        topo_reference.parse(text)
