"""``topolink controller``: the fleet controller. Replicas elect one leader by a coordination.k8s.io Lease; the
leader watches the Nodes' labels and the ResourceSlices the agents published and keeps current, each part
switchable, what ``topolink cluster`` computes once: the DeviceClasses and ResourceClaimTemplates of each claim
class, Kueue's Topology and ResourceFlavors, KAI's Topology, Volcano's HyperNodes and Slurm's topology.yaml in a
ConfigMap (docs/schedulers.md).

With ``--metrics-port``, ``/metrics`` serves what the leader counts: free groups by class, kind and size, nodes
by class, and whether this replica leads.

Exit status: 0 stopped by SIGTERM or SIGINT (the Lease handed back); 2 usage, no readable kubeconfig, or the
metrics port taken.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

EXIT_OK, EXIT_USAGE = 0, 2
_EPILOG = ("Needs, in its namespace: get, create and patch on leases (coordination.k8s.io), and get, list, create, "
           "patch, delete and watch on configmaps (the Slurm topology); cluster-wide: list and watch on nodes and "
           "resourceslices; get, list, watch, create, patch and delete on deviceclasses, resourceclaimtemplates and "
           "the schedulers' kinds it writes (daemonset/base/controller.yaml). Exit status: 0 stopped by a signal; 2 "
           "usage or no readable kubeconfig.")


def add_parsers(sub: Any, add_discovery_args: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``controller`` (it discovers nothing on this machine: no discovery flags)."""
    del add_discovery_args
    from exporter._core._kube_names import DRIVER, PREFIX
    from exporter._core._settings import TEXT, Number, Pattern, count, seconds

    from ._claims import _rules, add_claim_args
    from ._cluster_emit import _LABEL

    p = sub.add_parser("controller", help="keep the schedulers' objects current for the fleet (one leader of "
                       "replicas)", description=__doc__.split("\n\n")[0], epilog=_EPILOG)
    label_key = Pattern("a node-label key", _LABEL, 316, bad=("Rack/x", "a/b/c", "-spine", "x/"))
    namespace = _rules()[3]
    p.add_argument("--kubeconfig", type=TEXT, metavar="FILE",
                   help="default: in-cluster, else $KUBECONFIG or ~/.kube/config")
    p.add_argument("--lease-namespace", type=namespace, default=None, metavar="NS",
                   help="the Lease's namespace and the Slurm ConfigMap's (default $POD_NAMESPACE, else topolink)")
    p.add_argument("--lease-name", type=namespace, default="topolink-controller", metavar="NAME")
    p.add_argument("--identity", type=TEXT, default=None,
                   help="this replica's name in the Lease (default $POD_NAME, else host name and process id)")
    p.add_argument("--lease-duration", type=seconds(1, 3600), default=15.0, metavar="S",
                   help="how long a silent leader's Lease is honoured (default 15, client-go's)")
    p.add_argument("--renew-deadline", type=seconds(0.5, 3600), default=10.0, metavar="S",
                   help="a leader that renewed nothing for this long stops leading (default 10)")
    p.add_argument("--retry-period", type=seconds(0.1, 600), default=2.0, metavar="S",
                   help="between tries to take or renew the Lease (default 2)")
    p.add_argument("--resync", type=seconds(0.5, 86400), default=300.0, metavar="S",
                   help="a sync this often even with nothing new, and the served kinds asked again (default 300)")
    p.add_argument("--delay", type=seconds(0, 600, low_open=False), default=1.0, metavar="S",
                   help="a sync waits this long after the last change it follows, so changes together are one "
                        "sync (default 1)")
    p.add_argument("--delay-max", type=seconds(0, 3600, low_open=False), default=5.0, metavar="S",
                   help="while changes keep coming, a sync waits at most this long after the first (default 5)")
    p.add_argument("--write-qps", type=Number(0, 10000, low_open=True), default=20.0, metavar="N",
                   help="the syncs' writes and the pending pods' Events a second, one token bucket as client-go's "
                        "(default 20, kube-controller-manager's); the Lease has a client of its own")
    p.add_argument("--write-burst", type=count(1, 100000), default=30, metavar="N",
                   help="writes at once before --write-qps holds them (default 30)")
    p.add_argument("--metrics-port", type=count(0, 65535), default=0, metavar="PORT",
                   help="serve /metrics on this port (free groups by class and size, nodes by class, leading); "
                        "default 0: not served")
    p.add_argument("--metrics-address", type=TEXT, default="0.0.0.0", metavar="ADDR",
                   help="the address /metrics listens on (default every address)")
    p.add_argument("--label-prefix", type=PREFIX, default="gpu.topology", help="the agents' label prefix")
    p.add_argument("--dra-driver-name", type=DRIVER, default="gpu.topology", help="the agents' ResourceSlice driver")
    p.add_argument("--gpus", type=count(1, 1 << 20), action="append", metavar="N",
                   help="a group size the ResourceClaimTemplates are written for (repeat; default 2, 4 and 8)")
    p.add_argument("--level", action="append", type=label_key, metavar="LABEL",
                   help="a fabric label the nodes carry, above topolink's levels (repeat, highest first)")
    p.add_argument("--slurm-node-label", type=label_key, default="kubernetes.io/hostname", metavar="LABEL",
                   help="the node label whose value is the node's Slurm name")
    for part, what in (("claims", "DeviceClasses and ResourceClaimTemplates"), ("kueue", "Kueue's Topology and "
                       "ResourceFlavors"), ("kai", "KAI's Topology"), ("volcano", "Volcano's HyperNodes"),
                       ("slurm", "the Slurm topology.yaml ConfigMap")):
        p.add_argument(f"--no-{part}", dest=part, action="store_false", help=f"do not write {what}")
    add_claim_args(p)
    p.set_defaults(handler=_cmd_controller)


def _log(line: str) -> None:
    from datetime import UTC, datetime

    print(f"{datetime.now(UTC).strftime('%Y-%m-%dT%H:%M:%S.%fZ')[:-4]}Z topolink controller: {line}",
          file=sys.stderr, flush=True)


def _config(args: argparse.Namespace) -> Any:
    import os
    import socket

    from exporter.kube import ControllerConfig, LeaseTimes, Parts

    from ._claims import claim_config

    ns = args.lease_namespace or os.environ.get("POD_NAMESPACE") or "topolink"
    identity = args.identity or os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"
    parts = Parts(claims=args.claims, kueue=args.kueue, kai=args.kai, volcano=args.volcano, slurm=args.slurm,
                  gpus=tuple(dict.fromkeys(args.gpus or (2, 4, 8))), claim=claim_config(args, args.label_prefix),
                  levels=tuple(args.level or ()), slurm_node_label=args.slurm_node_label, namespace=ns)
    times = LeaseTimes(duration=args.lease_duration, renew_deadline=args.renew_deadline, retry=args.retry_period)
    return ControllerConfig(parts=parts, driver=args.dra_driver_name, namespace=ns, lease_name=args.lease_name,
                            identity=identity, times=times, resync_s=args.resync, delay_s=args.delay,
                            delay_max_s=args.delay_max, write_qps=args.write_qps, write_burst=args.write_burst)


def _cmd_controller(args: argparse.Namespace) -> int:
    import signal
    import threading

    from exporter.kube import BadConfig, Controller, InvalidObject, LightkubeApi

    try:
        cfg = _config(args)
    except (ValueError, InvalidObject) as exc:
        print(f"topolink controller: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        api = LightkubeApi.connect(kubeconfig=args.kubeconfig, manager="topolink-controller")
        lease_api = LightkubeApi.connect(kubeconfig=args.kubeconfig, manager="topolink-controller")
    except BadConfig as exc:
        print(f"topolink controller: {exc}", file=sys.stderr)
        return EXIT_USAGE
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    _log(f"{cfg.identity}: candidate for lease {cfg.namespace}/{cfg.lease_name}; parts: "
         f"{', '.join(cfg.parts.on()) or 'none'}")
    controller = Controller(api, cfg, _log, lease_api=lease_api)
    if args.metrics_port:
        try:
            _serve_metrics(args.metrics_address, args.metrics_port, controller.metrics_text)
        except OSError as exc:
            print(f"topolink controller: /metrics on {args.metrics_address}:{args.metrics_port}: {exc}",
                  file=sys.stderr)
            return EXIT_USAGE
    controller.run(stop)
    return EXIT_OK


def _serve_metrics(address: str, port: int, body: Callable[[], str]) -> None:
    """``GET /metrics`` on a thread of its own (Prometheus text format); any other path is 404."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            data = body().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            del format, args  # a scrape is not news

    server = ThreadingHTTPServer((address, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True, name="topolink-metrics").start()
