"""``record``: the model's frozen, slotted, keyword-only classes, built without the ``dataclasses`` module.

``dataclasses.dataclass`` compiles the source of each generated method, one ``exec`` each (``__init__``,
``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``, and again for the slotted copy), and
importing ``dataclasses`` loads ``inspect`` with ``ast``, ``dis`` and ``tokenize``: together more than the
discovery itself costs. Here ``__init__`` is compiled once per shape (field count, keyword-only or not,
``__post_init__``, which fields have factories) and its code given each class's field names; ``__repr__``, ``__eq__``,
``__hash__``, the frozen ``__setattr__``/``__delattr__`` and pickling are shared (:class:`Record`), reading the
fields through one ``operator.attrgetter`` per class. They behave as the generated ones do: same text, equal
only to the same class, the hash of the field values, ``dataclasses.FrozenInstanceError`` on assignment.

A record is still a dataclass: ``__dataclass_fields__`` and ``__dataclass_params__`` are made on first use (the
``dataclasses`` module imported then), so ``dataclasses.replace``, ``fields``, ``asdict`` and
``is_dataclass`` work on it unchanged. :func:`replace` and :func:`field_names` do the same for records alone
without importing it. ``msgspec.Struct`` was measured too (``benchmarks/codec.py``): its classes are created
in microseconds, but importing msgspec costs as much as these records did (it loads ``typing``, ``inspect``,
``pathlib``), and it is third-party code (house rule 2).
"""

from __future__ import annotations

import reprlib
from operator import attrgetter

_MISSING = object()  # no default given
TYPE_CHECKING = False  # not typing's: importing typing costs ~5 ms of start-up; mypy reads it as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from dataclasses import field
    from typing import Any, TypeVar, dataclass_transform, overload

    T = TypeVar("T")
else:
    def dataclass_transform(**_: object) -> object:  # what mypy reads only: at run time, nothing
        return lambda f: f

    def overload(f: object) -> object:  # the same: the definition that follows replaces it
        return f

    def field(*, default: object = _MISSING, default_factory: object = _MISSING) -> object:
        """``dataclasses.field`` for records (mypy checks it as that), with ``default`` or ``default_factory``."""
        if default is not _MISSING and default_factory is not _MISSING:
            raise ValueError("cannot specify both default and default_factory")
        return _Spec(default, default_factory)

class _Spec:
    """What ``field(...)`` gives at run time: a default or a factory of defaults."""

    __slots__ = ("default", "default_factory")

    def __init__(self, default: object, default_factory: object) -> None:
        self.default, self.default_factory = default, default_factory


__all__ = ["Record", "field", "field_names", "record", "replace"]


class _Dataclass:
    """``__dataclass_fields__`` or ``__dataclass_params__`` of a record, made on first use by running
    ``dataclasses.dataclass`` on a plain copy of its declaration, then kept on the class."""

    def __init__(self, attr: str) -> None:
        self.attr = attr

    def __get__(self, obj: object, owner: type) -> Any:
        if "_names" not in owner.__dict__:  # Record itself is not a dataclass
            raise AttributeError(self.attr)
        import dataclasses  # only where a record is asked for as a dataclass

        body: dict[str, object] = {"__annotations__": owner.__dict__["_annotations"]}
        for name, spec in owner.__dict__["_specs"].items():
            body[name] = spec.default if spec.default_factory is _MISSING else \
                dataclasses.field(default_factory=spec.default_factory)
        order = owner.__dict__["_order"]  # dataclass() orders only what it compares
        shadow: Any = dataclasses.dataclass(frozen=True, kw_only=owner.__dict__["_kw_only"], repr=False, eq=order,
                                            order=order)(
            type(owner.__name__, (), body))
        for attr in ("__dataclass_fields__", "__dataclass_params__"):
            setattr(owner, attr, getattr(shadow, attr))
        return getattr(owner, self.attr)


class Record:
    """The shared methods of every record; ``_values`` (set per class) gives its field values as a tuple."""

    __slots__ = ()
    __dataclass_fields__ = _Dataclass("__dataclass_fields__")
    __dataclass_params__ = _Dataclass("__dataclass_params__")
    if TYPE_CHECKING:  # set per class by ``record``; not annotations at run time (type hints stay the fields')
        _values: Callable[[Any], tuple[Any, ...]]
        _names: tuple[str, ...]

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._values(self) == self._values(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._values(self))

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        body = ", ".join(f"{n}={v!r}" for n, v in zip(self._names, self._values(self), strict=True))
        return f"{self.__class__.__qualname__}({body})"

    def __setattr__(self, name: str, value: object) -> None:
        raise _frozen(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise _frozen(f"cannot delete field {name!r}")

    def __getstate__(self) -> tuple[Any, ...]:
        return self._values(self)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        for name, value in zip(self._names, state, strict=True):
            object.__setattr__(self, name, value)


def _frozen(message: str) -> AttributeError:
    import dataclasses  # only on the error path

    return dataclasses.FrozenInstanceError(message)


_Function: Any = type(lambda: None)  # types.FunctionType
_TEMPLATES: dict[tuple[int, bool, bool, tuple[int, ...]], Any] = {}  # shape -> the code of its __init__


def _template(n: int, kw_only: bool, post_init: bool, factories: tuple[int, ...]) -> Any:
    """The code of an ``__init__`` of ``n`` fields named ``_pI_``, compiled once per shape: each field stored
    by ``object.__setattr__`` past the frozen one, as dataclasses does (faster than the slot's descriptor)."""
    lines = []
    for i in range(n):
        if i in factories:
            lines.append(f" if _p{i}_ is _MISSING: _p{i}_ = _f{i}()")
        lines.append(f" _set(self, '_p{i}_', _p{i}_)")
    if post_init:
        lines.append(" self.__post_init__()")
    star = "*, " if kw_only and n else ""
    source = f"def __init__(self, {star}{', '.join(f'_p{i}_' for i in range(n))}):\n" + "\n".join(lines or [" pass"])
    scope: dict[str, Any] = {}
    exec(source, scope)  # our own text, built from a count
    return scope["__init__"].__code__


def _init(cls: type, names: tuple[str, ...], specs: dict[str, Any], kw_only: bool
          ) -> Callable[..., None]:
    """The class's ``__init__``: keyword-only parameters (or positional ones too), defaults as given,
    factories called per instance. Compiling one costs more than building the rest of the class, so the code
    is compiled once per shape (field count, keyword-only, ``__post_init__``, which fields have factories)
    and given the class's names."""
    scope: dict[str, object] = {"_MISSING": _MISSING, "_set": object.__setattr__}
    defaults: dict[str, object] = {}
    factories = []
    for i, name in enumerate(names):
        spec = specs.get(name)
        if spec is None:
            if defaults and not kw_only:
                raise TypeError(f"record {cls.__qualname__}: non-default argument {name!r} follows default argument")
        elif spec.default_factory is not _MISSING:
            scope[f"_f{i}"] = spec.default_factory
            defaults[name] = _MISSING
            factories.append(i)
        else:
            defaults[name] = spec.default
    key = (len(names), kw_only, "__post_init__" in cls.__dict__, tuple(factories))
    template = _TEMPLATES.get(key)
    if template is None:
        template = _TEMPLATES[key] = _template(*key)
    named = {f"_p{i}_": name for i, name in enumerate(names)}
    code = template.replace(co_varnames=("self", *names), co_qualname=f"{cls.__qualname__}.__init__",
                            co_consts=tuple(named.get(c, c) if type(c) is str else c for c in template.co_consts))
    init: Any = _Function(code, scope)
    if kw_only:
        init.__kwdefaults__ = defaults or None
    else:
        init.__defaults__ = tuple(defaults.values()) or None
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init  # type: ignore[no-any-return]


def _lt(a: Record, b: object) -> bool:
    return a._values(a) < a._values(b) if b.__class__ is a.__class__ else NotImplemented


def _le(a: Record, b: object) -> bool:
    return a._values(a) <= a._values(b) if b.__class__ is a.__class__ else NotImplemented


def _gt(a: Record, b: object) -> bool:
    return a._values(a) > a._values(b) if b.__class__ is a.__class__ else NotImplemented


def _ge(a: Record, b: object) -> bool:
    return a._values(a) >= a._values(b) if b.__class__ is a.__class__ else NotImplemented


def _is_classvar(annotation: object) -> bool:
    return isinstance(annotation, str) and annotation.startswith(("ClassVar", "typing.ClassVar"))


@overload
def record(cls: type[T], /) -> type[T]: ...
@overload
def record(*, kw_only: bool = True, order: bool = False) -> Callable[[type[T]], type[T]]: ...  # noqa: F811
@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(field,))
def record(  # noqa: F811 -- at run time the overloads above are replaced by this definition
        cls: type[T] | None = None, /, *, kw_only: bool = True, order: bool = False
) -> type[T] | Callable[[type[T]], type[T]]:
    """``@dataclass(frozen=True, slots=True, kw_only=True)``, with the shared methods of :class:`Record`,
    which the class is made to derive from. Fields take a default or ``field(default_factory=...)``.
    ``@record(kw_only=False)`` takes positional arguments too, ``@record(order=True)`` orders by the fields."""
    if cls is None:
        return lambda c: _build(c, kw_only, order)
    return _build(cls, kw_only, order)


def _build(cls: type[T], kw_only: bool, order: bool) -> type[T]:
    if cls.__bases__ != (object,):
        raise TypeError(f"record {cls.__qualname__}: a record derives from nothing")
    annotations: dict[str, object] = dict(cls.__dict__.get("__annotations__", {}))  # noqa: RUF063 -- no inspect
    names = tuple(n for n, a in annotations.items() if not _is_classvar(a))
    body = {k: v for k, v in cls.__dict__.items() if k not in ("__dict__", "__weakref__", *names)}
    specs: dict[str, Any] = {}
    for name in names:
        if name in cls.__dict__:
            value = cls.__dict__[name]
            specs[name] = value if isinstance(value, _Spec) else _Spec(value, _MISSING)
    body.update(__slots__=names, __match_args__=() if kw_only else names, _annotations=annotations, _specs=specs,
                _names=names, _kw_only=kw_only, _order=order)
    if order:
        body.update(__lt__=_lt, __le__=_le, __gt__=_gt, __ge__=_ge)
    made: Any = type(cls.__name__, (Record,), body)
    made.__qualname__ = cls.__qualname__
    made.__init__ = _init(made, names, specs, kw_only)
    get = attrgetter(*names) if names else (lambda o: ())
    made._values = staticmethod(get if len(names) != 1 else lambda o: (get(o),))
    return made  # type: ignore[no-any-return]


def field_names(cls: type) -> tuple[str, ...] | None:
    """The field names of a record class, or None for any other class (without importing ``dataclasses``)."""
    return cls.__dict__.get("_names") if isinstance(cls, type) and issubclass(cls, Record) else None


if TYPE_CHECKING:  # mypy checks the changes against the fields
    from dataclasses import replace
else:
    def replace(obj, /, **changes):
        """``dataclasses.replace`` for a record: a copy with the fields named changed (a TypeError for others)."""
        names = obj._names
        unknown = changes.keys() - set(names)
        if unknown:
            raise TypeError(f"{obj.__class__.__qualname__}.__init__() got an unexpected keyword argument "
                            f"{sorted(unknown)[0]!r}")
        return obj.__class__(**{n: changes[n] if n in changes else getattr(obj, n) for n in names})
