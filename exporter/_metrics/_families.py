"""Every metric family the agent exports, as data: name, type, help, labels and its series bound.

docs/reference.md's metric table is generated from this list (:func:`metrics_markdown`), and the collector
builds exactly these families. Series bounds use: G GPUs, N RDMA NICs, U NUMA nodes, S discovery
sources, L links with a theoretical rate, M measurements, T probe tests, F unknown facts, K sinks.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Family:
    name: str  # without the _total suffix of a counter (prometheus-client adds it)
    kind: str  # gauge | counter | info
    help: str
    labels: tuple[str, ...]
    bound: str  # series, in the symbols of the module docstring

    @property
    def exposed(self) -> str:
        return self.name + ("_total" if self.kind == "counter" else "_info" if self.kind == "info" else "")


_MEASURE = ("test", "method", "subjects", "direction", "backend", "profile", "source")

# Numeric codes for states: a state is a value, never a label value, so a series keeps its label set when the
# state changes (a label value would start a new series and leave the old one behind for five minutes).
SOURCE_STATUS = {"ok": 0, "absent": 1, "disabled": 2, "partial": 3, "failed": 4}  # 3 and above lose facts
GPUDIRECT = {"ready": 0, "degraded": 1, "not-ready": 2, "unknown": 3}
DEGRADED_KINDS = ("nvlink-down", "pcie-width", "pcie-slow")  # of a GPU; a NIC has pcie-width only


def _codes(codes: dict[str, int]) -> str:
    return ", ".join(f"{v} {k}" for k, v in codes.items())


_PATH = ("The PCIe path's class as NVML's topology level: 10 PIX, 20 PXB, 30 PHB, 40 NODE, 50 SYS; NaN when "
         "unknown.")

FAMILIES: tuple[Family, ...] = (
    Family("topolink_build", "info", "The agent's version.", ("version",), "1"),
    Family("topolink_snapshot", "info", "The served snapshot: node, structure hash (changes only with the "
           "hardware or its wiring) and schema.", ("node", "structure_hash", "schema"), "1"),
    Family("topolink_snapshot_complete", "gauge", "1 when every fact of the served snapshot was read by the "
           "latest discovery pass; 0 when some are carried from earlier passes or unknown.", (), "1"),
    Family("topolink_snapshot_timestamp_seconds", "gauge", "When the latest discovery pass ran (age: time() "
           "minus this).", (), "1"),
    Family("topolink_discovery_passes", "counter", "Discovery passes since the agent started.", (), "1"),
    Family("topolink_discovery_retry_seconds", "gauge", "Seconds to the next discovery pass: the interval, or "
           "sooner (1 s doubling up to it) while NVML does not answer.", (), "1"),
    Family("topolink_nvml_unavailable", "info", "Present while NVML does not answer although NVIDIA GPUs are on "
           "the PCI bus (the driver is not up): the NVML error. Meanwhile NVLink and GPU identity facts are "
           "unknown, nothing derived from them is published, and /readyz answers 503.", ("error",), "1"),
    Family("topolink_source_up", "gauge", "1 when the source read its subsystem or found it absent, 0 when it "
           "failed, was partial or is disabled.", ("source",), "S"),
    Family("topolink_source_status", "gauge", f"The source's outcome in the latest pass: {_codes(SOURCE_STATUS)} "
           "(3 and above: facts it reads are carried from earlier passes or unknown).", ("source",), "S"),
    Family("topolink_source_duration_seconds", "gauge", "How long the source took in the latest pass.",
           ("source",), "S"),
    Family("topolink_source_problems", "gauge", "Problems the source reported in the latest pass.",
           ("source",), "S"),
    Family("topolink_fact_unknown_since_timestamp_seconds", "gauge", "A fact the latest pass could not read "
           "(served from an earlier pass where one knew it), and since when it has been unknown.",
           ("subject", "aspect"), "F"),
    Family("topolink_gpu", "info", "One per GPU: NVML index, UUID, name, PCIe root complex and NUMA node.",
           ("gpu", "index", "uuid", "name", "pcie_root", "numa_node"), "G"),
    Family("topolink_gpu_nvlink_island", "gauge", "The GPU's NVLink island (its index, largest island first; "
           "-1 for a GPU in none); no sample while any GPU's NVLinks are unread.", ("gpu",), "G"),
    Family("topolink_gpu_pcie_link_generation", "gauge", "PCIe generation of the GPU's link, current and "
           "maximum (NVML's where it answers, else sysfs).", ("gpu", "state"), "2G"),
    Family("topolink_gpu_pcie_link_width", "gauge", "PCIe lanes of the GPU's link, current and maximum (NVML's "
           "where it answers, else sysfs).", ("gpu", "state"), "2G"),
    Family("topolink_gpu_nvlinks", "gauge", "NVLinks up on the GPU (to GPUs and NVSwitches).", ("gpu",), "G"),
    Family("topolink_gpu_pair_nvlinks", "gauge", "NVLinks between two GPUs, through NVSwitches counted as "
           "topo -m does (its class is NV<this> when above 0); each unordered pair once.", ("gpu_a", "gpu_b"),
           "G(G-1)/2"),
    Family("topolink_gpu_pair_pcie_path", "gauge", f"{_PATH} Between two GPUs, each unordered pair once.",
           ("gpu_a", "gpu_b"), "G(G-1)/2"),
    Family("topolink_nvlink_island_gpus", "gauge", "GPUs in each NVLink island.", ("island",), "G"),
    Family("topolink_numa_distance", "gauge", "The kernel's NUMA distance (SLIT) between two nodes.",
           ("node_a", "node_b"), "U^2"),
    Family("topolink_gpu_nic_pcie_path", "gauge", f"{_PATH} Between a GPU and an RDMA NIC.", ("gpu", "nic"),
           "GN"),
    Family("topolink_gpu_nic_nearest", "gauge", "1 for the RDMA NICs at the GPU's closest PCIe class, else 0.",
           ("gpu", "nic"), "GN"),
    Family("topolink_gpu_nic_gpudirect_ready", "gauge", "1 when GPUDirect RDMA between the GPU and the NIC is "
           "ready (peer memory or dma-buf, and a path NCCL uses by default), else 0.", ("gpu", "nic"), "GN"),
    Family("topolink_gpu_nic_gpudirect_verdict", "gauge", f"GPUDirect RDMA between the GPU and the NIC: "
           f"{_codes(GPUDIRECT)} (degraded: works through the CPU's root complex or with ACS redirecting).",
           ("gpu", "nic"), "GN"),
    Family("topolink_link_bandwidth_bytes_per_second", "gauge", "Theoretical rate of a link per direction.",
           ("link", "kind"), "L"),
    Family("topolink_bandwidth_bytes_per_second", "gauge", "Bandwidth per tested set of endpoints and "
           "direction: source=measured (timed on this node) and source=theoretical (what the links allow); "
           "profile: the probe profile that took the figure (quick, full), empty when it names none.",
           _MEASURE, "2M"),
    Family("topolink_latency_seconds", "gauge", "Latency per tested set of endpoints (pointer chase).",
           _MEASURE, "M"),
    Family("topolink_bandwidth_measured_ratio", "gauge", "Measured bandwidth over theoretical, for the figures of "
           "the full profile (profile: the probe profile that took it; empty for a figure that names none); a "
           "quick-profile figure is not compared: it reads below full on fast links.",
           _MEASURE[:-1], "M"),
    Family("topolink_probe_runs", "counter", "Probe runs since the agent started, by test and status (ok, "
           "waived, failed, busy, busy_unknown: NVML could not say whether a GPU was in use, so it was not "
           "probed); every test the agent may run is here from the start.", ("test", "status"), "5T"),
    Family("topolink_probe_last_success_timestamp_seconds", "gauge", "When the test last produced a number.",
           ("test",), "T"),
    Family("topolink_probe_busy_seconds", "counter", "Wall time spent running probes.", (), "1"),
    Family("topolink_probe_duty_cycle_ratio", "gauge", "Probe wall time over the agent's wall time.", (), "1"),
    Family("topolink_degraded", "gauge", "1 when the device runs below what it is built for, else 0; no sample "
           "while the fact a kind rests on has not been read: kind nvlink-down (fewer NVLinks up than its peers "
           "of the same model), pcie-width (fewer lanes than its maximum), pcie-slow (a lower PCIe generation "
           "that host copies confirm under load). "
           "The same rule as the degraded node label and device taint.", ("subject", "kind"), "3G+N"),
    Family("topolink_sink_publish", "counter", "Objects or keys each sink wrote, left unchanged or failed to "
           "write.", ("sink", "result"), "3K"),
    Family("topolink_sink_watch_restarts", "counter", "Times a sink's watch of what it wrote was opened again: "
           "reason closed (the server ended it at its timeout), expired (410 Gone: listed again), error "
           "(failed or silent: backed off, then resumed) or refused (403 or a status the agent does not know: "
           "backed off, /readyz says the fix); counted when the request is sent.", ("sink", "reason"), "4K"),
    Family("topolink_state_file_errors", "counter", "State files found corrupt or foreign at start, and "
           "ignored.", ("file",), "2"),
    Family("topolink_state_writable", "gauge", "1 when the state directory took the latest write, 0 when it "
           "refused it (probe results and the last snapshot are then lost at restart; /readyz says why).", (),
           "1"),
    Family("topolink_metrics_pair_series_withheld", "gauge", "Series of the pair families (GPU pairs, GPU x RDMA "
           "NIC pairs, NUMA distances: their bounds) left out of this scrape because they are more than topolink "
           "serve --metrics-pair-series-limit allows; 0 when every pair family is in it.", (), "1"),
    Family("topolink_http_connections_closed", "counter", "HTTP connections the agent cut off, by reason: "
           "header_timeout (no whole request head in time), evicted (the oldest waiting one, to admit a new "
           "one at the connection cap), refused (at the cap with every connection busy), header_too_large.",
           ("reason",), "4"),
)

BY_NAME = {f.name: f for f in FAMILIES}
# The families with a series per pair of devices: built once per snapshot, published whole or not at all (within
# the pair series limit).
PAIRS = frozenset({"topolink_gpu_pair_nvlinks", "topolink_gpu_pair_pcie_path", "topolink_numa_distance",
                   "topolink_gpu_nic_pcie_path", "topolink_gpu_nic_nearest", "topolink_gpu_nic_gpudirect_ready",
                   "topolink_gpu_nic_gpudirect_verdict"})


def series_bound(*, gpus: int, nics: int, numa: int, sources: int, links: int, measurements: int, tests: int,
                 unknown: int, sinks: int) -> int:
    """The most series the families can hold for a node of this shape (the sum of the bounds)."""
    g, n = gpus, nics
    values = {"1": 1, "2": 2, "4": 4, "S": sources, "F": unknown, "G": g, "2G": 2 * g,
              "G(G-1)/2": g * (g - 1) // 2, "U^2": numa * numa, "GN": g * n, "L": links, "2M": 2 * measurements,
              "M": measurements, "5T": 5 * tests, "T": tests, "3G+N": 3 * g + n, "3K": 3 * sinks, "4K": 4 * sinks}
    return sum(values[f.bound] for f in FAMILIES)


def metrics_markdown() -> str:
    """The reference's table of metric families (docs/reference.md)."""
    lines = ["| metric | type | labels | series | meaning |", "|---|---|---|---|---|"]
    for f in FAMILIES:
        labels = ", ".join(f"`{x}`" for x in f.labels) or "-"
        kind = "gauge" if f.kind == "info" else f.kind
        lines.append(f"| `{f.exposed}` | {kind} | {labels} | {f.bound} | {f.help} |")
    return "\n".join(lines) + "\n"
