"""The agent container's memory limit is derived from what a probe pass needs: the agent's own footprint
plus the largest peak of the probe child (which runs inside the container), with a margin. The figures
are measured by the benchmarks, not here (no timed or measured test): ``benchmarks/serve.py`` for the
agent, ``benchmarks/probes.py --memory`` for the probe child per profile and backend."""

from __future__ import annotations

from pathlib import Path

import yaml

from probes import FULL, QUICK

REPO = Path(__file__).resolve().parents[1]
AGENT_MB = 74  # benchmarks/serve.py: RSS after 10,000 scrapes
CHILD_PEAK_MB = {  # benchmarks/probes.py --memory: PSS of the probe child's session
    "cpu quick": 390,
    "cpu full": 822,
    "cuda quick, 1 simulated GPU (host memory)": 108,
    "cuda quick, 8 simulated GPUs (host memory)": 151,
}
MARGIN = 1.15
TARGETS_MB = {"cpu quick": 512, "cpu full": 1000, "cuda quick, 8 simulated GPUs (host memory)": 512}


def _mb(quantity: str) -> float:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    for suffix, scale in units.items():
        if quantity.endswith(suffix):
            return float(quantity[: -len(suffix)]) * scale / 1e6
    return float(quantity) / 1e6


def test_the_agents_memory_limit_covers_the_largest_probe_pass_with_margin() -> None:
    docs = list(yaml.safe_load_all((REPO / "daemonset" / "base" / "daemonset.yaml").read_text()))
    ds = next(d for d in docs if d and d.get("kind") == "DaemonSet")
    agent = next(c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "agent")
    limit = _mb(agent["resources"]["limits"]["memory"])
    need = (AGENT_MB + max(CHILD_PEAK_MB.values())) * MARGIN
    assert need <= limit < 2 * need, (need, limit)  # enough, and not a guess far above it
    for what, target in TARGETS_MB.items():
        assert CHILD_PEAK_MB[what] < target, what


def test_the_profiles_stay_what_the_figures_were_measured_with() -> None:
    """A change of the sizes the peaks depend on must come with a new measurement (and new figures here)."""
    assert (FULL.host_copy_bytes, max(FULL.host_collective_sizes)) == (128 << 20, 16 << 20)
    assert (QUICK.copy_bytes, max(QUICK.host_collective_sizes), max(QUICK.collective_sizes)) == (
        64 << 20, 4 << 20, 256 << 20)
