"""Live readings against the physics table (``topology.fabric._physics_rules``): a rate, generation, width or
NVLink count the hardware cannot have is a problem naming it, and the fact is unknown. The rules are the
ones that refuse a saved snapshot breaking them, so what discovery writes, the reader reads. Pure."""

from __future__ import annotations

from topology import Problem, Snapshot, facts_of, physics_breaches


def physics(snap: Snapshot) -> list[Problem]:
    return [Problem(source=b.source, subject=",".join(b.subjects), message=f"{b.where.removeprefix('snapshot.')}: "
                    f"{b.message} (physics table): {b.aspect.value} unknown",
                    unknown=tuple(f for s in b.subjects for f in facts_of(s, b.aspect)))
            for b in physics_breaches(snap)]
