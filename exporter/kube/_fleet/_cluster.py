"""The fleet as topolink published it: every node's labels and its ResourceSlices of our driver, read in pages,
folded into one ``topology.NodeSummary`` per node for ``topology.fleet_report``.

Reading costs what a fleet of 10,000 nodes can afford: both lists are paginated (``limit``/``continue``, so
no response holds the fleet), nodes are asked for as ``PartialObjectMetadataList`` (labels, not status or
images) and only those carrying our ``gpu.count`` label, slices only of our driver; each page is decoded
into just the fields read here (msgspec skips the rest, managedFields and all, without building them),
folded into a few numbers per node and dropped. An expired continue token (410: the list outlived etcd's
compaction) starts that list again once; what was folded is keyed by name, so nothing counts twice.

What a summary says and where it comes from: product, GPU count and NVLink domain from the labels; the best
groups' bus bandwidth from ``allreduce-busbw-N`` (the class's lower edge: an estimate, rounded down); the
GPUs' NVLink rate (the slowest GPU's ``nvlinkCount`` x the rate of its ``nvlinkGen``) and the RDMA NICs'
line rate (their ``rateGbps`` added up) from the slices: theoretical.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec

from topology import NodeSummary, nvlink_bytes_per_second

from .._api._api import RESOURCE_GROUP, SLICE_VERSIONS
from .._api._errors import Expired, InvalidObject, NotFound
from .._desired._busbw import KEY, SIZES
from .._desired._names import own_domain

PAGE = 500
PARTIAL = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"


class PageApi(Protocol):
    def get_page(self, path: str, params: Mapping[str, str], accept: str | None = None) -> bytes: ...

    def served_versions(self, group: str) -> Sequence[str]: ...


# -- the fields read, and only those ------------------------------------------------------------------------

class _ListMeta(msgspec.Struct, frozen=True):
    continue_: str = msgspec.field(default="", name="continue")


class _Meta(msgspec.Struct, frozen=True):
    name: str = ""
    labels: dict[str, str] = {}


class _Node(msgspec.Struct, frozen=True):
    metadata: _Meta = _Meta()


class _NodeList(msgspec.Struct, frozen=True):
    items: list[_Node] = []
    metadata: _ListMeta = _ListMeta()


class _Str(msgspec.Struct, frozen=True):
    string: str | None = None


class _Int(msgspec.Struct, frozen=True):
    value: int | None = msgspec.field(default=None, name="int")


class _Pool(msgspec.Struct, frozen=True):
    generation: int = 0


_ATTRS = (("type", _Str), ("nvlinkCount", _Int), ("nvlinkGen", _Int), ("rateGbps", _Int))


@functools.cache
def _slice_decoder(driver: str) -> msgspec.json.Decoder[Any]:
    """A decoder of slice lists that builds only the four attributes read here, named in ``driver``'s domain;
    every other attribute is skipped as it is parsed."""
    attrs = msgspec.defstruct("Attributes", [(name, kind | None, None) for name, kind in _ATTRS],
                              rename={name: f"{driver}/{name}" for name, _ in _ATTRS}, frozen=True)
    listing: Any = list  # built at run time: subscripted with classes made here, not types mypy can see
    basic = msgspec.defstruct("Basic", [("attributes", attrs, msgspec.field(default_factory=attrs))], frozen=True)
    device = msgspec.defstruct("Device", [("attributes", attrs, msgspec.field(default_factory=attrs)),
                                          ("basic", basic | None, None)], frozen=True)  # v1beta1 wraps them
    spec = msgspec.defstruct("Spec", [("driver", str, ""), ("nodeName", str, ""), ("pool", _Pool, _Pool()),
                                      ("devices", listing[device], msgspec.field(default_factory=list))], frozen=True)
    item = msgspec.defstruct("Slice", [("metadata", _Meta, _Meta()),
                                       ("spec", spec, msgspec.field(default_factory=spec))], frozen=True)
    page = msgspec.defstruct("SliceList", [("items", listing[item], msgspec.field(default_factory=list)),
                                           ("metadata", _ListMeta, _ListMeta())], frozen=True)
    return msgspec.json.Decoder(page)


_NODES = msgspec.json.Decoder(_NodeList)


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
    source: str | None = None  # the saved list read instead of an API server (``cluster --from``)


def pages(api: PageApi, path: str, params: Mapping[str, str], decoder: msgspec.json.Decoder[Any], *,
          limit: int = PAGE, accept: str | None = None, restarts: list[int] | None = None) -> Iterator[list[Any]]:
    """The list's items, one decoded page at a time; once, after 410 Gone, from the start again."""
    token, again = "", True
    while True:
        query = {**params, "limit": str(limit), **({"continue": token} if token else {})}
        try:
            body = api.get_page(path, query, accept)
        except Expired:
            if not token or not again:
                raise
            again, token = False, ""
            if restarts is not None:
                restarts.append(1)
            continue
        try:
            page = decoder.decode(body)
        except msgspec.DecodeError as exc:
            raise InvalidObject(f"GET {path}: not a list of the expected kind: {exc}") from exc
        yield page.items
        token = page.metadata.continue_
        if not token:
            return


def slice_version(api: PageApi) -> str | None:
    try:
        served = set(api.served_versions(RESOURCE_GROUP))
    except NotFound:
        return None
    return next((v for v in SLICE_VERSIONS if v in served), None)


def _fold(figures: dict[str, _NodeFigures], obj: Any, driver: str) -> None:
    """``obj``: a slice as ``_slice_decoder`` decodes it."""
    spec = obj.spec
    if not spec.nodeName or spec.driver != driver:
        return
    got = figures.setdefault(spec.nodeName, _NodeFigures())
    if spec.pool.generation < got.generation:
        return  # a slice of an older generation of the pool: consumers ignore it, so do we
    if spec.pool.generation > got.generation:
        figures[spec.nodeName] = got = _NodeFigures(generation=spec.pool.generation)
    if obj.metadata.name in got.slices:
        return
    got.slices.add(obj.metadata.name)
    for device in spec.devices:
        attrs = device.basic.attributes if device.basic is not None else device.attributes
        kind = attrs.type.string if attrs.type else None
        if kind == "gpu":
            count = attrs.nvlinkCount.value if attrs.nvlinkCount else None
            gen = attrs.nvlinkGen.value if attrs.nvlinkGen else None
            rate = nvlink_bytes_per_second(gen, count) if count is not None and gen is not None else None
            got.gpu_rates.append(rate or None)
        elif kind == "nic" and attrs.rateGbps and attrs.rateGbps.value is not None:
            got.nic_bytes_per_second += attrs.rateGbps.value * 1e9 / 8
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
        clique=domain if domain and domain not in (name, own_domain(name)) else None, busbw=tuple(busbw),
        busbw_source="estimate",
        nvlink_bytes_per_second=min(r for r in rates if r is not None) if rates and None not in rates else None,
        nic_bytes_per_second=figures.nic_bytes_per_second if figures and figures.nics else None)


def read_cluster(api: PageApi, *, prefix: str = "gpu.topology", driver: str = "gpu.topology",
                 limit: int = PAGE) -> ClusterRead:
    """Every labelled node's summary, in pages of ``limit``."""
    restarts: list[int] = []
    count = 0
    labels: dict[str, dict[str, str]] = {}
    mark = prefix + "/"
    for nodes in pages(api, "/api/v1/nodes", {"labelSelector": f"{prefix}/gpu.count"}, _NODES, limit=limit,
                       accept=PARTIAL, restarts=restarts):
        count += 1
        for node in nodes:
            mine = {k: v for k, v in node.metadata.labels.items() if k.startswith(mark)}
            if f"{prefix}/gpu.count" in mine:  # a server that ignores the selector (an emulator) sends them all
                labels[node.metadata.name] = mine
    version = slice_version(api)
    figures: dict[str, _NodeFigures] = {}
    slices: set[str] = set()
    if version is not None:
        path = f"/apis/{RESOURCE_GROUP}/{version}/resourceslices"
        for items in pages(api, path, {"fieldSelector": f"spec.driver={driver}"}, _slice_decoder(driver), limit=limit,
                           restarts=restarts):
            count += 1
            for obj in items:
                if obj.spec.driver == driver:  # a saved list (or a server ignoring the selector) has the others'
                    slices.add(obj.metadata.name)
                _fold(figures, obj, driver)
    summaries = [s for name in sorted(labels) if (s := summary_of(name, labels[name], prefix, figures.get(name)))]
    return ClusterRead(summaries=tuple(summaries), without_slices=tuple(n for n in sorted(labels) if n not in figures),
                       slices=len(slices), pages=count, slice_version=version, restarts=len(restarts))
