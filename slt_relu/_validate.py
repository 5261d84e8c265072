"""Checks of the arguments a public function takes, each raising one line that names the argument and what
was expected (``sigma: expected a positive finite noise standard deviation, got -1.0``).  Values traced by
``jax.jit`` or ``jax.vmap`` pass unchecked: a library function checks at its public boundary, once.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import operator
import types
import typing

import jax
import numpy as np


def concrete(value):
    """value as a NumPy array, or None when it is a JAX tracer (inside jit / vmap: left unchecked)."""
    try:
        return np.asarray(value)
    except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError):
        return None


def shown(value, a: np.ndarray):
    """value for an error message: as written for a Python scalar, as a list for a small array."""
    if isinstance(value, (bool, int, float, str, type(None))):
        return repr(value)
    return a.tolist() if a.size <= 16 else f"an array of shape {a.shape}"


def check_number(value, name: str, *, what: str = "number", nonnegative: bool = False):
    """value unless it is concrete and not a finite real number > 0 (>= 0 with ``nonnegative``),
    every entry of an array: ValueError naming it; traced values (inside jit / vmap) pass."""
    a = concrete(value)
    if a is None:
        return value
    ok = a.dtype.kind in "iuf" and a.size > 0 and bool(np.all(np.isfinite(a)))
    ok = ok and bool(np.all(a >= 0) if nonnegative else np.all(a > 0))
    if not ok:
        want = f"a finite {what} >= 0" if nonnegative else f"a positive finite {what}"
        raise ValueError(f"{name}: expected {want}, got {shown(value, a)}")
    return value


def check_count(value, name: str, minimum: int = 1) -> int:
    """int(value) if it is an integer >= minimum (bool is not; numpy integers are); else ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        want = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{name}: expected {want}, got {value!r}")
    return int(value)


def check_finite(value, name: str = "params"):
    """value unless a concrete array in it (a pytree: every leaf, named by its path) holds NaN or infinity:
    ValueError naming the array; traced values pass."""
    leaves = jax.tree_util.tree_flatten_with_path(value)[0]
    if len(leaves) != 1 or leaves[0][0]:
        for path, leaf in leaves:
            check_finite(leaf, name + _path_text(path))
        return value
    a = concrete(value)
    if a is not None and a.dtype.kind in "iufc" and not np.all(np.isfinite(a)):
        got = a.tolist() if a.size <= 16 else f"{np.count_nonzero(~np.isfinite(a))} of {a.size} entries NaN or infinite"
        raise ValueError(f"{name}: expected finite numbers, got {got}")
    return value


def _path_text(path) -> str:
    """A key path as ``.w``, ``[0]``, ``['kernel']``: a NamedTuple's field by name."""
    out = ""
    for key in path:
        if isinstance(key, jax.tree_util.GetAttrKey):
            out += f".{key.name}"
        elif isinstance(key, jax.tree_util.SequenceKey):
            out += f"[{key.idx}]"
        else:
            out += jax.tree_util.keystr((key,))
    return out


# ----------------------------------------------------------------------------------------------------------------
# settings types: plain frozen dataclasses whose fields are checked when an instance is made


SCALE_BOUND = 1e4
"""The largest magnitude of a real setting that is a value or scale of the model (a weight, a bias, a prior's or the
noise's scale, a radius, a length, a step size): DSLT's values are O(1), and products of a few such values stay far
inside float32's range, so losses, Fisher information, samplers and plots stay finite."""

_BOUNDS = ("ge", "gt", "le", "lt")


def setting(default=dataclasses.MISSING, *, description: str = "", ge=None, gt=None, le=None, lt=None):
    """A field of a settings type (:func:`settings_type`): its default, its bounds and its meaning, the one place they are
    written (the config layer's schemas read them: ``slt_relu.workflow.settings.section_of``)."""
    meta = {"description": description, "ge": ge, "gt": gt, "le": le, "lt": lt}
    return dataclasses.field(default=default, metadata=meta)


def settings_type(cls):
    """Class decorator: a frozen, keyword-only dataclass whose fields are checked and normalised when an instance is
    made (numpy and Python numbers alike; bool is not a number), each mistake one line naming the field and what
    was expected (``num_samples: expected an integer >= 4, got 2``); a ``check(self)`` method of the class or of a
    base adds checks between fields.  Instances are hashable by value (static arguments of compiled programs), and
    ``replace(**changes)`` returns a checked copy.  The docstring gains an ``Attributes:`` section from the fields."""
    def __post_init__(self):
        hints = _hints(type(self))
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, _coerced(getattr(self, f.name), hints[f.name], f.metadata, f.name))
        for klass in reversed(type(self).__mro__):
            check = klass.__dict__.get("check")
            if check is not None:
                check(self)

    cls.__post_init__ = __post_init__                 # before the dataclass is made: its __init__ calls it
    cls = dataclasses.dataclass(frozen=True, kw_only=True)(cls)
    hints = _hints(cls)
    cls.replace = lambda self, **changes: dataclasses.replace(self, **changes)
    cls.replace.__doc__ = "A copy with ``changes``, checked as a new instance is."
    cls.__doc__ = _with_attributes(cls, hints)
    return cls


@functools.lru_cache(maxsize=None)
def _hints(cls) -> dict:
    return typing.get_type_hints(cls)


def settings_fields(cls) -> list:
    """The dataclass fields of a settings type (name, default, metadata: description and bounds)."""
    return list(dataclasses.fields(cls))


def type_words(hint) -> str:
    """Words for a field's type: 'an integer', 'a number', 'true or false', "one of 'a', 'b'", 'a list of numbers'."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return " or ".join(type_words(a) for a in inner) + (" or None" if len(inner) < len(args) else "")
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin is tuple:
        return "a list of " + {int: "integers", float: "numbers", str: "strings"}.get(args[0], "values")
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(hint, str(hint))


def _num(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def bounds_words(meta) -> str:
    """' >= 4', ' in (0, 1)', '' from a field's bounds."""
    ge, gt, le, lt = (None if meta.get(k) is None else _num(meta[k]) for k in _BOUNDS)
    low = f"[{ge}" if ge is not None else f"({gt}" if gt is not None else None
    high = f"{le}]" if le is not None else f"{lt})" if lt is not None else None
    if low and high:
        return f" in {low}, {high}"
    if low:
        return f" >= {ge}" if ge is not None else f" > {gt}"
    if high:
        return f" <= {le}" if le is not None else f" < {lt}"
    return ""


def _coerced(value, hint, meta, name: str):
    """value as the field's Python type, checked; TypeError (wrong type) or ValueError (out of bounds) naming it."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    optional = ""
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        optional = " or None" if len(inner) < len(args) else ""
        hint = inner[0] if len(inner) == 1 else hint
        origin, args = typing.get_origin(hint), typing.get_args(hint)
    want = type_words(hint) + bounds_words(meta) + optional
    if origin is typing.Literal:
        if isinstance(value, (bool, np.bool_)) and not any(isinstance(a, bool) for a in args) or value not in args:
            raise ValueError(f"{name}: expected {want}, got {value!r}")
        return value
    if origin is tuple:
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise TypeError(f"{name}: expected {want}, got {type(value).__name__}")
        return tuple(_coerced(v, args[0], {}, name) for v in value)
    if hint is bool:
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{name}: expected {want}, got {value!r}")
        return bool(value)
    if hint is int:
        if isinstance(value, (bool, np.bool_)) or not hasattr(value, "__index__"):
            raise TypeError(f"{name}: expected {want}, got {value!r}")
        value = operator.index(value)
    elif hint is float:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"{name}: expected {want}, got {value!r}")
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"{name}: expected a finite number{bounds_words(meta)}{optional}, got {value!r}")
    elif hint is str:
        if not isinstance(value, str):
            raise TypeError(f"{name}: expected {want}, got {value!r}")
        return value
    ge, gt, le, lt = (meta.get(k) for k in _BOUNDS)
    if ((ge is not None and value < ge) or (gt is not None and value <= gt) or (le is not None and value > le)
            or (lt is not None and value >= lt)):
        raise ValueError(f"{name}: expected {want}, got {value!r}")
    return value


def _with_attributes(cls, hints) -> str:
    """cls's docstring with an ``Attributes:`` section (Google style) from its fields: meaning, type, default."""
    entries = []
    for f in dataclasses.fields(cls):
        if typing.get_origin(hints[f.name]) is typing.Literal and len(typing.get_args(hints[f.name])) == 1:
            entries.append(f"    {f.name}: fixed to ``{f.default!r}``, the tag that names these settings.")
            continue
        default = "required" if f.default is dataclasses.MISSING else repr(f.default)
        words = type_words(hints[f.name]) + bounds_words(f.metadata)
        entries.append(f"    {f.name}: {f.metadata.get('description', '')} ({words}; default {default})".replace(" (", " (", 1))
    doc = inspect.cleandoc(cls.__doc__ or "")
    head, sep, refs = doc.partition("\nReferences:")
    return head.rstrip() + "\n\nAttributes:\n" + "\n".join(entries) + ("\n" + sep + refs if sep else "") + "\n"
