"""Input distributions q(x) and the rules that compute population expectations E_q[g(x)].

``UniformBox(half_width, n_in)``: uniform on [-a, a]^n_in.
``Gaussian(std, n_in)``: N(0, std^2 I).

Expectations are weighted sums over a :class:`Quadrature` (points (N, n_in), weights (N,)):

* n_in = 1: the integrands used here ((f - f0)^2 and grad f grad f^T) are polynomials
  of degree <= 2 between ReLU breakpoints ``-b_i / w_i``.  :func:`expectation_rule`
  splits the support at every breakpoint of the networks involved and applies
  Gauss-Legendre on each piece.  For ``UniformBox`` this is exact (3 nodes integrate
  degree 5); for ``Gaussian`` the density is smooth, pieces are at most std/2 wide on
  [-10 std, 10 std] and 8 nodes each: the error is below float64 rounding (a test
  checks against scipy's adaptive quadrature).
* n_in = 2: a deterministic tensor Gauss-Legendre rule on a grid of cells (default
  96 x 96 cells of 2 x 2 nodes; Gaussian truncated to [-8 std, 8 std]^2).  The kinks
  of the integrand are not aligned with the cells, so the rule converges like
  O(h^2); a test bounds its error against a 4x finer rule.
* any n_in: :meth:`Quadrature.from_samples` (an empirical / Monte Carlo rule).
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

# Gaussian tails beyond these many standard deviations are dropped (mass < 1e-22 in 1-D, < 1e-14 in 2-D).
GAUSSIAN_TAIL_1D = 10.0
GAUSSIAN_TAIL_2D = 8.0


class Quadrature(NamedTuple):
    """A rule E_q[g] ~= sum_k weights[k] g(points[k]); points: (N, n_in), weights: (N,)."""

    points: jax.Array
    weights: jax.Array

    @classmethod
    def from_samples(cls, x) -> "Quadrature":
        """The empirical rule (1/n) sum_k g(x_k) for samples x: (n, n_in)."""
        x = jnp.asarray(x)
        if x.ndim != 2:
            raise ValueError(f"x: expected shape (n, n_in), got {x.shape}")
        return cls(x, jnp.full((x.shape[0],), 1.0 / x.shape[0], dtype=x.dtype))

    @property
    def n_in(self) -> int:
        return self.points.shape[-1]


def _static(cls):
    """Register a frozen dataclass as a pytree with no leaves, so ``jax.jit`` treats it as static."""
    jax.tree_util.register_pytree_node(cls, lambda s: ((), s), lambda s, _: s)
    return cls


@_static
@dataclasses.dataclass(frozen=True)
class UniformBox:
    """q(x) uniform on [-half_width, half_width]^n_in; density (2a)^(-n_in)."""

    half_width: float
    n_in: int
    cells: int = 96
    order: int = 2

    def __post_init__(self):
        _check_positive("half_width", self.half_width)
        _check_dimension(self.n_in, self.cells, self.order)

    def sample(self, key: jax.Array, n: int, dtype=None) -> jax.Array:
        """n draws, shape (n, n_in)."""
        dtype = dtype or jnp.zeros(()).dtype
        return jax.random.uniform(key, (n, self.n_in), dtype, -self.half_width, self.half_width)

    def support(self) -> tuple[float, float]:
        return (-self.half_width, self.half_width)

    def density_1d(self, x):
        return jnp.full_like(x, 1.0 / (2.0 * self.half_width))


@_static
@dataclasses.dataclass(frozen=True)
class Gaussian:
    """q(x) = N(0, std^2 I_n_in)."""

    std: float
    n_in: int
    cells: int = 96
    order: int = 2

    def __post_init__(self):
        _check_positive("std", self.std)
        _check_dimension(self.n_in, self.cells, self.order)

    def sample(self, key: jax.Array, n: int, dtype=None) -> jax.Array:
        dtype = dtype or jnp.zeros(()).dtype
        return self.std * jax.random.normal(key, (n, self.n_in), dtype)

    def support(self) -> tuple[float, float]:
        tail = GAUSSIAN_TAIL_1D if self.n_in == 1 else GAUSSIAN_TAIL_2D
        return (-tail * self.std, tail * self.std)

    def density_1d(self, x):
        return jnp.exp(-0.5 * (x / self.std) ** 2) / float(self.std * np.sqrt(2 * np.pi))


def _check_positive(name, value):
    if not (isinstance(value, (int, float)) and value > 0):
        raise ValueError(f"{name}: expected a positive number, got {value!r}")


def _check_dimension(n_in, cells, order):
    if not (isinstance(n_in, int) and n_in >= 1):
        raise ValueError(f"n_in: expected a positive integer, got {n_in!r}")
    if not (isinstance(cells, int) and cells >= 1):
        raise ValueError(f"cells: expected a positive integer, got {cells!r}")
    if not (isinstance(order, int) and 1 <= order <= 16):
        raise ValueError(f"order: expected an integer in 1..16, got {order!r}")


Distribution = UniformBox | Gaussian


def _piecewise_rule_1d(edges: jax.Array, order: int, density) -> Quadrature:
    """Gauss-Legendre with ``order`` nodes on each interval [edges[j], edges[j+1]] (sorted edges)."""
    t, g = (jnp.asarray(a, edges.dtype) for a in np.polynomial.legendre.leggauss(order))
    lo, hi = edges[:-1], edges[1:]
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    x = (mid[:, None] + half[:, None] * t).reshape(-1)
    wts = (half[:, None] * g).reshape(-1) * density(x)
    return Quadrature(x[:, None], wts.astype(edges.dtype))


def breakpoints_1d(*networks) -> jax.Array:
    """ReLU breakpoints -b_i / w_i of one-input networks (a node with w_i = 0 has none: returns NaN)."""
    out = []
    for p in networks:
        w = p.w[:, 0]
        safe = jnp.where(w == 0, 1.0, w)
        out.append(jnp.where(w == 0, jnp.nan, -p.b / safe))
    return jnp.concatenate(out) if out else jnp.zeros((0,))


def expectation_rule(inputs, *networks, dtype=None) -> Quadrature:
    """The quadrature rule for E_q[g] where g is built from ``networks`` (TwoLayer's).

    inputs: ``UniformBox``, ``Gaussian`` or a ``Quadrature`` (returned unchanged).
    For n_in = 1 the support is split at every breakpoint of ``networks`` (exact, see
    module docstring); for n_in = 2 a fixed tensor rule; n_in > 2 needs a Quadrature.
    """
    if isinstance(inputs, Quadrature):
        return inputs
    if not isinstance(inputs, (UniformBox, Gaussian)):
        raise TypeError(f"inputs: expected UniformBox, Gaussian or Quadrature, got {type(inputs).__name__}")
    dtype = dtype or (networks[0].w.dtype if networks else jnp.zeros(()).dtype)
    lo, hi = inputs.support()
    if inputs.n_in == 1:
        if isinstance(inputs, UniformBox):
            grid = jnp.array([lo, hi], dtype)
            order = 3
        else:
            grid = jnp.linspace(lo, hi, 4 * int(GAUSSIAN_TAIL_1D) + 1, dtype=dtype)  # cells of std / 2
            order = 8
        bps = breakpoints_1d(*networks).astype(dtype)
        bps = jnp.clip(jnp.where(jnp.isnan(bps), lo, bps), lo, hi)
        edges = jnp.sort(jnp.concatenate([grid, bps]))
        return _piecewise_rule_1d(edges, order, inputs.density_1d)
    if inputs.n_in == 2:
        return tensor_rule_2d(inputs, dtype)
    raise ValueError(
        f"inputs.n_in = {inputs.n_in}: exact population expectations are implemented for n_in <= 2; "
        "pass a Quadrature instead (e.g. Quadrature.from_samples(inputs.sample(key, n)))"
    )


def tensor_rule_2d(inputs, dtype=None, cells: int | None = None, order: int | None = None) -> Quadrature:
    """Tensor Gauss-Legendre rule on ``cells x cells`` equal cells of the (truncated) support."""
    dtype = dtype or jnp.zeros(()).dtype
    cells = cells or inputs.cells
    order = order or inputs.order
    lo, hi = inputs.support()
    edges = jnp.linspace(lo, hi, cells + 1, dtype=dtype)
    rule = _piecewise_rule_1d(edges, order, inputs.density_1d)
    x, wx = rule.points[:, 0], rule.weights
    pts = jnp.stack(jnp.meshgrid(x, x, indexing="ij"), -1).reshape(-1, 2)
    return Quadrature(pts, (wx[:, None] * wx[None, :]).reshape(-1))
