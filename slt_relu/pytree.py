"""Flat views of parameter pytrees: the one map between a model's parameters and the flat vector (D,) that
samplers, Fisher and Hessian matrices and priors see.

    params (a pytree of arrays)  <->  w (D,),  the leaves in tree order, each flattened row-major.

For the two-layer network this is the design's flat order (w row-major, b, q, c); for a tuple of layers,
layer by layer; for any pytree, ``jax.flatten_util.ravel_pytree``'s order.  :class:`Unravel` is the inverse
map, hashable by value (its tree structure, leaf shapes and dtypes), so that a potential holding it is a
valid static argument of ``jax.jit`` and equal structures share compiled programs.  Each leaf has a name
(its key path, ``w``, ``layers[0].w``, ``['dense']['kernel']``) and a *group*, the first step of its path
(``w``; ``layers``; ``dense``): a prior can treat each group differently (:class:`slt_relu.Prior`).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["Unravel", "group_of", "leaf_names", "unravel_fn"]


def _key_text(key) -> str:
    """One step of a key path as text: an attribute ``w``, a dict key ``dense``, an index ``0``."""
    for attr in ("name", "key", "idx"):
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


def leaf_names(tree) -> list[str]:
    """The name of every leaf of a pytree, in tree order: ``w``, ``layers[0].w``, ``dense.kernel``."""
    names = []
    for path, _ in jax.tree_util.tree_flatten_with_path(tree)[0]:
        text = ""
        for key in path:
            part = _key_text(key)
            text += f"[{part}]" if isinstance(key, jax.tree_util.SequenceKey) else (f".{part}" if text else part)
        names.append(text or "params")
    return names


class Unravel(NamedTuple):
    """Flat (D,) -> the pytree it came from; hashable by value (``jax.flatten_util.ravel_pytree`` returns a
    closure), so potentials holding it can be static ``jax.jit`` arguments.

    Attributes:
        treedef: the tree structure.
        shapes: each leaf's shape, in tree order.
        dtypes: each leaf's dtype (as text), in tree order.
        names: each leaf's name (its key path, :func:`leaf_names`).
    """

    treedef: object
    shapes: tuple
    dtypes: tuple
    names: tuple = ()

    @property
    def size(self) -> int:
        """D, the number of parameters."""
        return sum(math.prod(s) for s in self.shapes)

    def __call__(self, flat):
        sizes = [math.prod(s) for s in self.shapes]
        parts = jnp.split(flat, np.cumsum(sizes)[:-1]) if len(sizes) > 1 else [flat]
        leaves = [p.reshape(s).astype(d) for p, s, d in zip(parts, self.shapes, self.dtypes)]
        return jax.tree.unflatten(self.treedef, leaves)

    def ravel(self, tree) -> jax.Array:
        """The flat vector (D,) of a pytree of this structure (its leaves flattened in tree order, in the
        first leaf's floating dtype)."""
        leaves = [jnp.asarray(a) for a in jax.tree.leaves(tree)]
        if not leaves:
            return jnp.zeros(0, jnp.float32)
        dtype = jnp.result_type(*leaves)
        return jnp.concatenate([a.reshape(-1).astype(dtype) for a in leaves])

    def segments(self) -> list[tuple[str, int, int]]:
        """(group, start, stop) of every leaf in the flat vector, in order; the group is the first step of
        the leaf's name (``w`` of ``w``, ``layers`` of ``layers[0].w``)."""
        out, start = [], 0
        names = self.names or tuple(f"leaf{i}" for i in range(len(self.shapes)))
        for name, shape in zip(names, self.shapes):
            stop = start + math.prod(shape)
            out.append((group_of(name), start, stop))
            start = stop
        return out

    def check(self, tree, name: str = "params"):
        """tree if it has this structure (the same tree and leaf shapes); else TypeError/ValueError naming it."""
        leaves, treedef = jax.tree.flatten(tree)
        if treedef != self.treedef:
            raise TypeError(f"{name}: expected a pytree of structure {self.treedef}, got {treedef}")
        shapes = tuple(np.shape(a) for a in leaves)
        if shapes != tuple(self.shapes):
            raise ValueError(f"{name}: expected leaves of shapes {list(self.shapes)}, got {list(shapes)}")
        return tree


def group_of(name: str) -> str:
    """The group of a leaf name: its first step (``layers`` of ``layers[0].w``, ``w`` of ``w``)."""
    for i, ch in enumerate(name):
        if ch in ".[":
            return name[:i] or name
    return name


def unravel_fn(tree) -> tuple[jax.Array, Unravel]:
    """(flat (D,), :class:`Unravel`) of a pytree of arrays, leaves in tree order.

    Args:
        tree: a pytree of arrays (a NamedTuple of parameters, a dict, an Equinox module's arrays, ...).

    Returns:
        (flat, unravel): the leaves flattened and concatenated in their common floating dtype, and the map
        back (``unravel(flat)`` has the tree's structure, shapes and dtypes).
    """
    leaves, treedef = jax.tree.flatten(tree)
    leaves = [jnp.asarray(a) for a in leaves]
    dtype = jnp.result_type(*leaves) if leaves else jnp.float32
    flat = jnp.concatenate([a.reshape(-1).astype(dtype) for a in leaves]) if leaves else jnp.zeros(0, dtype)
    return flat, Unravel(treedef, tuple(a.shape for a in leaves), tuple(str(a.dtype) for a in leaves),
                         tuple(leaf_names(tree)))
