"""GB200/GB300 rack identity and fabric health through the test NVML under the real nvidia-ml-py: the platform info
(chassis serial, slot, tray, host, module) becomes the ``rack`` and ``tray`` labels, the fabric health mask's
degraded bandwidth a degradation reason (labels, the node condition and its taint), and a platform info that does
not read stays unknown: the rack label keeps what the Node has, the condition says ``Unknown``."""

from __future__ import annotations

from pathlib import Path

import pynvml
import pytest

import topology as t
from exporter._core._fabric_health import fabric_reasons
from exporter.kube import LabelConfig, desired_labels, verdict
from exporter.kube._desired._node_condition import desired_taints
from tests.kube_support import discover_profile
from topology import replace

P = "gpu.topology"


@pytest.fixture(scope="module")
def trays(tmp_path_factory: pytest.TempPathFactory) -> dict[str, t.Snapshot]:
    root = tmp_path_factory.mktemp("trays")
    found = {v: discover_profile(f"gb200-tray-{v}", Path(root) / v) for v in ("rack", "degraded-bw")}
    # the same tray whose nvmlDeviceGetPlatformInfo answers UNKNOWN on every GPU
    found["no-platform"] = discover_profile("gb200-tray-rack", Path(root) / "no-platform", {
        "inject": [{"call": "nvmlDeviceGetPlatformInfo", "error": "UNKNOWN"}]})
    return found


def mask(**fields: int) -> int:
    return sum(value << getattr(pynvml, f"NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_{name.upper()}")
               for name, value in fields.items())


def test_the_health_mask_reads_as_nvidia_ml_py_names_its_fields() -> None:
    nv = pynvml
    healthy = mask(degraded_bw=nv.NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_FALSE,
                   route_unhealthy=nv.NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_FALSE,
                   incorrect_configuration=nv.NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NONE)
    assert fabric_reasons(healthy) == () and fabric_reasons(0) == ()
    assert fabric_reasons(mask(degraded_bw=nv.NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE)) == ("fabric-degraded-bw",)
    assert fabric_reasons(mask(route_unhealthy=nv.NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_TRUE)) == (
        "fabric-route-unhealthy",)
    wrong = mask(incorrect_configuration=nv.NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_INCORRECT_CHASSIS_SN)
    assert fabric_reasons(wrong) == ("fabric-config",)


def test_a_healthy_tray_names_its_rack_and_tray(trays: dict[str, t.Snapshot]) -> None:
    snap = trays["rack"]
    assert {g.platform for g in snap.gpus} >= {g.platform for g in snap.gpus[:1]}
    assert [g.platform.module_id for g in snap.gpus if g.platform] == [1, 2, 3, 4]
    labels = desired_labels(snap, LabelConfig(), {})
    assert labels[f"{P}/rack"] == "1821324000123" and labels[f"{P}/tray"] == "7"
    assert labels[f"{P}/degraded"] == "false", labels[f"{P}/degraded-reason"]
    v = verdict(snap)
    assert v is not None and v.status == "False"


def test_a_degraded_bandwidth_mask_degrades_the_node(trays: dict[str, t.Snapshot]) -> None:
    snap = trays["degraded-bw"]
    labels = desired_labels(snap, LabelConfig(), {})
    assert labels[f"{P}/degraded"] == "true" and labels[f"{P}/degraded-reason"] == "fabric-degraded-bw"
    v = verdict(snap)
    assert v is not None and (v.status, v.reason, v.taint_value) == ("True", "FabricDegradedBandwidth",
                                                                      "fabric-degraded-bw")
    assert desired_taints([], v, P) == [{"key": f"{P}/degraded", "value": "fabric-degraded-bw", "effect": "NoSchedule"}]


def test_an_unreadable_platform_info_stays_unknown(trays: dict[str, t.Snapshot]) -> None:
    snap = trays["no-platform"]
    assert not snap.complete and all(g.platform is None for g in snap.gpus)
    before = {f"{P}/rack": "1821324000123", f"{P}/tray": "7"}
    labels = desired_labels(snap, LabelConfig(), before)
    assert labels[f"{P}/rack"] == "1821324000123" and labels[f"{P}/tray"] == "7"  # kept, never removed
    assert f"{P}/rack" not in desired_labels(snap, LabelConfig(), {})
    v = verdict(snap)
    assert v is not None and v.status == "Unknown" and desired_taints([], v, P) is None


def test_the_fabric_health_is_state_not_structure(trays: dict[str, t.Snapshot]) -> None:
    """A health mask that changes leaves the structure hash as it was (a fault does not look like new wiring); the
    rack does not."""
    snap = trays["rack"]

    def each_gpu(**fabric: object) -> t.Snapshot:
        return replace(snap, gpus=tuple(replace(g, fabric=replace(
            g.fabric, **fabric)) if g.fabric else g for g in snap.gpus))

    assert t.structure_hash(each_gpu(health_mask=425)) == t.structure_hash(snap)
    assert t.structure_hash(each_gpu(clique_id=2)) != t.structure_hash(snap)
