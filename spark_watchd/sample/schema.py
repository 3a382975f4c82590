"""trace-v1 records, declared once: each field's key, kind, range, need and doc, and what is made from that.

A record is a class whose fields are declared with `key(...)`, `counters(...)`, `records(...)`... (the
field's name is its trace key). `traced` turns it into a frozen slots dataclass and makes, from that one
declaration alone:

- `to_dict()`: the trace object, every key in field order, an `optional` key only when it is set;
- `from_dict(d)`: a missing or null key is its default; another type is converted as its kind says
  (`strict` records raise ShapeError naming the key instead);
- `check(d, where)`: the validator, raising FieldError naming the first bad field (`gpus[0].power_w`);
- `fast(d)`: the one-pass reader of the shape every writer emits, checking and building in one generated
  function; None (or KeyError, TypeError...) for anything else, where check and from_dict decide.

This module is the only one that generates code. A field is added by declaring it; nothing else lists it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from operator import itemgetter
from typing import Any

from spark_watchd.sample.validate import FieldError, check_counters, counters_ok, show

_STR_ONLY = {str}


class ShapeError(TypeError, ValueError):
    """from_dict of a strict record given a value of the wrong type; the message names the key."""


@dataclasses.dataclass(frozen=True)
class Kind:
    """What values a scalar field takes: the exact JSON types, the validators' word, from_dict's conversion."""

    word: str
    types: tuple[type, ...]
    convert: Callable[[Any], Any] | None  # None: kept as given (70 stays 70, 70.5 stays 70.5)


INT = Kind("an integer", (int,), int)
NUM = Kind("a number", (int, float), None)
FLOAT = Kind("a number", (int, float), float)  # always a float in the record (a trace's 5 reads 5.0)
STR = Kind("a string", (str,), str)
BOOL = Kind("true or false", (bool,), bool)


@dataclasses.dataclass(frozen=True)
class Spec:
    """One field's declaration (the dataclass field's metadata)."""

    doc: str
    kind: Kind | None = None  # a scalar; None for the structured shapes below
    lo: float | None = None
    hi: float | None = None
    need: bool = False  # the validator refuses a missing or null value
    optional: bool = False  # added after trace-v1 began: written only when set, absent in older traces
    choices: tuple = ()  # the only values allowed (a null too is refused)
    shape: str = "scalar"  # scalar, counters, strings, object, records, record
    record: Any = None  # the record class of `records`/`record`
    nullable: bool = False  # counters: a counter the driver does not give is null
    check: Callable | None = None  # a custom validator(v, where) of `object`/`records`/`record`
    key: str = ""  # filled in by traced: the field's name
    default: Any = None


def _field(spec: Spec, default: Any = None, factory: Any = None):
    if spec.need:
        return dataclasses.field(metadata={"trace": spec})
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata={"trace": spec})
    return dataclasses.field(default=default, metadata={"trace": spec})


def key(kind: Kind, lo=None, hi=None, *, doc: str, default=None, need=False, optional=False, choices=()):
    """A scalar field: its kind, its range [lo, hi] (None: any), and its default when absent or null."""
    return _field(Spec(doc, kind, lo, hi, need, optional, tuple(choices)), default)


def counters(lo: int, hi: int, *, doc: str, nullable=False, default=None):
    """An object of integer counters (meminfo, vmstat, clocks-event counters) in [lo, hi]."""
    spec = Spec(doc, None, lo, hi, shape="counters", nullable=nullable)
    return _field(spec, factory=dict) if default is not None else _field(spec)


def strings(*, doc: str):
    """A list of strings, held as a tuple (a process's argv)."""
    return _field(Spec(doc, shape="strings"), ())


def obj(check: Callable, *, doc: str):
    """An object this module does not look into: `check(v, where)` validates it; held as given."""
    return _field(Spec(doc, shape="object", check=check))


def records(cls, *, doc: str, optional=False, check=None):
    """A list of records of `cls` (a traced class, or one with its own from_dict and `check`)."""
    return _field(Spec(doc, shape="records", record=cls, optional=optional, check=check), ())


def record(cls, *, doc: str, check=None):
    """One optional record of `cls`, absent when not sampled; `check(v, where)` validates it (without one,
    a bad value is what cls.from_dict refuses)."""
    return _field(Spec(doc, shape="record", record=cls, optional=True, check=check))


def specs(cls) -> tuple[Spec, ...]:
    """The declarations of a traced class's fields, in field order."""
    return cls.__trace_specs__


# ---- the validator: a FieldError naming the field, with the messages trace readers have always given


def _check_value(s: Spec, v: Any, name: str) -> None:
    if s.choices:
        if v not in s.choices:
            raise FieldError(name, f"must be {' or '.join(map(repr, s.choices))}, got {show(v)}")
    elif s.shape == "scalar":
        if type(v) not in s.kind.types:
            raise FieldError(name, f"must be {s.kind.word} or null, got {type(v).__name__} {show(v)}")
        if s.lo is not None and not s.lo <= v <= s.hi:
            raise FieldError(name, f"out of range [{s.lo}, {s.hi:g}]: {show(v)}")
    elif s.shape == "counters":
        check_counters(v, name, s.lo, s.hi, s.nullable)
    elif s.shape == "strings":
        if type(v) is not list or not set(map(type, v)) <= _STR_ONLY:
            raise FieldError(name, "must be a list of strings")
    elif s.shape == "records":
        if type(v) is not list:
            raise FieldError(name, f"must be a list, got {type(v).__name__}")
        item_check = s.check or s.record.check
        for i, item in enumerate(v):
            item_check(item, f"{name}[{i}]")
    elif s.check is not None or s.shape == "record" and hasattr(s.record, "check"):
        (s.check or s.record.check)(v, name)  # an object, a record (without a check: its from_dict's)


def _check(cls, d: Any, where: str) -> None:
    if type(d) is not dict:
        raise FieldError(where, f"must be an object, got {type(d).__name__}")
    for s in cls.__trace_specs__:
        name = f"{where}.{s.key}" if where else s.key
        v = d.get(s.key, s.default) if s.choices else d.get(s.key)
        if v is None and not s.choices:
            if s.need:
                raise FieldError(name, "missing")
            continue
        _check_value(s, v, name)


# ---- from_dict and to_dict


def _fresh(s: Spec) -> Any:
    return {} if type(s.default) is dict else s.default


def _shape_error(cls, s: Spec, v: Any, word: str) -> ShapeError:
    null = " or null" if s.default is None and not s.need else ""
    return ShapeError(f"{cls.__trace_name__}'{s.key}' must be {word}{null}, got {type(v).__name__}")


def _from_dict(cls, d):
    strict, values = cls.__trace_strict__, []
    for s in cls.__trace_specs__:
        if s.choices:
            v = d.get(s.key, s.default)
            if v not in s.choices:
                raise ShapeError(f"{cls.__trace_name__}'{s.key}' must be {' or '.join(s.choices)}, got {v!r}")
        elif (v := d[s.key] if s.need else d.get(s.key)) is None and not s.need:
            v = _fresh(s)
        elif s.shape == "scalar":
            if type(v) not in s.kind.types:
                if strict:
                    raise _shape_error(cls, s, v, s.kind.word)
                v = v if s.kind.convert is None else s.kind.convert(v)
            elif s.kind is FLOAT and type(v) is not float:
                v = float(v)
        elif s.shape == "strings":
            v = tuple(v) if all(type(a) is str for a in v) else tuple(str(a) for a in v)
        elif s.shape == "records":
            if type(v) is not list:
                raise _shape_error(cls, s, v, "a list")
            v = _build_one(s, v)
        elif s.shape == "record":  # its own from_dict names what is wrong
            v = s.record.from_dict(v)
        elif type(v) is not dict:  # counters, object
            raise _shape_error(cls, s, v, "an object")
        values.append(v)
    return cls._make(*values)


def to_dict(self) -> dict[str, Any]:
    """The trace object of a traced record: every key in field order, an optional one only when set."""
    d: dict[str, Any] = {}
    for s in self.__trace_specs__:
        v = getattr(self, s.key)
        if s.optional and (v == s.default if s.shape == "scalar" else not v):
            continue
        if s.shape == "records":
            v = [x.to_dict() for x in v]
        elif s.shape == "record":
            v = v.to_dict()
        elif s.shape == "strings":
            v = list(v)
        elif s.shape == "counters" and v is not None:
            v = dict(v)
        d[s.key] = v
    return d


def _build_one(s: Spec, v: Any) -> Any:
    if s.shape == "records":
        return tuple([s.record.from_dict(x) for x in v])
    return s.record.from_dict(v) if s.shape == "record" else v


# ---- the generated code: the one-pass reader and the fast constructor


def _maker(cls):
    """`make(*values)`, the same instance as cls(*values) for a frozen slots dataclass given every field, at
    about a sixth of the work: the frozen __init__ stores each field through object.__setattr__, `make`
    stores them into a plain twin class with the same slots and then gives the object its class (a
    __class__ assignment, which Python allows between classes of one layout). Traced records have no
    __post_init__ and no field converters, so nothing else would run."""
    names = tuple(f.name for f in dataclasses.fields(cls))
    if getattr(cls, "__slots__", None) != names or hasattr(cls, "__post_init__"):
        raise TypeError(f"traced({cls.__name__}): not a frozen slots dataclass of plain fields")
    twin = type(f"_{cls.__name__}Slots", (), {"__slots__": names})
    src = f"def make({', '.join(names)}):\n    o = new(twin)\n"
    src += "".join(f"    o.{n} = {n}\n" for n in names) + "    o.__class__ = cls\n    return o\n"
    return _compile(src, "make", new=object.__new__, twin=twin, cls=cls)


def _compile(src: str, name: str, **scope):
    exec(src, scope)  # noqa: S102 - generated from the declarations in this package, no input
    fn = scope[name]
    fn.__doc__ = src  # what it does, for a reader with a debugger
    return fn


def _rare(s: Spec) -> bool:
    """A field `fast` leaves to the exact check and build: the optional records and the unlooked-into objects."""
    return s.shape in ("record", "object") or s.shape == "records" and s.optional


def _fast_test(s: Spec, v: str, scope: dict) -> str:
    """The expression that is true when `v` is this field's value in the one shape `fast` builds from
    as given (what check accepts and from_dict keeps unchanged)."""
    if s.choices:
        scope[f"C_{v}"] = s.choices
        return f"{v} in C_{v}"
    if s.shape == "scalar":
        one = s.kind.types[0].__name__
        test = (
            f"type({v}) is {one}" if len(s.kind.types) == 1 else f"(type({v}) is float or type({v}) is int)"
        )
        if s.lo is not None:
            test += f" and {s.lo!r} <= {v} <= {s.hi!r}"
    elif s.shape == "counters":
        test = f"counters_ok({v}, {s.lo!r}, {s.hi!r}, {s.nullable})"
    elif s.shape == "strings":
        test = f"type({v}) is list and set(map(type, {v})) <= STR"
    else:  # records
        test = f"type({v}) is list"
    return f"({v} is None or {test})" if s.default is None and not s.need else f"({test})"


def _fast_value(s: Spec, v: str, scope: dict) -> tuple[str, str]:
    """(statements, expression): how the field's value is built once its test passed."""
    if _rare(s):
        scope[f"S_{v}"], scope[f"D_{v}"] = s, s.default
        check = f"    if {v} is not None: check_value(S_{v}, {v}, {s.key!r})\n"
        return check, f"D_{v} if {v} is None else build(S_{v}, {v})"
    if s.shape == "records":
        scope[f"F_{v}"] = s.record.fast
        return f"    b_{v} = [F_{v}(x) for x in {v}]\n    if None in b_{v}: return None\n", f"tuple(b_{v})"
    if s.shape == "strings":
        return "", f"tuple({v}) if {v} else ()"
    if s.shape == "scalar" and s.kind is FLOAT:
        nullable = s.default is None and not s.need
        return "", f"None if {v} is None else float({v})" if nullable else f"float({v})"
    return "", v


def _fast(cls):
    """`fast(d)`: the record of a dict of the common shape, checked and built in one pass; None (or KeyError,
    TypeError...) for anything else."""
    ss = cls.__trace_specs__
    vs = [f"v{n}" for n in range(len(ss))]
    always = [(v, s) for v, s in zip(vs, ss, strict=True) if not s.optional and not s.choices]
    scope = {"counters_ok": counters_ok, "STR": _STR_ONLY, "check_value": _check_value, "build": _build_one}
    memo = cls.__trace_memo__
    if len(always) < 2 or memo is not None and len(always) != len(ss):
        raise TypeError(f"traced({cls.__name__}): the one-pass reader needs two always-written keys or more")
    scope.update(row=itemgetter(*(s.key for _, s in always)), make=cls._make, memo=memo)
    src = f"def fast(d):\n    key = row(d)\n    {', '.join(v for v, _ in always)} = key\n"
    for v, s in zip(vs, ss, strict=True):
        if s.optional and _rare(s):
            src += f"    {v} = d.get({s.key!r})\n"
        elif s.optional or s.choices:  # absent in older traces: its default (null: the exact path's)
            scope[f"D_{v}"] = s.default
            src += f"    {v} = d.get({s.key!r}, D_{v})\n"
    nums = [(v, s) for v, s in zip(vs, ss, strict=True) if s.shape == "scalar" and s.kind.convert is None]
    if memo is not None:  # a reading seen before, with the same types (70 == 70.0 as a key): the same object
        same = "".join(f" and type(o.{s.key}) is type({v})" for v, s in nums)
        src += "    o = memo.get(key)\n"
        src += f"    if o is not None{same}: return o\n"
    tests = " and ".join(_fast_test(s, v, scope) for v, s in zip(vs, ss, strict=True) if not _rare(s))
    src += f"    if not ({tests or 'True'}): return None\n"
    args = []
    for v, s in zip(vs, ss, strict=True):
        stmts, expr = _fast_value(s, v, scope)
        src += stmts
        args.append(expr)
    src += f"    o = make({', '.join(args)})\n"
    if memo is not None:  # never a zero: -0.0 == 0.0 as a key, and the sign is written back
        src += f"    if {' and '.join(f'{v} != 0' for v, _ in nums) or 'True'}:\n"
        src += "        if len(memo) >= 4096: memo.clear()\n        memo[key] = o\n"
    return _compile(src + "    return o\n", "fast", **scope)


# ---- the decorator


def _interned_from_dict(cls, d):
    """A reading the one-pass checks let in is the memo's; any other is built anew, never kept."""
    try:
        o = cls.fast({s.key: d.get(s.key) for s in cls.__trace_specs__})
    except TypeError:  # an unhashable value
        o = None
    return o if o is not None else _from_dict(cls, d)


def traced(cls=None, *, name: str = "", strict: bool = False, interned: bool = False):
    """Make `cls` a frozen slots dataclass whose fields are its trace-v1 declaration, with to_dict,
    from_dict, check and fast made from it. `name`: the prefix of from_dict's errors ("driver_events: ");
    `strict`: from_dict refuses a value of another type; `interned`: equal readings are one object (a host's
    sensors repeat the same few values sample after sample), at most 4096 kept."""

    def wrap(cls):
        cls = dataclasses.dataclass(frozen=True, slots=True)(cls)
        out = []
        for f in dataclasses.fields(cls):
            default = None if f.default is dataclasses.MISSING else f.default
            if f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            out.append(dataclasses.replace(f.metadata["trace"], key=f.name, default=default))
        cls.__trace_specs__ = tuple(out)
        cls.__trace_name__ = name
        cls.__trace_strict__ = strict
        cls.__trace_memo__ = {} if interned else None
        cls._make = staticmethod(_maker(cls))
        if "to_dict" not in cls.__dict__:
            cls.to_dict = to_dict
        cls.check = classmethod(_check)
        cls.fast = staticmethod(_fast(cls))
        cls.from_dict = classmethod(_interned_from_dict if interned else _from_dict)
        return cls

    return wrap if cls is None else wrap(cls)
