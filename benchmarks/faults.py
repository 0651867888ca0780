"""What a failing API server gets from topolink's agents and its fleet controller: tables against the targets.

    KUBEBUILDER_ASSETS=... .venv/bin/python benchmarks/faults.py [--agents 100] [--interval 10] [--before 20]
            [--during 30] [--full] [--faults 500,429,refuse,410,bookmark-410,silent] [--controller]
            [--controller-nodes 100]

Needs envtest's etcd and kube-apiserver (``$KUBEBUILDER_ASSETS``); every request goes through the fault proxy
of the ``apiserver`` test tier (``tests/fault_proxy.py``), TLS end to end.

One agent: the label and slice sinks with the slice watch, on a simulated clock (``tests/fault_sim.py``), ten
minutes of each fault with one-minute passes: the requests it tried (refused ones included) against the
steady state's one a pass (simulated: the loop and the clock; every request real). ``silent`` (a watch accepted
and then silent) is the fleet's only: the client notices it by its read timeout, in real time.

The fleet: ``--agents`` agents' publishing loops in this process in real time (``benchmarks/_fault_fleet.py``), each
its own node and client, a pass every ``--interval`` seconds. For each fault: requests a second the server received
before, during and after it (mean, and the peak: the highest mean over any window of one interval), and the seconds
until every node's labels and slices are right again. Each fault runs twice: with every node's slices and a label
removed behind the proxy as it starts (the repair's writes add to the load; the recovery time is from this run),
then alone (its peak is the one held to the target). Each steady phase starts once every agent's watch is back
from the last fault (until then its passes list: the last fault's tail, at most one back-off maximum); the steady
rate is the one before the first fault. Targets: peak during a fault at most 2x the steady rate;
every node right again within :data:`RECOVERY_S` after the fault ends. ``--full``: ten minutes of each fault,
one-minute passes (about an hour).

The fleet controller (``benchmarks/_fault_controller.py``; ``--controller``: its table alone): one replica of
``topolink controller`` in this process for a fleet of ``--controller-nodes`` fake nodes, its sync's and its
Lease's clients through the proxy; the same faults, phases and targets, its damage being its objects in its
namespace deleted and one node moved to another NVLink domain and a claim class no node had (or back), right
again being every object that fleet wants there as wanted and none of its own left that it does not.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from exporter.kube._api._retry import MAX_DELAY_S, Backoff  # noqa: E402
from tests.apiserver import ApiServer  # noqa: E402
from tests.fault_sim import FAULTS  # noqa: E402

if TYPE_CHECKING:
    from benchmarks._fault_fleet import Rig

RECOVERY_S = 60.0  # every node right again this soon after a fault ends
FLEET_FAULTS = (*FAULTS, "silent")


def one_agent(server: ApiServer, tmp: Path) -> None:
    import ssl

    from tests.apiserver_agent import create_node
    from tests.fault_proxy import FaultProxy
    from tests.fault_sim import kubeconfig, publish, request_bound, run_fault, sim_agent
    from tests.kmock_support import a100_node

    pki = server.root / "pki"
    proxy = FaultProxy(server.url, verify=ssl.create_default_context(cafile=str(server.ca)),
                       certfile=str(pki / "serving.crt"), keyfile=str(pki / "serving.key"))
    print("one agent, 10 simulated minutes of each fault, a pass a minute (simulated clock, real server):")
    print(f"{'fault':<12} {'requests tried':>15} {'steady (1 a pass)':>18}  target")
    try:
        for fault in FAULTS:
            node = f"one-{fault}"
            with server.admin() as http:
                create_node(http, node)
            agent = sim_agent(a100_node(node), config=kubeconfig(tmp / f"{node}.cfg", proxy.url,
                                                                 server.token, server.ca),
                              ca=server.ca)
            publish(agent)
            sent = run_fault(agent, proxy, fault)
            note = (f"<= {request_bound(fault)}: the passes' requests, one a pass at most" if "410" not in fault else
                    f"<= {request_bound(fault)}: a pass lists too (no watch to trust), and a list and a watch each "
                    "back-off step")
            print(f"{fault:<12} {sent:>15} {10:>18}  {note}")
    finally:
        proxy.close()


def fleet_table(server: ApiServer, args: argparse.Namespace, tmp: Path) -> None:
    from benchmarks._fault_fleet import fleet

    f = fleet(server, args.agents, args.interval, tmp, "fleet")
    print(f"\nfleet: {args.agents} agents in one process, a pass every {args.interval:g} s, {args.before:g} s "
          f"steady, {args.during:g} s of each fault (measured, real time; peak over {args.interval:g} s windows).\n"
          "Each fault twice: with every node's slices and a label removed as it starts (the load with their "
          "repair, and the time until every node is right again), then alone (the load the fault causes)")
    try:
        f.start(args.seed)
        time.sleep(2 * args.interval)  # every agent's first pass and watch: not the steady state
        fault_rows(f, args, settle_max=MAX_DELAY_S + args.interval)
    finally:
        f.close()


def controller_table(server: ApiServer, args: argparse.Namespace, tmp: Path) -> None:
    from benchmarks._fault_controller import controller_rig, steady

    rig = controller_rig(server, args.controller_nodes, tmp, "faultctl")
    print(f"\nthe fleet controller: {args.controller_nodes} nodes, one replica (lease 15 s, renew deadline 10 s, "
          f"retry 2 s), {args.before:g} s steady, {args.during:g} s of each fault (measured, real time; peak over "
          f"{args.interval:g} s windows).\nEach fault twice: with its objects in its namespace deleted and a node "
          "moved to another domain and claim class as it starts (the time until every object is as the fleet "
          "wants), then alone")
    try:
        rig.start(args.seed)
        steady(rig, 600)
        fault_rows(rig, args, settle_max=MAX_DELAY_S + args.interval)
    finally:
        rig.close()


def fault_rows(rig: Rig, args: argparse.Namespace, settle_max: float) -> None:
    """One row a fault and damage: the rates before, during and after, and the time to right again."""
    from benchmarks._fault_fleet import Phase, run_fault

    print(f"{'fault':<12} {'damage':<6} {'before/s':>9} {'during/s':>9} {'peak/s':>7} {'peak/steady':>11} "
          f"{'after/s':>8} {'tried during':>12} {'recovered s':>11}  target: peak <= 2x steady (fault alone), "
          f"recovery <= {RECOVERY_S:g} s")
    steady: float | None = None
    for fault in args.faults.split(","):
        for damage in (True, False):  # damage first: it starts from the steady state, watches open
            phases: dict[str, Phase] = {}
            recovered = None
            for item in run_fault(rig, fault, before=args.before, during=args.during, settle_max=settle_max,
                                  window=args.interval, damage=damage):
                if isinstance(item, Phase):
                    phases[item.name] = item
                else:
                    recovered = item[1]
            b, d, a = phases["before"], phases["during"], phases["after"]
            steady = steady or b.rate
            ratio = d.peak / steady if steady else float("nan")
            rec = f"{recovered:.0f}" if recovered is not None else f"> {settle_max:g}"
            print(f"{fault:<12} {'yes' if damage else 'no':<6} {b.rate:>9.1f} {d.rate:>9.1f} {d.peak:>7.1f} "
                  f"{ratio:>11.2f} {a.rate:>8.1f} {d.sent:>12} {rec:>11}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--agents", type=int, default=100)
    ap.add_argument("--interval", type=float, default=10.0, help="seconds between an agent's passes")
    ap.add_argument("--before", type=float, default=20.0, help="steady seconds before each fault")
    ap.add_argument("--during", type=float, default=30.0, help="seconds each fault lasts")
    ap.add_argument("--faults", default=",".join(FLEET_FAULTS))
    ap.add_argument("--full", action="store_true", help="ten minutes of each fault, one-minute passes")
    ap.add_argument("--skip-one", action="store_true", help="not the one agent")
    ap.add_argument("--controller", action="store_true", help="only the fleet controller")
    ap.add_argument("--controller-nodes", type=int, default=100, help="the controller's fleet (0: not run)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.full:
        args.interval, args.before, args.during = 60.0, 180.0, 600.0
    from tests.apiserver import assets, running

    b = Backoff()
    print(f"retry policy: jittered over the upper half of {b.base:g} s x 2^n, at most {MAX_DELAY_S:g} s; "
          f"{b.attempts} tries a call, the second only after a Retry-After or a read's reset connection and while "
          f"the wait is under {b.in_call:g} s (exporter/kube/_api/_retry.py)\n")
    found = assets()
    if found is None:
        print("not measured: needs KUBEBUILDER_ASSETS (envtest's kube-apiserver and etcd)")
        return
    logging.getLogger("exporter").setLevel(logging.CRITICAL)  # the watches report every fault; counted here
    with tempfile.TemporaryDirectory() as tmp:
        server_run = running(found, Path(tmp) / "apiserver")
        server = next(server_run)
        try:
            if not (args.skip_one or args.controller):
                one_agent(server, Path(tmp))
            if not args.controller:
                fleet_table(server, args, Path(tmp))
            if args.controller_nodes > 0:
                controller_table(server, args, Path(tmp))
        finally:
            next(server_run, None)


if __name__ == "__main__":
    main()
