"""Names the profiles use, mapped to the numbers sysfs and NVML report."""

from __future__ import annotations

# NVML nvmlNvlinkVersion_t for each NVLink version string.
NVLINK_VERSION_ENUM = {"1.0": 1, "2.0": 2, "2.2": 3, "3.0": 4, "3.1": 5, "4.0": 6, "5.0": 7, "6.0": 8}

# NVML nvmlDeviceArchitecture_t.
ARCHITECTURE = {"kepler": 2, "maxwell": 3, "pascal": 4, "volta": 5, "turing": 6, "ampere": 7, "ada": 8,
                "hopper": 9, "blackwell": 10}

# nvmlGpuFabricState_t
FABRIC_STATE = {"not-supported": 0, "not-started": 1, "in-progress": 2, "completed": 3}

# nvmlGpuP2PStatus_t, with the short names nvidia-smi topo -p2p prints as aliases.
P2P_STATUS = {"OK": 0, "CHIPSET_NOT_SUPPORTED": 1, "CNS": 1, "GPU_NOT_SUPPORTED": 2, "GNS": 2,
              "IOH_TOPOLOGY_NOT_SUPPORTED": 3, "TNS": 3, "DISABLED_BY_REGKEY": 4, "DR": 4,
              "NOT_SUPPORTED": 5, "NS": 5, "UNKNOWN": 6, "U": 6}

# nvmlGpuP2PCapsIndex_t
P2P_CAPS = {"read": 0, "write": 1, "nvlink": 2, "atomics": 3, "pci": 4}

# nvmlReturn_t codes a profile may inject.
NVML_RETURN = {"SUCCESS": 0, "UNINITIALIZED": 1, "INVALID_ARGUMENT": 2, "NOT_SUPPORTED": 3, "NO_PERMISSION": 4,
               "NOT_FOUND": 6, "INSUFFICIENT_SIZE": 7, "DRIVER_NOT_LOADED": 9, "TIMEOUT": 10, "GPU_IS_LOST": 15,
               "LIB_RM_VERSION_MISMATCH": 18, "ARGUMENT_VERSION_MISMATCH": 25, "UNKNOWN": 999}

# nvmlIntNvLinkDeviceType_t
REMOTE_GPU, REMOTE_IBMNPU, REMOTE_SWITCH, REMOTE_UNKNOWN = 0x00, 0x01, 0x02, 0xFF
SENTINEL_BUS_ID = "FFFFFFFF:FF:FF.0"

# nvmlGpuTopologyLevel_t
TOPOLOGY_LEVEL = {"X": 0, "PIX": 10, "PXB": 20, "PHB": 30, "NODE": 40, "SYS": 50}

FIELD_NVLINK_LINK_COUNT = 91
FIELD_NVSWITCH_CONNECTED_LINK_COUNT = 147

# sysfs link speed strings per PCIe generation.
LINK_SPEED = {1: "2.5 GT/s PCIe", 2: "5.0 GT/s PCIe", 3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe",
              5: "32.0 GT/s PCIe", 6: "64.0 GT/s PCIe"}

# Root complex flavours: (host bridge function or None, root port vendor:device, root port function number,
# first root port device number).
PLATFORMS: dict[str, tuple[tuple[int, int] | None, tuple[int, int], int, int]] = {
    "intel": ((0x8086, 0x09A2), (0x8086, 0x352A), 0, 1),
    "amd": ((0x1022, 0x1480), (0x1022, 0x1483), 1, 1),
    "grace": (None, (0x10DE, 0x22B2), 0, 0),
    "qemu": (None, (0x1B36, 0x000C), 0, 0),  # pxb-pcie expander buses with QEMU root ports
}

CLASS_HOST_BRIDGE = 0x060000
CLASS_PCI_BRIDGE = 0x060400
CLASS_NVSWITCH = 0x068000
