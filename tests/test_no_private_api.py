"""No private module or attribute of CPython or of a library anywhere in the packages.

Each package module is read with ``ast``. Forbidden: importing a module with a private part in its name
(``_ctypes``, ``_json``, ``_thread``, ``json._x``) or a private name from a module not ours (``from json import
_x``); and reading, writing or asking for (``getattr``/``setattr``/``hasattr``/``delattr`` with a literal
name) a private attribute that none of our modules defines (``parser._actions``, ``sys._getframe``,
``pynvml._nvmlGetFunctionPointer_cache``). Private names of our own are fine: relative imports, our
packages' ``_``-modules, and every attribute name our sources define (a function, a class, an assignment,
an import alias, a ``__slots__`` entry). Dunder names, ctypes' and enum's ``_sunder_`` names and the named
tuple's documented methods are public.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("topology", "agent", "probes", "exporter")
# Public although they start with "_": documented methods of collections.namedtuple, and os._exit.
DOCUMENTED = frozenset({"_replace", "_asdict", "_fields", "_make", "_field_defaults", "_exit"})
_ACCESSORS = frozenset({"getattr", "setattr", "hasattr", "delattr"})


def _private(name: str) -> bool:
    dunder = name.startswith("__") and name.endswith("__")
    sunder = len(name) > 2 and name.startswith("_") and name.endswith("_") and not name.startswith("__")
    return name.startswith("_") and not dunder and not sunder and name not in DOCUMENTED


def _sources() -> dict[str, ast.Module]:
    return {str(p.relative_to(REPO)): ast.parse(p.read_text(encoding="utf-8"), str(p))
            for package in PACKAGES for p in sorted((REPO / package).rglob("*.py"))}


def _ours(module: str) -> bool:
    return module.split(".", maxsplit=1)[0] in PACKAGES


def _defined(trees: dict[str, ast.Module]) -> set[str]:
    """Every name our sources define, wherever: what an attribute of ours may be called."""
    names: set[str] = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store | ast.Del)
                  and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                names.add(node.attr)
            elif isinstance(node, ast.alias):
                names.add(node.asname or node.name.split(".")[-1])
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__"
                                                      for t in node.targets):
                names |= {c.value for c in ast.walk(node.value)
                          if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    return names


def _foreign_private(tree: ast.Module, ours: set[str]) -> Iterator[tuple[int, str, str]]:
    """(line, what, the private name) for each use of a private name not ours."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not _ours(alias.name) and any(_private(part) for part in alias.name.split(".")):
                    yield node.lineno, f"import {alias.name}", alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and not _ours(node.module):
            if any(_private(part) for part in node.module.split(".")):
                yield node.lineno, f"from {node.module} import ...", node.module
            for alias in node.names:
                if _private(alias.name):
                    yield node.lineno, f"from {node.module} import {alias.name}", alias.name
        elif isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in ours:
            yield node.lineno, ast.unparse(node), node.attr
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _ACCESSORS
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
              and isinstance(node.args[1].value, str) and _private(node.args[1].value)
              and node.args[1].value not in ours):
            yield node.lineno, f"{node.func.id}(..., {node.args[1].value!r})", node.args[1].value


def test_no_private_module_or_attribute_of_cpython_or_a_library() -> None:
    trees = _sources()
    ours = _defined(trees)
    found = [f"{path}:{line}: {what}" for path, tree in trees.items()
             for line, what, _name in _foreign_private(tree, ours)]
    assert found == [], "private API of CPython or a library:\n" + "\n".join(found)


@pytest.mark.parametrize(("source", "what"), [
    ("from _ctypes import dlopen", "from _ctypes import ..."),
    ("import _json", "import _json"),
    ("from _thread import allocate_lock", "from _thread import ..."),
    ("from json.encoder import _make_iterencode", "from json.encoder import _make_iterencode"),
    ("import argparse\nargparse._SubParsersAction", "argparse._SubParsersAction"),
    ("parser._actions.append(1)", "parser._actions"),
    ("sub._parser_class = object", "sub._parser_class"),
    ("getattr(pynvml, '_nvmlGetFunctionPointer_cache')", "getattr(..., '_nvmlGetFunctionPointer_cache')"),
])
def test_each_kind_of_private_use_is_found(source: str, what: str) -> None:
    found = [w for _, w, _ in _foreign_private(ast.parse(source), set())]
    assert found == [what]


@pytest.mark.parametrize("source", [
    "from ._record import x", "from topology._codec import dumps", "import agent.cli._common",
    "self._lock.acquire()", "row._replace(a=1)", "os._exit(0)", "words._type_", "x.__class__",
    "from __future__ import annotations",
])
def test_our_own_and_the_documented_names_are_allowed(source: str) -> None:
    assert list(_foreign_private(ast.parse(source), {"_lock"})) == []
