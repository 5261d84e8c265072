"""Checks of the arguments a public function takes, each raising one line that names the argument and what
was expected (``sigma: expected a positive finite noise standard deviation, got -1.0``).  Values traced by
``jax.jit`` or ``jax.vmap`` pass unchecked: a library function checks at its public boundary, once.
"""
from __future__ import annotations

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
