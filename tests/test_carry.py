"""carry_forward: unknown facts take their last known value; known facts are never replaced."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import topology as t
from tests.budget import examples
from tests.probe_snapshots import G0, G1, G2, G3, NIC, four_gpu_box
from topology import replace
from topology.model._carry_forward import carry_forward

GPU_ASPECTS = (t.Aspect.IDENTITY, t.Aspect.PCIE_LINK, t.Aspect.NUMA, t.Aspect.FABRIC, t.Aspect.MIG,
               t.Aspect.NVLINKS, t.Aspect.ALL)


def previous() -> t.Snapshot:
    snap = four_gpu_box()
    fabric = t.FabricInfo(state=t.FabricState.COMPLETED, cluster_uuid="c", clique_id=1)
    gpus = tuple(replace(g, uuid=f"GPU-old-{i}", name="H100", fabric=fabric, mig_enabled=False)
                 for i, g in enumerate(snap.gpus))
    nic = t.Nic(id=NIC, name="mlx5_0", pci_bus_id=NIC, rdma=True, numa_node=0,
                ports=(t.NicPort(number=1, state="ACTIVE", rate_gbps=400.0),))
    return replace(snap, gpus=gpus, nics=(nic,), versions=(("driver", "550"),),
                               gdr=t.GdrFacts(peermem_loaded=True))


def changed(snap: t.Snapshot) -> t.Snapshot:
    """Every value different from ``previous()``: what a pass that guessed would put there."""
    x4 = t.PcieLinkState(current_gen=1, current_width=4, max_gen=1, max_width=4)
    gpus = tuple(replace(g, uuid=None, name=None, pcie=x4, numa_node=None, cpu_affinity=(),
                                     fabric=None, mig_enabled=None) for g in snap.gpus)
    nics = tuple(replace(n, ports=(), numa_node=None) for n in snap.nics)
    links = tuple(lk for lk in snap.links if lk.kind is not t.LinkKind.NVLINK)
    return replace(snap, gpus=gpus, nics=nics, links=links, versions=(), gdr=t.GdrFacts())


def with_unknown(snap: t.Snapshot, *facts: t.Fact) -> t.Snapshot:
    problem = t.Problem(source="nvml", subject="test", message="could not read", unknown=facts)
    return replace(snap, problems=(*snap.problems, problem))


def value(snap: t.Snapshot, fact: t.Fact) -> Any:
    """What a sink would read for ``fact``."""
    if fact.subject == t.NODE:
        return {t.Aspect.GDR: snap.gdr, t.Aspect.VERSIONS: snap.versions,
                t.Aspect.GPUS: sorted(g.id for g in snap.gpus), t.Aspect.NUMA: snap.numa_nodes}[fact.aspect]
    if fact.aspect is t.Aspect.NVLINKS:
        return sorted(lk.id for lk in snap.links if lk.kind is t.LinkKind.NVLINK and fact.subject in (lk.a, lk.b))
    gpu = next((g for g in snap.gpus if g.id == fact.subject), None)
    if gpu is None:
        nic = next(n for n in snap.nics if n.id == fact.subject)
        return nic.ports if fact.aspect is t.Aspect.PORTS else nic
    fields = {t.Aspect.IDENTITY: (gpu.uuid, gpu.name), t.Aspect.PCIE_LINK: gpu.pcie,
              t.Aspect.NUMA: (gpu.numa_node, gpu.cpu_affinity), t.Aspect.FABRIC: gpu.fabric,
              t.Aspect.MIG: gpu.mig_enabled, t.Aspect.ALL: gpu}
    return fields[fact.aspect]


def test_no_previous_or_nothing_unknown_serves_current_as_is() -> None:
    cur = changed(previous())
    assert carry_forward(None, with_unknown(cur, t.Fact(subject=G0, aspect=t.Aspect.NVLINKS))).links == cur.links
    assert carry_forward(previous(), cur) is cur


def test_unknown_nvlinks_of_one_gpu_are_carried_and_stay_marked_unknown() -> None:
    fact = t.Fact(subject=G0, aspect=t.Aspect.NVLINKS)
    cur = with_unknown(changed(previous()), fact)
    served = carry_forward(previous(), cur)
    assert fact in served.unknown and not served.complete
    # G2-G3's NVLinks were known (gone) in the current pass: not carried.
    assert value(served, t.Fact(subject=G2, aspect=t.Aspect.NVLINKS)) == []


def test_link_known_from_its_other_end_is_not_carried() -> None:
    # G0's NVLinks are unknown, G1's are known (none now): the G0-G1 link is a fact of G1 too.
    cur = with_unknown(changed(previous()), t.Fact(subject=G0, aspect=t.Aspect.NVLINKS))
    served = carry_forward(previous(), cur)
    assert [lk for lk in served.links if {lk.a, lk.b} == {G0, G1}] == []
    # both ends unknown: the link is carried
    both = with_unknown(cur, t.Fact(subject=G1, aspect=t.Aspect.NVLINKS))
    assert [lk.count for lk in carry_forward(previous(), both).links if {lk.a, lk.b} == {G0, G1}] == [4]


def test_missing_gpus_are_readded_when_the_gpu_list_is_unknown() -> None:
    prev = previous()
    cur = with_unknown(replace(prev, gpus=prev.gpus[:2]), t.node_fact(t.Aspect.GPUS))
    served = carry_forward(prev, cur)
    assert [g.id for g in served.gpus] == [G0, G1, G2, G3]
    assert value(served, t.Fact(subject=G3, aspect=t.Aspect.NVLINKS)) == value(prev, t.Fact(
        subject=G3, aspect=t.Aspect.NVLINKS))


def test_missing_gpu_stays_gone_when_the_gpu_list_is_known() -> None:
    prev = previous()
    cur = replace(prev, gpus=prev.gpus[:2], problems=())
    cur = with_unknown(cur, t.Fact(subject=G0, aspect=t.Aspect.IDENTITY))
    assert [g.id for g in carry_forward(prev, cur).gpus] == [G0, G1]


def test_node_numa_gdr_versions_pci() -> None:
    prev = previous()
    cur = replace(changed(prev), numa_nodes=(), pci=(), host_bridges=())
    cur = with_unknown(cur, *(t.node_fact(a) for a in (t.Aspect.NUMA, t.Aspect.GDR, t.Aspect.VERSIONS,
                                                       t.Aspect.PCI)))
    served = carry_forward(prev, cur)
    assert served.numa_nodes == prev.numa_nodes and served.gdr == prev.gdr and served.versions == prev.versions
    assert served.pci == prev.pci
    # node-wide NUMA unknown implies every GPU's NUMA facts unknown: carried too
    assert [g.numa_node for g in served.gpus] == [g.numa_node for g in prev.gpus]


def test_whole_device_and_nic_ports() -> None:
    prev = previous()
    cur = with_unknown(changed(prev), t.Fact(subject=G1, aspect=t.Aspect.ALL),
                       t.Fact(subject=NIC, aspect=t.Aspect.PORTS))
    served = carry_forward(prev, cur)
    assert next(g for g in served.gpus if g.id == G1) == prev.gpus[1]
    assert served.nics[0].ports == prev.nics[0].ports and served.nics[0].numa_node is None


def test_fact_unknown_before_too_keeps_the_current_value() -> None:
    fact = t.Fact(subject=G0, aspect=t.Aspect.IDENTITY)
    prev = with_unknown(previous(), fact)
    cur = with_unknown(changed(previous()), fact)
    assert value(carry_forward(prev, cur), fact) == value(cur, fact)


FACTS = st.sets(st.builds(t.Fact, subject=st.sampled_from((G0, G1, G2, G3)), aspect=st.sampled_from(GPU_ASPECTS))
                | st.builds(t.Fact, subject=st.just(NIC), aspect=st.just(t.Aspect.PORTS))
                | st.builds(t.Fact, subject=st.just(t.NODE),
                            aspect=st.sampled_from((t.Aspect.GDR, t.Aspect.VERSIONS, t.Aspect.GPUS))),
                max_size=8)


@settings(max_examples=examples(60, 600), deadline=None)
@given(unknown_now=FACTS, unknown_before=FACTS)
def test_known_facts_are_never_replaced_and_unknown_ones_are_previous(
        unknown_now: set[t.Fact], unknown_before: set[t.Fact]) -> None:
    prev = with_unknown(previous(), *sorted(unknown_before))
    cur = with_unknown(changed(previous()), *sorted(unknown_now))
    served = carry_forward(prev, cur)
    now, before = t.Knowledge(cur.unknown), t.Knowledge(prev.unknown)
    probe = [t.Fact(subject=s, aspect=a) for s in (G0, G1, G2, G3) for a in GPU_ASPECTS]
    probe += [t.Fact(subject=NIC, aspect=t.Aspect.PORTS)]
    probe += [t.node_fact(a) for a in (t.Aspect.GDR, t.Aspect.VERSIONS)]
    for fact in probe:
        if fact.aspect in (t.Aspect.NVLINKS, t.Aspect.ALL):
            continue  # shared with the other end / composite: checked below
        if now.knows(fact.subject, fact.aspect):
            assert value(served, fact) == value(cur, fact), fact
        elif before.knows(fact.subject, fact.aspect):
            assert value(served, fact) == value(prev, fact), fact
    for link in served.links:  # every NVLink served is current's or was known before with no end knowing now
        if link.kind is not t.LinkKind.NVLINK or link in cur.links:
            continue
        ends = [e for e in (link.a, link.b) if e in {G0, G1, G2, G3}]
        assert not any(now.knows(e, t.Aspect.NVLINKS) for e in ends)
        assert any(before.knows(e, t.Aspect.NVLINKS) for e in ends)
    for gpu in served.gpus:  # a whole device unknown now and known before is previous's record
        if not now.knows(gpu.id, t.Aspect.ALL) and before.knows(gpu.id, t.Aspect.ALL):
            assert gpu == next(g for g in prev.gpus if g.id == gpu.id)
    assert served.problems == cur.problems
