"""``cupy.cuda.graph`` of the fake: a captured graph is its list of operations, enqueued again on launch
(NCCL groups take fresh sequence numbers each time, as a relaunched graph runs a new collective)."""

from __future__ import annotations

from .._machine import MACHINE, Op


class Graph:
    def __init__(self, ops: list[Op], device: int) -> None:
        self.ops, self.device = ops, device

    def launch(self, stream: object = None) -> None:
        target = getattr(stream, "_s", None)
        if target is None:
            raise RuntimeError("fake CUDA: a graph launched on the legacy default stream")
        MACHINE.log("graph_launch", device=self.device, ops=len(self.ops))
        MACHINE.launch()  # one launch for the whole graph: what capture saves
        for op in self.ops:
            MACHINE.enqueue(target, op.clone() if op.clone else op)
