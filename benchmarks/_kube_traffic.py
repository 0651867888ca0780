"""What one node's agent reads from the API server, from the sizes of real responses: the label and slice
sinks (the watch running, as in ``topolink serve``) publish an 8-GPU H100 node to a real kube-apiserver and
etcd (envtest's, from ``$KUBEBUILDER_ASSETS``) through a transport that counts the bytes of every response
as they arrive: status line and headers as HTTP/1.1 sends them, bodies as sent (compressed where they are).

Per day = passes a day x a steady pass + watch reopenings (the server ends each watch after 5 to 10 minutes:
7.5 on average) x one reopening (measured with a short server timeout: its response, bookmarks included)
+ the watch's bookmarks (one a minute, measured size). The counts are a model, the sizes measured.
"""

from __future__ import annotations

import dataclasses
import gzip
import logging
import ssl
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2

from topology import replace

DAY_S = 86400
WIRE_PASSES, WIRE_GAP_S = 3, 6.0
WATCH_MEAN_S = 450  # the server timeout the client asks for: uniform over 300..600 s


class Counted(httpx2.SyncByteStream):
    def __init__(self, inner: Any, tally: Tally) -> None:
        self._inner, self._tally = inner, tally

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._inner:
            self._tally.bytes += len(chunk)
            yield chunk

    def close(self) -> None:
        self._inner.close()


@dataclasses.dataclass
class Tally:
    requests: int = 0
    bytes: int = 0
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def snapshot(self) -> tuple[int, int]:
        return self.requests, self.bytes


class CountingTransport(httpx2.HTTPTransport):
    def __init__(self, tally: Tally, verify: ssl.SSLContext) -> None:
        from exporter.kube._client._client import KEEPALIVE_S

        super().__init__(verify=verify, limits=httpx2.Limits(keepalive_expiry=KEEPALIVE_S))  # as the client's own
        self.tally = tally

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        response = super().handle_request(request)
        self.tally.requests += 1
        self.tally.bytes += len("HTTP/1.1 200 OK\r\n\r\n") + sum(len(k) + len(v) + 4 for k, v in response.headers.raw)
        return httpx2.Response(status_code=response.status_code, headers=response.headers,
                               stream=Counted(response.stream, self.tally), extensions=response.extensions)


def measure(passes: int, watch_s: int, nodes: int) -> dict[str, float]:
    from exporter.kube import LabelConfig, LightkubeApi, NodeLabelSink, ResourceSliceSink, SliceConfig
    from tests.apiserver import assets, running
    from tests.apiserver_agent import create_node, wait_until
    from tests.fault_sim import kubeconfig
    from tests.kube_support import discover_profile
    from tests.tcp_relay import CountingRelay

    logging.getLogger("exporter").setLevel(logging.ERROR)  # the watch's thread sees the server stop at the end
    found = assets()
    if found is None:
        raise LookupError("needs KUBEBUILDER_ASSETS (envtest's kube-apiserver and etcd)")
    with tempfile.TemporaryDirectory() as tmp:
        snap = replace(discover_profile("hgx-h100", Path(tmp) / "m"), node="h100-0")
        server_run = running(found, Path(tmp) / "apiserver")
        server = next(server_run)
        try:
            with server.admin() as http:
                create_node(http, snap.node)
            tally = Tally()
            transport = CountingTransport(tally, ssl.create_default_context(cafile=str(server.ca)))
            relay = CountingRelay(f"127.0.0.1:{server.port}")  # the bytes on the wire, TLS included
            config = kubeconfig(Path(tmp) / "relay.kubeconfig", f"https://{relay.address}", server.agent_token,
                                server.ca)
            api = LightkubeApi.connect(kubeconfig=config, transport=transport)
            sinks = [NodeLabelSink(api, snap.node, LabelConfig()), ResourceSliceSink(api, snap.node, SliceConfig())]
            stop = threading.Event()
            watcher = threading.Thread(target=sinks[1].watch, args=(stop, lambda why: None), daemon=True)
            for s in sinks:
                s.publish(snap)
            watcher.start()
            wait_until("the watch open", sinks[1].cache.synced)
            before = tally.snapshot()
            for _ in range(passes):
                assert all(s.publish(snap).written == 0 for s in sinks)
            requests, read = (a - b for a, b in zip(tally.snapshot(), before, strict=True))
            wire0 = relay.totals()
            for _ in range(WIRE_PASSES):  # apart by more than httpx's default keep-alive (5 s)
                time.sleep(WIRE_GAP_S)
                assert all(s.publish(snap).written == 0 for s in sinks)
            up, down, conns = (a - b for a, b in zip(relay.totals(), wire0, strict=True))
            stop.set()
            with server.admin() as http:  # one node's slices as a list returns them, managedFields and all
                body = http.get("/apis/resource.k8s.io/v1/resourceslices",
                                params={"fieldSelector": f"spec.nodeName={snap.node}"}).content
            one_slice = len(body)
            reopen, bookmark = _one_watch(api, snap.node, tally, watch_s)
        finally:
            next(server_run, None)
    per_pass_requests, per_pass_bytes = requests / passes, read / passes
    passes_day = DAY_S / 60
    reopen_day = DAY_S / WATCH_MEAN_S
    return {
        "pass_requests": per_pass_requests, "pass_bytes": per_pass_bytes, "reopen_bytes": reopen,
        "bookmark_bytes": bookmark, "slice_list_bytes": one_slice,
        "wire_up": up / WIRE_PASSES, "wire_down": down / WIRE_PASSES, "wire_connections": conns,
        "day_requests": passes_day * per_pass_requests + reopen_day,
        "day_bytes": passes_day * per_pass_bytes + reopen_day * reopen + (DAY_S / 60) * bookmark,
        "before_day_bytes": passes_day * nodes * one_slice,
        "gzip_ratio": len(gzip.compress(body)) / one_slice,
    }


def _one_watch(api: Any, node: str, tally: Tally, seconds: int) -> tuple[int, int]:
    """One watch the server ends after ``seconds`` (it sends a bookmark shortly before, from about 10 s): the
    bytes of its whole response, and of one bookmark."""
    from exporter.kube._api._api import MANAGED_BY, slice_kind
    from exporter.kube._client._watch_stream import path_of, selector
    from exporter.kube._sinks._slice_watch import slice_fields

    _, rv = api.list_versioned(slice_kind("v1"), MANAGED_BY, slice_fields(node, "gpu.topology"))
    params = {"watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": str(seconds), "resourceVersion": rv,
              "labelSelector": selector(MANAGED_BY), "fieldSelector": selector(slice_fields(node, "gpu.topology"))}
    start = tally.bytes
    sizes = []
    with api._http.stream("GET", path_of(slice_kind("v1")), params=params,
                          timeout=httpx2.Timeout(10.0, read=seconds + 30)) as resp:
        assert resp.status_code == 200, resp.read()
        for line in resp.iter_lines():
            if '"BOOKMARK"' in line:
                sizes.append(len(line) + 1)
    return tally.bytes - start, max(sizes, default=0)
