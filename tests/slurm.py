"""A real slurmctld for tests of the ``topology.yaml`` topolink writes: the file loaded as a cluster's controller
loads it, and ``scontrol show topology`` read back.

The binaries are found in the folder ``$TOPOLINK_SLURM_BIN`` names (``sbin/slurmctld``, ``bin/scontrol``,
``lib/slurm`` with the plugins; ``.ci/run`` unpacks one there), else ``slurmctld`` and ``scontrol`` on PATH with
the plugins beside them. Without them the tests skip, saying what to install. The controller runs in the
foreground on loopback ports of its own, ``AuthType=auth/none`` (no munge), with a throwaway ``slurm.conf``
defining every node the file names and any others asked for; no slurmd, so nodes stay down and no job runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.apiserver import free_port

ENV = "TOPOLINK_SLURM_BIN"
SKIP = (f"Slurm tier skipped: it needs slurmctld and scontrol (Slurm 24.05 or later, built --with-yaml): set {ENV} "
        "to a folder with sbin/slurmctld, bin/scontrol and lib/slurm (the plugins), or put them on PATH "
        "(apt install slurmctld slurm-client)")


@dataclass(frozen=True, slots=True)
class Slurm:
    slurmctld: Path
    scontrol: Path
    plugins: Path


def find_slurm() -> Slurm | None:
    root = os.environ.get(ENV)
    if root:
        base = Path(root)
        found = Slurm(base / "sbin" / "slurmctld", base / "bin" / "scontrol", base / "lib" / "slurm")
        return found if found.slurmctld.is_file() and found.scontrol.is_file() else None
    ctld, ctl = shutil.which("slurmctld"), shutil.which("scontrol")
    if ctld is None or ctl is None:
        return None
    base = Path(ctld).resolve().parent.parent
    for plugins in (base / "lib" / "slurm", base / "lib64" / "slurm", base / "lib" / "x86_64-linux-gnu" / "slurm-wlm",
                    base / "lib" / "x86_64-linux-gnu" / "slurm"):
        if (plugins / "topology_block.so").exists():
            return Slurm(Path(ctld), Path(ctl), plugins)
    return None


def topology_nodes(entries: list[dict[str, Any]]) -> list[str]:
    """Every node a topology.yaml names (comma-separated lists, as topolink writes them)."""
    out: set[str] = set()
    for entry in entries:
        for item in (entry.get("block") or {}).get("blocks", []) + (entry.get("tree") or {}).get("switches", []):
            out.update(n for n in str(item.get("nodes") or "").split(",") if n)
    return sorted(out)


@dataclass(frozen=True, slots=True)
class Loaded:
    ok: bool
    topology: dict[str, str]  # topology name -> `scontrol show topology NAME`
    log: str


def load_topology(slurm: Slurm, text: str, workdir: Path, *, extra: tuple[str, ...] = ()) -> Loaded:
    """Start slurmctld with ``text`` as its topology.yaml; ``scontrol show topology`` of each topology in it."""
    entries = yaml.safe_load(text) or []
    nodes = sorted({*topology_nodes(entries), *extra}) or ["none0"]
    for sub in ("state", "spool"):
        (workdir / sub).mkdir(parents=True, exist_ok=True)
    port = free_port()
    slurmd = free_port()
    conf = workdir / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=topotest", "SlurmctldHost=localhost", f"SlurmctldPort={port}", f"SlurmdPort={slurmd}",
        "AuthType=auth/none", "CredType=cred/none", f"SlurmUser={_user()}", f"StateSaveLocation={workdir}/state",
        f"SlurmdSpoolDir={workdir}/spool", f"SlurmctldPidFile={workdir}/ctld.pid",
        f"SlurmctldLogFile={workdir}/ctld.log", "SelectType=select/cons_tres", "ReturnToService=2",
        f"PluginDir={slurm.plugins}", "NodeName=DEFAULT CPUs=4 State=UNKNOWN", f"NodeName={','.join(nodes)}",
        "PartitionName=all Nodes=ALL Default=YES", ""]))
    (workdir / "topology.yaml").write_text(text)
    env = {**os.environ, "SLURM_CONF": str(conf),
           "LD_LIBRARY_PATH": ":".join(p for p in (str(slurm.plugins), os.environ.get("LD_LIBRARY_PATH")) if p)}
    ctld = subprocess.Popen([str(slurm.slurmctld), "-D", "-i", "-f", str(conf)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        up = False
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and ctld.poll() is None:
            ping = subprocess.run([str(slurm.scontrol), "ping"], env=env, capture_output=True, text=True, timeout=10,
                                  check=False)
            if "UP" in ping.stdout:
                up = True
                break
            time.sleep(0.1)  # polling the controller's answer, not a fixed wait
        shown = {}
        if up:
            for entry in entries:
                got = subprocess.run([str(slurm.scontrol), "show", "topology", str(entry["topology"])], env=env,
                                     capture_output=True, text=True, timeout=10, check=False)
                shown[str(entry["topology"])] = got.stdout + got.stderr
    finally:
        ctld.terminate()
        try:
            ctld.wait(timeout=15)
        except subprocess.TimeoutExpired:
            ctld.kill()
            ctld.wait()
    log = (workdir / "ctld.log").read_text(errors="replace") if (workdir / "ctld.log").exists() else ""
    return Loaded(ok=up, topology=shown, log=log)


def _user() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name
