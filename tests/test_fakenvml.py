"""The test NVML behaves like real NVML where callers depend on it, seen through the unmodified pynvml."""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pynvml
import pytest
import yaml

from agent.discovery import discover
from agent.discovery.access import DiscoveryContext, FsRoot, NvmlDriverNotLoaded, NvmlError, open_nvml
from agent.discovery.access._nvml_port import NvmlPort
from tests.fakenvml import ENV_PROFILE, MACHINES, FakeNode, ProfileError, load_machine, materialize, read_calls
from tests.fakenvml.fixtures import MakeMachine
from tests.reference_data import TOPO as REFERENCE_TOPO
from topology import parse_cpulist, parse_cpumask

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def session(fake_machine: MakeMachine) -> Iterator[Any]:
    """``session(profile, overrides)``: NVML initialised on the profile; shut down after the test."""
    ports: list[NvmlPort] = []

    def start(profile: str, overrides: dict[str, Any] | None = None) -> FakeNode:
        node = fake_machine(profile, overrides)
        ports.append(open_nvml(str(node.nvml_library)))
        return node

    yield start
    for port in ports:
        port.close()


def _code(fn: Any, *args: Any) -> int:
    with pytest.raises(pynvml.NVMLError) as info:
        fn(*args)
    return int(info.value.value)


def test_identity_as_nvml_formats_it(session: Any) -> None:
    session("hgx-h100")
    assert pynvml.nvmlDeviceGetCount() == 8
    h = pynvml.nvmlDeviceGetHandleByIndex(4)
    pci = pynvml.nvmlDeviceGetPciInfo(h)
    assert (pci.busId, pci.busIdLegacy) == ("00000000:9A:00.0", "0000:9A:00.0")
    assert (pci.domain, pci.bus, pci.device) == (0, 0x9A, 0)
    assert pci.pciDeviceId == 0x233010DE
    assert pynvml.nvmlDeviceGetName(h) == "NVIDIA H100 80GB HBM3"
    assert pynvml.nvmlDeviceGetMemoryInfo(h).total == 81559 * 2**20
    assert pynvml.nvmlDeviceGetUUID(h).startswith("GPU-")
    assert pynvml.nvmlSystemGetDriverVersion() == "570.124.06"
    assert pynvml.nvmlSystemGetCudaDriverVersion() == 12080
    words = pynvml.nvmlDeviceGetCpuAffinity(h, 4)
    assert [i * 64 + b for i, w in enumerate(words) for b in range(64) if w >> b & 1] == \
        list(parse_cpulist("48-95,144-191"))


def _fabric_call(version: int) -> tuple[int, bytes]:
    """Calls nvmlDeviceGetGpuFabricInfoV on GPU 0 with a 64-byte buffer of 0xAB carrying ``version``."""
    buf = (ctypes.c_ubyte * 64)(*([0xAB] * 64))
    ctypes.memmove(buf, ctypes.byref(ctypes.c_uint(version)), 4)
    fn = ctypes.CDLL("libnvidia-ml.so.1", mode=os.RTLD_NOLOAD).nvmlDeviceGetGpuFabricInfoV  # the session's NVML
    rc = fn(pynvml.nvmlDeviceGetHandleByIndex(0), ctypes.byref(buf))
    return int(rc), bytes(buf)


@pytest.mark.parametrize(("version", "size"), [(0x02000024, 36), (0x03000028, 40)])
def test_fabric_struct_versions_write_exactly_their_size(session: Any, version: int, size: int) -> None:
    session("gb200-tray")
    rc, raw = _fabric_call(version)
    assert rc == 0
    assert raw[size:] == b"\xab" * (64 - size)  # nothing written past the caller's struct
    assert int.from_bytes(raw[0:4], "little") == version
    assert raw[4:20] == bytes.fromhex("3f6c2a1e8d4b4c2f9a570e1b2c3d4e5f")
    assert int.from_bytes(raw[24:28], "little") == 1  # cliqueId
    assert raw[28] == 3  # state COMPLETED


def test_fabric_unknown_struct_version_is_a_version_mismatch(session: Any) -> None:
    session("gb200-tray")
    rc, raw = _fabric_call(0x01000020)
    assert rc == 25
    assert raw[4:] == b"\xab" * 60


def test_fabric_through_pynvml_on_hopper(session: Any) -> None:
    session("hgx-h100")
    info = pynvml.c_nvmlGpuFabricInfoV_t()  # pynvml 13.x: the v2 struct
    pynvml.nvmlDeviceGetGpuFabricInfoV(pynvml.nvmlDeviceGetHandleByIndex(0), ctypes.byref(info))
    assert (info.version, info.state, bytes(info.clusterUuid)) == (0x02000024, 3, bytes(16))


def test_fabric_not_supported_before_hopper(session: Any) -> None:
    session("dgx-a100")
    info = pynvml.c_nvmlGpuFabricInfo_v3_t()
    assert _code(pynvml.nvmlDeviceGetGpuFabricInfoV, pynvml.nvmlDeviceGetHandleByIndex(0), ctypes.byref(info)) == 3


def test_links_end_with_invalid_argument(session: Any) -> None:
    session("hgx-h100")
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert [pynvml.nvmlDeviceGetNvLinkState(h, link) for link in range(18)] == [1] * 18
    assert _code(pynvml.nvmlDeviceGetNvLinkState, h, 18) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert pynvml.nvmlDeviceGetNvLinkVersion(h, 0) == pynvml.NVML_NVLINK_VERSION_4_0 == 6
    assert pynvml.nvmlDeviceGetNvLinkRemoteDeviceType(h, 0) == pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH
    assert pynvml.nvmlDeviceGetNvLinkRemotePciInfo(h, 8).busId == "00000000:05:00.0"
    fields = pynvml.nvmlDeviceGetFieldValues(h, [91, 147])
    assert [(f.nvmlReturn, f.value.uiVal) for f in fields] == [(0, 18), (0, 18)]


def test_gpu_without_nvlink_says_not_supported(session: Any) -> None:
    session("rtx4090-8x")
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert _code(pynvml.nvmlDeviceGetNvLinkState, h, 0) == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert [f.nvmlReturn for f in pynvml.nvmlDeviceGetFieldValues(h, [91, 147])] == [3, 3]
    assert _code(pynvml.nvmlDeviceGetMigMode, h) == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert pynvml.nvmlDeviceGetP2PStatus(h, pynvml.nvmlDeviceGetHandleByIndex(1), 0) == \
        pynvml.NVML_P2P_STATUS_GPU_NOT_SUPPORTED


def test_nvswitch_behind_the_sentinel_on_gb200(session: Any) -> None:
    session("gb200-tray")
    h = pynvml.nvmlDeviceGetHandleByIndex(2)
    remote = pynvml.nvmlDeviceGetNvLinkRemotePciInfo(h, 17)
    assert (remote.busId, remote.domain, remote.bus) == ("FFFFFFFF:FF:FF.0", 0xFFFFFFFF, 0xFF)
    assert pynvml.nvmlDeviceGetNvLinkRemoteDeviceType(h, 17) == pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH
    assert pynvml.nvmlDeviceGetNvLinkVersion(h, 17) == pynvml.NVML_NVLINK_VERSION_5_0 == 7
    assert pynvml.nvmlDeviceGetNumaNodeId(h) == 18
    assert list(pynvml.nvmlDeviceGetMemoryAffinity(h, 1, 0)) == [sum(1 << n for n in parse_cpulist("1,19-25,27-33"))]


@pytest.mark.parametrize(("profile", "version"), [("dgx1-v100", 2), ("dgx-a100", 4), ("a6000-8x-nvlink-pairs", 4)])
def test_nvlink_version_is_the_nvml_enum(session: Any, profile: str, version: int) -> None:
    session(profile)
    assert pynvml.nvmlDeviceGetNvLinkVersion(pynvml.nvmlDeviceGetHandleByIndex(0), 0) == version


def test_numa_node_id_not_supported_on_x86(session: Any) -> None:
    session("hgx-h100")
    assert _code(pynvml.nvmlDeviceGetNumaNodeId, pynvml.nvmlDeviceGetHandleByIndex(0)) == 3


def test_numa_node_id_is_the_gpu_memory_node_on_grace(session: Any) -> None:
    session("gh200")
    assert pynvml.nvmlDeviceGetNumaNodeId(pynvml.nvmlDeviceGetHandleByIndex(0)) == 1


@pytest.mark.parametrize(("profile", "a", "b", "level"), [
    ("hgx-h100", 0, 1, pynvml.NVML_TOPOLOGY_NODE), ("hgx-h100", 0, 4, pynvml.NVML_TOPOLOGY_SYSTEM),
    ("a30-4x-nvlink-pairs", 2, 3, pynvml.NVML_TOPOLOGY_MULTIPLE), ("rtx5090-2x", 0, 1, pynvml.NVML_TOPOLOGY_HOSTBRIDGE),
    ("dgx1-v100", 0, 1, pynvml.NVML_TOPOLOGY_SINGLE), ("rtx4090-8x", 0, 1, pynvml.NVML_TOPOLOGY_SYSTEM),
])
def test_common_ancestor_levels(session: Any, profile: str, a: int, b: int, level: int) -> None:
    session(profile)
    ha, hb = pynvml.nvmlDeviceGetHandleByIndex(a), pynvml.nvmlDeviceGetHandleByIndex(b)
    assert pynvml.nvmlDeviceGetTopologyCommonAncestor(ha, hb) == level
    assert pynvml.nvmlDeviceGetTopologyCommonAncestor(hb, ha) == level


def test_p2p_status_per_caps_index_and_the_pynvml_tuple_bug(session: Any) -> None:
    session("dgx1-v100")
    h0, h1, h5 = (pynvml.nvmlDeviceGetHandleByIndex(i) for i in (0, 1, 5))
    assert [pynvml.nvmlDeviceGetP2PStatus(h0, h1, cap) for cap in range(5)] == [0, 0, 0, 0, 0]  # NVLink pair
    assert [pynvml.nvmlDeviceGetP2PStatus(h0, h5, cap) for cap in range(5)] == [3, 3, 5, 5, 0]  # across sockets
    with pytest.raises(ctypes.ArgumentError):  # NVML_P2P_CAPS_INDEX_READ is the tuple (0,)
        pynvml.nvmlDeviceGetP2PStatus(h0, h1, pynvml.NVML_P2P_CAPS_INDEX_READ)


def test_injected_errors_hit_the_named_call_gpu_and_link(session: Any) -> None:
    session("hgx-h100", {"inject": [
        {"call": "nvmlDeviceGetUUID", "gpu": 2, "error": "NO_PERMISSION"},
        {"call": "nvmlDeviceGetNvLinkState", "gpu": 1, "link": 3, "error": "UNKNOWN"},
        {"call": "nvmlDeviceGetName", "error": "NOT_SUPPORTED"},
    ]})
    h1, h2 = pynvml.nvmlDeviceGetHandleByIndex(1), pynvml.nvmlDeviceGetHandleByIndex(2)
    assert _code(pynvml.nvmlDeviceGetUUID, h2) == pynvml.NVML_ERROR_NO_PERMISSION
    assert pynvml.nvmlDeviceGetUUID(h1).startswith("GPU-")
    assert _code(pynvml.nvmlDeviceGetNvLinkState, h1, 3) == pynvml.NVML_ERROR_UNKNOWN
    assert pynvml.nvmlDeviceGetNvLinkState(h1, 2) == 1
    assert pynvml.nvmlDeviceGetNvLinkState(h2, 3) == 1
    assert {_code(pynvml.nvmlDeviceGetName, h) for h in (h1, h2)} == {pynvml.NVML_ERROR_NOT_SUPPORTED}


def test_a_lost_gpu_answers_gpu_is_lost_to_every_call_naming_it(session: Any) -> None:
    session("hgx-h100", {"inject": [{"lose": 3, "at": "nvmlDeviceGetName", "nth": 2}]})
    h3, h4 = pynvml.nvmlDeviceGetHandleByIndex(3), pynvml.nvmlDeviceGetHandleByIndex(4)
    assert pynvml.nvmlDeviceGetName(h3)  # the first call still answers
    assert _code(pynvml.nvmlDeviceGetName, h3) == pynvml.NVML_ERROR_GPU_IS_LOST
    assert _code(pynvml.nvmlDeviceGetUUID, h3) == pynvml.NVML_ERROR_GPU_IS_LOST
    assert _code(pynvml.nvmlDeviceGetP2PStatus, h4, h3, 0) == pynvml.NVML_ERROR_GPU_IS_LOST
    assert _code(pynvml.nvmlDeviceGetHandleByIndex, 3) == pynvml.NVML_ERROR_GPU_IS_LOST
    assert pynvml.nvmlDeviceGetName(h4) == "NVIDIA H100 80GB HBM3"


def test_mig_devices_in_their_slots(session: Any) -> None:
    doc = yaml.safe_load((MACHINES / "a30-4x-nvlink-pairs.yaml").read_text())
    doc["pci"][0]["children"][0]["gpu"] = {"mig": {"enabled": True, "max": 4, "instances": [
        {"gi": 1, "ci": 0, "profile": "2g.12gb", "memory_mib": 11968},
        {"gi": 2, "ci": 0, "profile": "2g.12gb", "memory_mib": 11968}]}}
    session("a30-4x-nvlink-pairs", {"pci": doc["pci"]})
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert pynvml.nvmlDeviceGetMigMode(h) == [1, 1]
    assert pynvml.nvmlDeviceGetMaxMigDeviceCount(h) == 4
    m = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(h, 1)
    assert (pynvml.nvmlDeviceGetGpuInstanceId(m), pynvml.nvmlDeviceGetComputeInstanceId(m)) == (2, 0)
    assert pynvml.nvmlDeviceGetName(m) == "NVIDIA A30 MIG 2g.12gb"
    assert _code(pynvml.nvmlDeviceGetMigDeviceHandleByIndex, h, 2) == pynvml.NVML_ERROR_NOT_FOUND
    assert _code(pynvml.nvmlDeviceGetMigDeviceHandleByIndex, h, 4) == pynvml.NVML_ERROR_INVALID_ARGUMENT


def test_handles_not_made_by_the_library_are_invalid(session: Any) -> None:
    session("rtx5090-2x")
    bogus = ctypes.cast(ctypes.create_string_buffer(64), pynvml.c_nvmlDevice_t)
    assert _code(pynvml.nvmlDeviceGetUUID, bogus) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert _code(pynvml.nvmlDeviceGetHandleByIndex, 2) == pynvml.NVML_ERROR_INVALID_ARGUMENT


def test_init_failures(fake_machine: MakeMachine, monkeypatch: pytest.MonkeyPatch) -> None:
    node = fake_machine("rtx5090-2x", {"inject": [{"call": "nvmlInitWithFlags", "error": "LIB_RM_VERSION_MISMATCH"}]})
    with pytest.raises(NvmlError) as info:
        open_nvml(str(node.nvml_library))
    assert info.value.code == pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH
    monkeypatch.delenv(ENV_PROFILE)
    with pytest.raises(NvmlDriverNotLoaded):  # no profile: as a machine without the kernel module
        open_nvml(str(node.nvml_library))
    assert _code(pynvml.nvmlDeviceGetCount) == pynvml.NVML_ERROR_UNINITIALIZED


def test_calls_are_counted_per_function_and_arguments(fake_machine: MakeMachine) -> None:
    node = fake_machine("hgx-h100")
    port = open_nvml(str(node.nvml_library))
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    pynvml.nvmlDeviceGetNvLinkState(h, 5)
    pynvml.nvmlDeviceGetNvLinkState(h, 5)
    pynvml.nvmlDeviceGetP2PStatus(h, pynvml.nvmlDeviceGetHandleByIndex(7), 2)
    port.close()
    calls = read_calls(node.calls_file)
    assert calls["nvmlDeviceGetNvLinkState(0,5)"] == 2
    assert calls["nvmlDeviceGetP2PStatus(0,7,2)"] == 1
    assert calls["nvmlInitWithFlags"] == calls["nvmlShutdown"] == 1


def test_call_counts_survive_the_table_growing(fake_machine: MakeMachine) -> None:
    """The count table starts small and doubles with the distinct calls (the library's memory follows what it
    counts): 8 x 8 x 6 P2P calls and 8 x 400 link calls, each twice, are all counted through the growth."""
    node = fake_machine("hgx-h100")
    port = open_nvml(str(node.nvml_library))
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(8)]

    def call(fn: Any, *args: Any) -> None:
        with contextlib.suppress(pynvml.NVMLError):  # a link past the count is refused, and still counted
            fn(*args)

    for _ in range(2):
        for a in handles:
            for link in range(400):
                call(pynvml.nvmlDeviceGetNvLinkState, a, link)
            for b in handles:
                for index in range(6):
                    call(pynvml.nvmlDeviceGetP2PStatus, a, b, index)
    port.close()
    calls = read_calls(node.calls_file)
    links = {f"nvmlDeviceGetNvLinkState({i},{link})" for i in range(8) for link in range(400)}
    p2p = {f"nvmlDeviceGetP2PStatus({i},{j},{index})" for i in range(8) for j in range(8) for index in range(6)}
    assert {k: calls.get(k) for k in links | p2p} == dict.fromkeys(links | p2p, 2)


# -- profiles and their sysfs trees -------------------------------------------------------------------


def test_sysfs_tree_is_laid_out_as_the_kernel_does(tmp_path: Path) -> None:
    node = materialize("hgx-h100", tmp_path)
    sys_dir = node.root / "sys"
    link = sys_dir / "bus/pci/devices/0000:18:00.0"
    assert os.readlink(link) == "../../../devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0"
    gpu = link.resolve()
    assert gpu.is_relative_to(node.root.resolve())
    attrs = {name: (gpu / name).read_text().strip() for name in
             ("vendor", "device", "class", "numa_node", "current_link_speed", "max_link_width", "local_cpulist")}
    assert attrs == {"vendor": "0x10de", "device": "0x2330", "class": "0x030200", "numa_node": "0",
                     "current_link_speed": "32.0 GT/s PCIe", "max_link_width": "16", "local_cpulist": "0-47,96-143"}
    assert parse_cpumask((gpu / "local_cpus").read_text()) == parse_cpulist("0-47,96-143")
    assert os.readlink(gpu / "driver").endswith("bus/pci/drivers/nvidia")
    port = sys_dir / "class/infiniband/mlx5_0/ports/1"
    assert [(port / f).read_text().strip() for f in ("rate", "state", "link_layer")] == \
        ["400 Gb/sec (4X NDR)", "4: ACTIVE", "InfiniBand"]
    assert (sys_dir / "class/infiniband/mlx5_0/device").resolve().name == "0000:19:00.0"
    assert (sys_dir / "class/net/ib0/device").resolve().name == "0000:19:00.0"
    assert (sys_dir / "devices/system/node/node1/distance").read_text().split() == ["21", "10"]


def test_acs_redirect_is_in_the_bridges_config_space(tmp_path: Path) -> None:
    doc = yaml.safe_load((MACHINES / "a30-4x-nvlink-pairs.yaml").read_text())
    doc["pci"][2]["acs"] = True
    node = materialize("a30-4x-nvlink-pairs", tmp_path, {"pci": doc["pci"]})
    snap = discover(DiscoveryContext(root=FsRoot(node.root)), ["pci"])
    bridges = {f.id: f.acs_enabled for f in snap.pci if f.is_bridge}
    assert {v for k, v in bridges.items() if k.startswith("0000:9")} == {True}  # the root complex that says so
    assert {v for k, v in bridges.items() if not k.startswith("0000:9")} == {None}  # 64 bytes: unprivileged read


@pytest.mark.parametrize("profile", sorted(p.stem for p in MACHINES.glob("*.yaml")))
def test_every_profile_loads_and_names_its_reference(profile: str) -> None:
    machine = load_machine(MACHINES / f"{profile}.yaml")
    assert machine.gpus
    assert (REFERENCE_TOPO / machine.raw["reference"]).is_file()


@pytest.mark.parametrize(("change", "message"), [
    ({"pci": [{"host_bridge": "0000:10", "children": [{"gpu": {}, "bus": 0x05}]}]}, "bus"),
    ({"pci": [{"host_bridge": "zz", "children": []}]}, "host_bridge"),
    ({"nvlink": {"version": "9.9", "links": 4}}, "nvlink.version"),
    ({"nvlink": {"version": "3.0", "links": 4, "pairs": [[0, 9, 1]]}}, "does not exist"),
    ({"inject": [{"call": "nvmlDeviceGetUUID", "error": "SOMETIMES"}]}, "return code"),
])
def test_bad_profiles_are_refused_with_the_reason(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        materialize("rtx5090-2x", tmp_path, change)


def test_runner_runs_any_command_against_a_profile_outside_the_repo(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.yaml"
    outside.write_text((MACHINES / "rtx5090-2x.yaml").read_text())
    script = ("import os, pathlib; r = pathlib.Path(os.environ['TOPOLINK_SYSFS_ROOT']); "
              "print(sorted(p.name for p in (r / 'sys/bus/pci/devices').iterdir())[-1], "
              "pathlib.Path(os.environ['TOPOLINK_NVML_LIBRARY']).name); raise SystemExit(7)")
    done = subprocess.run([sys.executable, "-m", "tests.fakenvml", "run", str(outside), "--", sys.executable, "-c",
                           script], cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 7, done.stderr
    assert done.stdout.split() == ["0000:21:00.0", "libnvidia-ml.so.1"]


# The command under the runner: says its pid and tree once its handlers are in place, writes each signal it
# gets, stops on TERM and INT (exit 100 + N), carries on after HUP; with an argument it exits with that code.
_CHILD = """
import os, signal, sys
def on(sig, frame):
    print("got", sig, flush=True)
    if sig != signal.SIGHUP:
        raise SystemExit(100 + sig)
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, on)
print(os.getpid(), os.environ["TOPOLINK_SYSFS_ROOT"], flush=True)
if len(sys.argv) > 1:
    raise SystemExit(int(sys.argv[1]))
while True:
    signal.pause()
"""


def _line(fd: int, timeout: float = 30) -> list[str]:
    """The next line the command writes, its words; bounded, so a runner that left its command behind (which
    keeps the pipe open) fails the test instead of hanging it."""
    deadline, line = time.monotonic() + timeout, b""
    while not line.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            pytest.fail(f"no line from the command within {timeout} s (got {line!r})")
        chunk = os.read(fd, 1)
        if not chunk:
            break
        line += chunk
    return line.decode().split()


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "SIGHUP", "exit"])
def test_runner_passes_signals_on_and_always_removes_its_tree(tmp_path: Path, how: str) -> None:
    """However the command ends (a signal to the runner, passed on; HUP passed on and survived, then TERM; the
    command's own exit), it is gone when the runner is, and so is the machine's temporary tree."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # the tree is made here, so the test can see it go
    argv = [sys.executable, "-m", "tests.fakenvml", "run", "rtx5090-2x", "--", sys.executable, "-c", _CHILD]
    runner = subprocess.Popen([*argv, *(["3"] if how == "exit" else [])], cwd=REPO, env=env,
                              stdout=subprocess.PIPE, bufsize=0)
    assert runner.stdout is not None
    fd = runner.stdout.fileno()
    pid, tree = _line(fd)
    try:
        assert Path(tree).is_dir() and any(p.name.startswith("topolink-machine-") for p in Path(tree).parents)
        sig = signal.SIGTERM
        if how != "exit":
            sig = getattr(signal, how)
            runner.send_signal(sig)
            assert _line(fd) == ["got", str(int(sig))]
            if how == "SIGHUP":
                runner.send_signal(signal.SIGTERM)
                assert _line(fd) == ["got", str(int(signal.SIGTERM))]
                sig = signal.SIGTERM
        code = runner.wait(timeout=60)
        assert code == (3 if how == "exit" else 100 + int(sig))
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid), 0)
        assert not any(tmp_path.glob("topolink-machine-*"))
    finally:
        with contextlib.suppress(ProcessLookupError):  # a command the runner left behind, on failure
            os.kill(int(pid), signal.SIGKILL)
        runner.kill()
        runner.wait()
