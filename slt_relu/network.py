"""Two-layer ReLU networks as pytrees (DSLT3, "Defining the networks").

    f(x, w) = c + sum_i q_i * relu(<w_i, x> + b_i)

Parameters are ``TwoLayer(w, b, q, c)`` with shapes ``w: (d, n_in)``, ``b: (d,)``,
``q: (d,)``, ``c: ()``.  The flat order used by Fisher matrices and generators is
``w`` row-major, then ``b``, then ``q``, then ``c``: ``D = d * (n_in + 2) + 1``.

A :class:`Restriction` frees a subset of the D coordinates and fixes the rest at
the values of a base parameter; DSLT3's Examples 3.2 and 3.4 are restricted
models with one or two free coordinates.
"""
from __future__ import annotations

import re
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ._validate import check_count, check_finite, check_number

__all__ = ["RestrictedUnravel", "Restriction", "TwoLayer", "check_params", "coordinate_index", "coordinate_names",
           "forward", "forward_columns", "from_flat", "init_params", "make_params", "num_params", "pad_nodes",
           "scaling_generators", "to_flat"]


class TwoLayer(NamedTuple):
    """Parameters of a two-layer ReLU network, a pytree (NamedTuple).

        f(x) = c + sum_i q_i relu(<w_i, x> + b_i)

    A batch of parameters carries leading batch axes on every leaf (``w: (..., d, n_in)``), which
    is what ``jax.vmap`` produces.

    Attributes:
        w: (d, n_in) incoming weights.
        b: (d,) biases.
        q: (d,) outgoing weights.
        c: () output bias.

    References:
        DSLT3, "Defining the networks".
    """

    w: jax.Array
    b: jax.Array
    q: jax.Array
    c: jax.Array

    @property
    def width(self) -> int:
        return self.w.shape[-2]

    @property
    def n_in(self) -> int:
        return self.w.shape[-1]


def make_params(w, b, q, c=0.0, dtype=None) -> TwoLayer:
    """Build a ``TwoLayer`` from array-likes, checking the shapes.

    Args:
        w: (d, n_in) incoming weights (a 1-D w is read as one input, shape (d, 1)).
        b: (d,) biases, or a scalar for every node.
        q: (d,) outgoing weights, or a scalar for every node.
        c: scalar output bias.
        dtype: the leaves' dtype (default: w's floating dtype, ``jnp.result_type(w, float)``).

    Returns:
        TwoLayer(w (d, n_in), b (d,), q (d,), c ()).

    Raises:
        ValueError: a shape that does not match w's d nodes.
    """
    w = jnp.asarray(w, dtype=dtype)
    if w.ndim == 1:
        w = w[:, None]
    dtype = dtype or jnp.result_type(w, float)
    w = w.astype(dtype)
    if w.ndim != 2:
        raise ValueError(f"w: expected shape (d, n_in), got {w.shape}")
    d = w.shape[0]
    b = jnp.asarray(b, dtype=dtype).reshape(-1) if np.ndim(b) else jnp.full((d,), b, dtype)
    q = jnp.asarray(q, dtype=dtype).reshape(-1) if np.ndim(q) else jnp.full((d,), q, dtype)
    for name, leaf in (("b", b), ("q", q)):
        if leaf.shape != (d,):
            raise ValueError(f"{name}: expected shape ({d},) to match w's {d} nodes, got {leaf.shape}")
    c = jnp.asarray(c, dtype=dtype)
    if c.shape != ():
        raise ValueError(f"c: expected a scalar, got shape {c.shape}")
    return TwoLayer(w, b, q, c)



def pad_nodes(params: TwoLayer, width: int, dtype=None) -> TwoLayer:
    """params with zero nodes (w_i = 0, b_i = 0, q_i = 0) appended up to ``width`` nodes: the same function f,
    a point of the wider model.

    Args:
        params: a ``TwoLayer`` of d nodes (w (d, n_in), b (d,), q (d,), c ()).
        width: the nodes of the result, >= d.
        dtype: the leaves' dtype (default: w's floating dtype, as :func:`make_params`).

    Returns:
        TwoLayer(w (width, n_in), b (width,), q (width,), c ()).
    """
    d, n_in = np.shape(params.w)
    if width < d:
        raise ValueError(f"width: expected at least the {d} nodes of params, got {width}")
    pad = lambda leaf, shape: np.concatenate([np.asarray(leaf), np.zeros(shape, np.asarray(leaf).dtype)])
    return make_params(pad(params.w, (width - d, n_in)), pad(params.b, (width - d,)), pad(params.q, (width - d,)),
                       params.c, dtype=dtype or jnp.result_type(np.asarray(params.w).dtype, float))


def check_params(params) -> TwoLayer:
    """Raise a clear ``TypeError``/``ValueError`` unless ``params`` is a well-shaped TwoLayer."""
    if not isinstance(params, TwoLayer):
        raise TypeError(f"params: expected slt_relu.TwoLayer, got {type(params).__name__}")
    w, b, q, c = params
    if np.ndim(w) < 2:
        raise ValueError(f"params.w: expected shape (d, n_in), got {np.shape(w)}")
    batch, (d, _) = np.shape(w)[:-2], np.shape(w)[-2:]
    for name, leaf, want in (("b", b, batch + (d,)), ("q", q, batch + (d,)), ("c", c, batch)):
        if np.shape(leaf) != want:
            raise ValueError(f"params.{name}: expected shape {want}, got {np.shape(leaf)}")
    return params


def num_params(width: int, n_in: int) -> int:
    """The number of parameters of a width-d network.

        D = d * (n_in + 2) + 1

    Args:
        width: d, the hidden nodes.
        n_in: the input dimension.

    Returns:
        D.
    """
    return width * (n_in + 2) + 1


def forward(params: TwoLayer, x: jax.Array) -> jax.Array:
    """The network's output.

        f(x, w) = c + sum_i q_i relu(<w_i, x> + b_i)

    Args:
        params: one ``TwoLayer`` (vmap for a batch).
        x: (..., n_in) inputs.

    Returns:
        (...) f(x, w) at every input.
    """
    x = jnp.asarray(x)
    if x.shape[-1:] != (params.w.shape[-1],):
        raise ValueError(f"x: expected a last axis of n_in = {params.w.shape[-1]}, got shape {x.shape}")
    pre = x @ params.w.T + params.b
    return jax.nn.relu(pre) @ params.q + params.c


def forward_columns(params: TwoLayer, x_cols: jax.Array) -> jax.Array:
    """f(x, w) for inputs stored as columns, x_cols: (n_in, n) -> (n,), node by node:

        f = c + sum_i q_i relu(b_i + sum_k w_ik x_cols[k]).

    The same function as :func:`forward`, written with one (n,) array per input and per node so
    that XLA fuses it into one loop over the data: on a CPU this is faster than the matrix
    product when many chains, each with its own data set, are vmapped (docs/notes.md).  Meant for
    small widths (the loops unroll at trace time).
    """
    d, n_in = params.w.shape[-2:]
    if x_cols.shape[0] != n_in:
        raise ValueError(f"x_cols: expected a first axis of n_in = {n_in}, got shape {x_cols.shape}")
    out = jnp.zeros(x_cols.shape[1:], x_cols.dtype) + params.c
    for i in range(d):
        pre = params.b[i] + sum(params.w[i, k] * x_cols[k] for k in range(n_in))
        out = out + params.q[i] * jax.nn.relu(pre)
    return out


def to_flat(params: TwoLayer) -> jax.Array:
    """Flatten to (D,) in the order of docs/design.md: w row-major, b, q, c.

    Args:
        params: one ``TwoLayer`` (w (d, n_in)).

    Returns:
        (D,) with D = d * (n_in + 2) + 1.
    """
    return jnp.concatenate([params.w.reshape(-1), params.b, params.q, params.c.reshape(1)])


def from_flat(flat: jax.Array, width: int, n_in: int) -> TwoLayer:
    """Inverse of :func:`to_flat`.

    Args:
        flat: (D,) with D = width * (n_in + 2) + 1.
        width: d >= 1.
        n_in: the input dimension, >= 1.

    Returns:
        TwoLayer(w (width, n_in), b (width,), q (width,), c ()).
    """
    width, n_in = check_count(width, "width"), check_count(n_in, "n_in")
    flat = jnp.asarray(flat)
    D = num_params(width, n_in)
    if flat.shape != (D,):
        raise ValueError(f"flat: expected shape ({D},) for width {width}, n_in {n_in}; got {flat.shape}")
    nw = width * n_in
    return TwoLayer(
        flat[:nw].reshape(width, n_in),
        flat[nw : nw + width],
        flat[nw + width : nw + 2 * width],
        flat[-1],
    )


def coordinate_names(width: int, n_in: int) -> list[str]:
    """Names of the D flat coordinates: ``w[i,k]``, ``b[i]``, ``q[i]``, ``c``."""
    names = [f"w[{i},{k}]" for i in range(width) for k in range(n_in)]
    names += [f"b[{i}]" for i in range(width)] + [f"q[{i}]" for i in range(width)]
    return names + ["c"]


def coordinate_index(name: str, width: int, n_in: int) -> int:
    """Flat index of a coordinate name (``"w[0,1]"``, ``"b[2]"``, ``"q[0]"``, ``"c"``)."""
    names = coordinate_names(width, n_in)
    clean = re.sub(r"\s+", "", name)
    if clean not in names:
        raise ValueError(
            f"coordinate {name!r}: expected one of w[i,k], b[i], q[i], c with 0 <= i < {width}, "
            f"0 <= k < {n_in}"
        )
    return names.index(clean)


def init_params(key: jax.Array, width: int, n_in: int, scale: float = 1.0, dtype=None) -> TwoLayer:
    """Random parameters: every coordinate i.i.d. N(0, scale^2).

    Generic in the sense of DSLT3 / Phuong-Lampert: with probability one no node is degenerate and
    no two nodes share an activation boundary.

    Args:
        key: a PRNG key.
        width: d >= 1.
        n_in: the input dimension, >= 1.
        scale: the standard deviation, > 0.
        dtype: the leaves' dtype (default: JAX's default float).

    Returns:
        TwoLayer(w (width, n_in), b (width,), q (width,), c ()).

    References:
        DSLT3; Phuong and Lampert (generic parameters).
    """
    width, n_in = check_count(width, "width"), check_count(n_in, "n_in")
    check_number(scale, "scale")
    dtype = dtype or jnp.zeros(()).dtype
    flat = scale * jax.random.normal(key, (num_params(width, n_in),), dtype=dtype)
    return from_flat(flat, width, n_in)


def scaling_generators(params: TwoLayer) -> jax.Array:
    """The d scaling generators of the network, as rows.

    Row i has w_i in node i's w slots, b_i in its b slot, -q_i in its q slot, zero elsewhere:
    grad_w f . v_i = 0 wherever f is differentiable, so every row is a null direction of I(w).

    Args:
        params: one TwoLayer (w (d, n_in), no batch axes).

    Returns:
        (d, D) the generators in the flat order of :func:`~slt_relu.network.to_flat`.

    References:
        DSLT3 Appendix 1.
    """
    d, n_in = params.w.shape
    eye = jnp.eye(d, dtype=params.w.dtype)
    w_part = (eye[:, :, None] * params.w[None, :, :]).reshape(d, d * n_in)
    return jnp.concatenate([w_part, eye * params.b, -eye * params.q, jnp.zeros((d, 1), params.w.dtype)], axis=1)


class Restriction:
    """A restricted model: the coordinates where ``free`` is true vary, the rest stay at ``base``.

    ``embed(theta)`` maps the free coordinates theta: (k,) to a full ``TwoLayer``;
    ``project(params)`` reads them back.  Every loss and Fisher function takes a full ``TwoLayer``;
    Fisher functions take ``free=restriction.free`` to return the restricted model's matrices.

    Hashable by value (width, n_in, the fixed coordinates' values, the mask; the base values of
    free coordinates do not matter), so a restriction can be a static argument of ``jax.jit``
    and two equal restrictions share compiled programs.

    Args:
        base: a full ``TwoLayer``; its values fix the coordinates that are not free.
        free: numpy bool array (D,), true where a coordinate varies.
    """

    __slots__ = ("base", "free", "_key")

    def __init__(self, base: TwoLayer, free):
        free = np.asarray(free, dtype=bool)
        D = num_params(base.width, base.n_in)
        if free.shape != (D,):
            raise ValueError(f"free: expected a bool mask of shape ({D},), got {free.shape}")
        self.base, self.free = base, free
        fixed = np.where(free, 0.0, np.asarray(to_flat(base), np.float64))
        self._key = (base.width, base.n_in, tuple(fixed.tolist()), tuple(free.tolist()))

    def __hash__(self):
        return hash(self._key)

    def __eq__(self, other):
        return isinstance(other, Restriction) and self._key == other._key

    def __repr__(self):
        return f"Restriction(width={self.base.width}, n_in={self.base.n_in}, free={self.free_names})"

    @classmethod
    def from_names(cls, base: TwoLayer, names: Sequence[str]) -> "Restriction":
        free = np.zeros(num_params(base.width, base.n_in), dtype=bool)
        for name in names:
            free[coordinate_index(name, base.width, base.n_in)] = True
        return cls(base, free)

    @classmethod
    def full(cls, base: TwoLayer) -> "Restriction":
        return cls(base, np.ones(num_params(base.width, base.n_in), dtype=bool))

    @property
    def num_free(self) -> int:
        return int(self.free.sum())

    @property
    def free_names(self) -> list[str]:
        names = coordinate_names(self.base.width, self.base.n_in)
        return [n for n, f in zip(names, self.free) if f]

    def embed(self, theta: jax.Array) -> TwoLayer:
        """theta: (k,) free coordinates -> full TwoLayer in the base's dtype (vmap for a batch)."""
        theta = jnp.asarray(theta)
        if theta.shape != (self.num_free,):
            raise ValueError(f"theta: expected shape ({self.num_free},) for free {self.free_names}, got {theta.shape}")
        return from_flat(self.embed_flat(theta.astype(self.base.w.dtype)), self.base.width, self.base.n_in)

    def embed_flat(self, theta: jax.Array) -> jax.Array:
        """theta: (k,) free coordinates -> the full flat parameter (D,) in theta's dtype, the fixed
        coordinates from the base (unchecked: for use inside compiled potentials)."""
        return to_flat(self.base).astype(theta.dtype).at[np.flatnonzero(self.free)].set(theta)

    def project(self, params: TwoLayer) -> jax.Array:
        """The free coordinates of a full parameter, (k,)."""
        return to_flat(params)[np.flatnonzero(self.free)]

    @property
    def unravel(self) -> "RestrictedUnravel":
        """The map from the free coordinates theta (k,) to the full TwoLayer (the flat view that tempered
        targets and priors see: ``slt_relu.posterior.TemperedTarget``)."""
        return RestrictedUnravel(self)


class RestrictedUnravel(NamedTuple):
    """theta (k,) free coordinates -> the full TwoLayer of a :class:`Restriction` (its base fixes the rest),
    unchecked, for compiled potentials; hashable by value.  ``segments()`` gives each group's (w, b, q, c)
    free coordinates, in flat order."""

    restriction: Restriction

    def __call__(self, theta) -> TwoLayer:
        base = self.restriction.base
        return from_flat(self.restriction.embed_flat(theta), base.width, base.n_in)

    @property
    def size(self) -> int:
        return self.restriction.num_free

    def segments(self) -> list[tuple[str, int, int]]:
        """(group, start, stop) of the free coordinates of each group w, b, q, c (start = stop where a group has
        none)."""
        d, n_in = self.restriction.base.width, self.restriction.base.n_in
        ends = {"w": d * n_in, "b": d * (n_in + 1), "q": d * (n_in + 2), "c": d * (n_in + 2) + 1}
        free = np.flatnonzero(self.restriction.free)
        out, start, low = [], 0, 0
        for group, high in ends.items():
            count = int(np.sum((free >= low) & (free < high)))
            out.append((group, start, start + count))
            start, low = start + count, high
        return out
