"""What ``topolink serve``'s resident size is made of, by module group: the closing note's table (issue 52).

    .venv/bin/python benchmarks/serve_memory.py [--scrapes 3000]

Runs serve as ``benchmarks/serve.py`` does (the hgx-h100 profile with the test NVML, a full synthetic probe set
in its state directory, probes off) under a meta path finder that wraps each module's loader: the resident size
(``/proc/self/statm``) is read around each module's creation and execution, less what the imports nested in it
grew, so each module is charged what its own first import added, in the order serve imports it (what two groups
share is charged to the one that loads it first). Scrapes /metrics ``--scrapes`` times, stops serve and sums the
charges per group below. What they leave of serve's size is its data, the allocators' free room and its
threads' stacks. The wrapper itself costs a little (a few hundred KiB): the sizes are read without it.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._serve_load import Scraper, rss_mib  # noqa: E402
from benchmarks.serve import free_port, wait_up  # noqa: E402
from tests.serve_machines import discover_profile, full_measurements  # noqa: E402
from topology import to_dict  # noqa: E402

# First match wins: a module's group is the first whose prefix it has (the name itself or name + ".").
GROUPS = (
    ("OpenSSL (ssl for asyncio and uvicorn, hashlib)", ("_ssl", "ssl", "_hashlib", "hashlib", "_blake2")),
    ("pynvml and ctypes (discovery's NVML access)", ("pynvml", "ctypes", "_ctypes")),
    ("discovery: sources, access, assembly and witness rules", ("agent.discovery",)),
    ("the agent's loops, state directory, logging; probes' catalogue", ("agent.serve", "probes")),
    ("the model's codec and its checks (state files)", ("topology.codec",)),
    ("the topology model and fabric", ("topology",)),
    ("uvicorn (click, multiprocessing via its __init__) and h11", ("uvicorn", "click", "multiprocessing",
                                                                   "_multiprocessing", "h11")),
    ("the plain ASGI app and asyncio", ("exporter._http", "asyncio", "_asyncio", "concurrent")),
    ("prometheus-client and what its exposition imports (http.server, urllib.request, email, wsgiref)",
     ("prometheus_client", "http", "urllib", "email", "wsgiref", "socketserver", "mimetypes")),
    ("Kubernetes config without a sink, the preflight's checks", ("exporter.kube", "agent.cli._checks")),
    ("the exporter: view, metric families, health", ("exporter",)),
    ("the command line: argparse, gettext, settings", ("agent", "argparse", "gettext")),
    ("the rest of the standard library (typing, dataclasses, inspect, logging, json, ...)", ("",)),
)


def group_of(module: str) -> str:
    for name, prefixes in GROUPS:
        if any(p in ("", module) or module.startswith(p + ".") for p in prefixes):
            return name
    raise AssertionError(module)  # pragma: no cover - the last group takes everything


_RUN = """
import sys
import threading  # before the finder (it needs it); charged to the interpreter's own size below

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 1048576

base, grown, stacks = rss(), {}, {}

class Measured:
    def __init__(self, loader, name):
        self.loader, self.name = loader, name
    def __getattr__(self, attr):
        return getattr(self.loader, attr)
    def _measure(self, step, *args):
        stack = stacks.setdefault(threading.get_ident(), [])
        stack.append(0.0)
        before = rss()
        try:
            return step(*args)
        finally:
            total = rss() - before
            inner = stack.pop()
            grown[self.name] = grown.get(self.name, 0.0) + total - inner
            if stack:
                stack[-1] += total
    def create_module(self, spec):
        return self._measure(self.loader.create_module, spec)
    def exec_module(self, module):
        return self._measure(self.loader.exec_module, module)

class Finder:
    def find_spec(self, name, path, target=None):
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = Measured(spec.loader, name)
                return spec
        return None

sys.meta_path.insert(0, Finder())
from agent.cli.serve import main
code = main(sys.argv[1:])
import json
print(json.dumps({"base": base, "grown": grown}), file=sys.__stderr__)
sys.exit(code)
"""


def serve_run(scrapes: int, work: Path, *, measured: bool) -> tuple[float, float, dict[str, object]]:
    """Serve's resident size at ready and after ``scrapes`` scrapes; with ``measured``, what each module's first
    import grew it (``_RUN``)."""
    snap, node = discover_profile("hgx-h100", work)
    state = work / "state"
    state.mkdir(exist_ok=True)
    doc = {"schema": "topolink.probe/v1", "profile": "quick", "backend": "cuda", "outcomes": [],
           "snapshot": to_dict(full_measurements(snap))}
    (state / "probe-report.json").write_text(json.dumps(doc))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_")} | node.env()
    how = ["-c", _RUN] if measured else ["-m", "agent.cli.serve"]
    serve = subprocess.Popen([sys.executable, *how, "--host", "127.0.0.1", "--port", str(port), "--state-dir",
                              str(state), "--probe-interval", "0"], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_up(port, "/readyz")
        ready = rss_mib(serve.pid)
        scraper = Scraper(port)
        for _ in range(scrapes):
            scraper.once()
        after = rss_mib(serve.pid)
    finally:
        serve.terminate()
        _, err = serve.communicate(timeout=30)
    found: dict[str, object] = json.loads(err.strip().splitlines()[-1]) if measured else {}
    return ready, after, found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scrapes", type=int, default=3000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="topolink-bench-") as tmp:
        ready, after, _ = serve_run(args.scrapes, Path(tmp) / "plain", measured=False)
        _, _, found = serve_run(args.scrapes, Path(tmp) / "measured", measured=True)
    grown = found["grown"]
    assert isinstance(grown, dict)
    shut_down_only = ("psutil",)  # imported by the SIGTERM that ended the run, not held while serving
    per_group: collections.Counter[str] = collections.Counter()
    for name, mib in grown.items():
        if not any(name == p or name.startswith(p + ".") for p in shut_down_only):
            per_group[group_of(name)] += mib
    imported = sum(per_group.values())
    base = found["base"]
    assert isinstance(base, float)
    print(f"serve (measured): {ready:.1f} MiB resident at ready, {after:.1f} MiB after {args.scrapes} scrapes; "
          f"{len(grown)} modules imported")
    print(f"the interpreter before serve's imports (threading included): {base:.1f} MiB\n")
    print("| first imports, in serve's order (resident growth, each module less what it imports) | MiB |")
    print("|---|---|")
    for name, _ in GROUPS:
        print(f"| {name} | {per_group[name]:.1f} |")
    print(f"| all first imports | {imported:.1f} |")
    print(f"\nthe rest of serve's size after the scrapes (data, allocators' free room, thread stacks): "
          f"{after - base - imported:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
