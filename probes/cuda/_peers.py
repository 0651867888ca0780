"""Peer access for the length of one item, as nvbandwidth does it: enabled both ways for the GPUs an
item copies between, before anything is timed, and disabled when the item ends. A device maps at most 8
peers at once (``cudaErrorTooManyPeers``), so a pass over a machine with more GPUs than that, which
enables pair after pair in one process, must give each mapping back; access this session did not
enable (an earlier one's, or NCCL's) is left as it was. The all-to-one and one-to-all tests map every other
GPU on the target at once, as nvbandwidth does; the plan waives them where that is more than 8 (see
``peer_with_all_others``) rather than measure a total over a subset."""

from __future__ import annotations

from typing import Any

from ._runtime import disable_peer, enable_peer


class PeerAccess:
    def __init__(self, cp: Any) -> None:
        self.cp = cp
        self.enabled: list[tuple[int, int]] = []  # (device, peer) this session mapped, in order

    def both_ways(self, a: int, b: int) -> None:
        """``a`` may access ``b``'s memory and ``b`` may access ``a``'s (raises Waived when refused)."""
        for dev, peer in ((a, b), (b, a)):
            if enable_peer(self.cp, dev, peer):
                self.enabled.append((dev, peer))

    def one_way(self, dev: int, peer: int) -> None:
        if enable_peer(self.cp, dev, peer):
            self.enabled.append((dev, peer))

    def close(self) -> None:
        while self.enabled:
            dev, peer = self.enabled.pop()
            disable_peer(self.cp, dev, peer)
