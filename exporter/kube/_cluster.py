"""The fleet as topolink published it: every node's labels and its ResourceSlices of our driver, read in pages,
folded into one ``topology.NodeSummary`` per node for ``topology.fleet_report``.

Reading costs what a fleet of 10,000 nodes can afford: both lists are paginated (``limit``/``continue``, so
no response holds the fleet), nodes are asked for as ``PartialObjectMetadataList`` (labels, not status or
images) and only those carrying our ``gpu.count`` label, slices only of our driver; each page is folded
into a few numbers per node and dropped. An expired continue token (410, the list was too slow for etcd's
compaction) starts that list again once; what was folded is keyed by name, so nothing counts twice.

What a summary says and where it comes from: product, GPU count and NVLink domain from the labels; the best
groups' bus bandwidth from ``allreduce-busbw-N`` (the class's lower edge: an estimate, rounded down); the
GPUs' NVLink rate (the slowest GPU's ``nvlinkCount`` x the rate of its ``nvlinkGen``) and the RDMA NICs'
line rate (their ``rateGbps`` added up) from the slices: theoretical.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from topology import NodeSummary, nvlink_bytes_per_second

from ._api import RESOURCE_GROUP, SLICE_VERSIONS, Obj
from ._busbw import KEY, SIZES
from ._errors import Expired, NotFound
from ._slices import devices_of

PAGE = 500
PARTIAL = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"


class PageApi(Protocol):
    def get_page(self, path: str, params: Mapping[str, str], accept: str | None = None) -> Obj: ...

    def served_versions(self, group: str) -> Sequence[str]: ...


@dataclass(slots=True)
class _NodeFigures:
    generation: int = -1
    gpu_rates: list[float | None] = field(default_factory=list)  # per GPU device: NVLink rate, theoretical
    nic_bytes_per_second: float = 0.0
    nics: int = 0
    slices: set[str] = field(default_factory=set)  # folded already (a list started again reads them again)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterRead:
    summaries: tuple[NodeSummary, ...]
    without_slices: tuple[str, ...]  # labelled nodes with no slice of our driver
    slices: int
    pages: int
    slice_version: str | None  # None: the server serves no ResourceSlices
    restarts: int = 0  # lists started again after an expired continue token


def pages(api: PageApi, path: str, params: Mapping[str, str], *, limit: int = PAGE,
          accept: str | None = None, restarts: list[int] | None = None) -> Iterator[list[Obj]]:
    """The list's items, one page at a time; once, after 410 Gone, from the start again."""
    token, again = "", True
    while True:
        query = {**params, "limit": str(limit), **({"continue": token} if token else {})}
        try:
            doc = api.get_page(path, query, accept)
        except Expired:
            if not token or not again:
                raise
            again, token = False, ""
            if restarts is not None:
                restarts.append(1)
            continue
        yield list(doc.get("items") or ())
        token = str((doc.get("metadata") or {}).get("continue") or "")
        if not token:
            return


def slice_version(api: PageApi) -> str | None:
    try:
        served = set(api.served_versions(RESOURCE_GROUP))
    except NotFound:
        return None
    return next((v for v in SLICE_VERSIONS if v in served), None)


def _fold(figures: dict[str, _NodeFigures], obj: Obj, driver: str) -> None:
    spec = obj.get("spec") or {}
    node = spec.get("nodeName")
    if not node or spec.get("driver") != driver:
        return
    generation = int((spec.get("pool") or {}).get("generation") or 0)
    got = figures.setdefault(node, _NodeFigures())
    if generation < got.generation:
        return  # a slice of an older generation of the pool: consumers ignore it, so do we
    if generation > got.generation:
        figures[node] = got = _NodeFigures(generation=generation)
    name = str((obj.get("metadata") or {}).get("name"))
    if name in got.slices:
        return
    got.slices.add(name)
    for device in devices_of(obj):
        attrs = device["attributes"]

        def value(name: str, attrs: Mapping[str, Any] = attrs) -> Any:
            found = attrs.get(f"{driver}/{name}") or {}
            return next(iter(found.values()), None)

        kind = value("type")
        if kind == "gpu":
            count, gen = value("nvlinkCount"), value("nvlinkGen")
            rate = nvlink_bytes_per_second(gen, count) if isinstance(count, int) and isinstance(gen, int) else None
            got.gpu_rates.append(rate if rate else None)
        elif kind == "nic" and isinstance(rate_gbps := value("rateGbps"), int):
            got.nic_bytes_per_second += rate_gbps * 1e9 / 8
            got.nics += 1


def summary_of(name: str, labels: Mapping[str, str], prefix: str, figures: _NodeFigures | None) -> NodeSummary | None:
    """The node's summary, or None when it carries no GPU count of ours."""
    count = labels.get(f"{prefix}/gpu.count", "")
    if not count.isdigit():
        return None
    busbw = []
    for n in SIZES:
        value = labels.get(f"{prefix}/{KEY.format(n=n)}", "")
        if value.isdigit():
            busbw.append((n, int(value) * 1e9))
    domain = labels.get(f"{prefix}/nvlink-domain")
    rates = figures.gpu_rates if figures else []
    return NodeSummary(
        node=name, product=labels.get(f"{prefix}/gpu.product", "unknown"), gpus=int(count),
        clique=domain if domain and domain != name else None, busbw=tuple(busbw), busbw_source="estimate",
        nvlink_bytes_per_second=min(r for r in rates if r is not None) if rates and None not in rates else None,
        nic_bytes_per_second=figures.nic_bytes_per_second if figures and figures.nics else None)


def read_cluster(api: PageApi, *, prefix: str = "gpu.topology", driver: str = "gpu.topology",
                 limit: int = PAGE) -> ClusterRead:
    """Every labelled node's summary, in pages of ``limit``."""
    restarts: list[int] = []
    count = 0
    labels: dict[str, dict[str, str]] = {}
    for items in pages(api, "/api/v1/nodes", {"labelSelector": f"{prefix}/gpu.count"}, limit=limit,
                       accept=PARTIAL, restarts=restarts):
        count += 1
        for node in items:
            meta = node.get("metadata") or {}
            mine = {k: v for k, v in (meta.get("labels") or {}).items() if k.startswith(prefix + "/")}
            if f"{prefix}/gpu.count" in mine:  # a server that ignores the selector (an emulator) sends them all
                labels[str(meta.get("name"))] = mine
    version = slice_version(api)
    figures: dict[str, _NodeFigures] = {}
    slices: set[str] = set()
    if version is not None:
        path = f"/apis/{RESOURCE_GROUP}/{version}/resourceslices"
        for items in pages(api, path, {"fieldSelector": f"spec.driver={driver}"}, limit=limit, restarts=restarts):
            count += 1
            for obj in items:
                slices.add(str((obj.get("metadata") or {}).get("name")))
                _fold(figures, obj, driver)
    summaries = [s for name in sorted(labels) if (s := summary_of(name, labels[name], prefix, figures.get(name)))]
    return ClusterRead(summaries=tuple(summaries), without_slices=tuple(n for n in sorted(labels) if n not in figures),
                       slices=len(slices), pages=count, slice_version=version, restarts=len(restarts))
