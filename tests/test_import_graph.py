"""Imports go one way inside every package, as between them: no module imports one that imports it back,
directly or round a loop. Imports inside functions and under TYPE_CHECKING count too (grimp reads them all);
a name loaded through ``importlib`` by string is outside what this can see, and the layers contracts in
pyproject.toml (``lint-imports``) state the direction of the layers."""

from __future__ import annotations

import grimp
import pytest

PACKAGES = ("topology", "agent", "probes", "exporter")


def cycles(graph: grimp.ImportGraph, package: str) -> list[list[str]]:
    """Strongly connected components of more than one module (or a module importing itself): Tarjan's."""
    modules = sorted(m for m in graph.modules if m == package or m.startswith(package + "."))
    inside = set(modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) & inside) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:  # iterative: no recursion limit on long chains
        work = [(start, iter(edges[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1 or node in edges[node]:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(edges[child])))
            elif child in on_stack:
                low[node] = min(low[node], index[child])

    for module in modules:
        if module not in index:
            visit(module)
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle_inside_the_package(package: str) -> None:
    graph = grimp.build_graph(package)
    found = cycles(graph, package)
    described = []
    for component in found:
        chain = graph.find_shortest_chain(importer=component[0], imported=component[-1])
        back = graph.find_shortest_chain(importer=component[-1], imported=component[0])
        described.append(f"{' -> '.join(chain or ())} and back: {' -> '.join(back or ())}")
    assert described == []


def test_the_cycle_finder_finds_a_loop() -> None:
    graph = grimp.ImportGraph()
    for module in ("pkg", "pkg.a", "pkg.b", "pkg.c"):
        graph.add_module(module)
    graph.add_import(importer="pkg.a", imported="pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.c")
    graph.add_import(importer="pkg.c", imported="pkg.a")
    assert cycles(graph, "pkg") == [["pkg.a", "pkg.b", "pkg.c"]]
