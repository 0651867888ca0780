"""NVML's answers about GPU pairs: common ancestor and P2P status per caps index.

When a pair call says GPU_IS_LOST, one ``nvmlDeviceGetIndex`` on each GPU of the pair (never asked
otherwise) tells which one fell off.
"""

from __future__ import annotations

from collections.abc import Callable

from topology import Aspect, Fact

from ..access import NvmlError, NvmlGpuLost
from ..access._nvml_port import Handle
from ._nvml_facts import P2P_CAPS, NvmlPairFacts
from ._nvml_walk import Walk

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a start-up cost)

if TYPE_CHECKING:
    from typing import Any

# nvmlGpuTopologyLevel_t: internal, single, multiple, host bridge, node, system
TOPOLOGY_LEVELS = (0, 10, 20, 30, 40, 50)
# nvmlGpuP2PStatus_t: OK, chipset, GPU, IOH topology not supported, disabled by regkey, not supported, unknown
P2P_STATUSES = range(7)


def pair_facts(w: Walk, handles: dict[int, Handle], a: int, b: int) -> NvmlPairFacts | None:
    port = w.port

    def ask(fn: Callable[..., int], *args: Any, what: str = "") -> int | None:
        if a in w.lost or b in w.lost:
            return None
        try:
            return fn(*args)
        except NvmlGpuLost as exc:
            _which_lost(w, handles, (a, b), exc)
        except NvmlError as exc:
            w.problem(f"{w.subject(a)}--{w.subject(b)}", f"{exc}{what}",
                      (Fact(subject=w.subject(a), aspect=Aspect.P2P), Fact(subject=w.subject(b), aspect=Aspect.P2P)))
        return None

    def unnamed(call: str, value: int, what: str) -> None:  # a value no nvml.h enum has: the pair's P2P unknown
        w.problem(f"{w.subject(a)}--{w.subject(b)}", f"{call}: {value}{what} is no value NVML defines",
                  (Fact(subject=w.subject(a), aspect=Aspect.P2P), Fact(subject=w.subject(b), aspect=Aspect.P2P)))

    ha, hb = handles[a], handles[b]
    ancestor = ask(port.common_ancestor, ha, hb)
    if ancestor is not None and ancestor not in TOPOLOGY_LEVELS:
        unnamed("nvmlDeviceGetTopologyCommonAncestor", ancestor, " (nvmlGpuTopologyLevel_t)")
        ancestor = None
    p2p = []
    for name, cap in P2P_CAPS.items():
        status = ask(port.p2p_status, ha, hb, cap, what=f" (caps index {cap}, {name})")
        if status is not None and status not in P2P_STATUSES:
            unnamed("nvmlDeviceGetP2PStatus", status, f" (caps index {cap}, {name}: nvmlGpuP2PStatus_t)")
        elif status is not None:
            p2p.append((cap, status))
    if ancestor is None and not p2p:
        return None
    return NvmlPairFacts(a=a, b=b, common_ancestor=ancestor, p2p=tuple(p2p))


def _which_lost(w: Walk, handles: dict[int, Handle], pair: tuple[int, int], exc: NvmlGpuLost) -> None:
    found = False
    for gpu in pair:
        if gpu in w.lost or gpu in w.probed:
            continue
        w.probed.add(gpu)
        try:
            w.port.index(handles[gpu])
        except NvmlGpuLost as probe_exc:
            w.mark_lost(gpu, probe_exc)
            found = True
        except NvmlError:
            pass
    if not found and not (set(pair) & w.lost):
        w.problem(f"{w.subject(pair[0])}--{w.subject(pair[1])}", f"{exc}, yet both GPUs still answer",
                  tuple(Fact(subject=w.subject(g), aspect=Aspect.P2P) for g in pair))
