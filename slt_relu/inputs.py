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
* n_in = 2, ``UniformBox``: exact.  :func:`box_rule_2d` cuts the box along every
  activation line of the networks involved into trapezoids on which the integrand is one
  polynomial of degree <= 2, and integrates each with a 2 x 2 Gauss rule.
* n_in = 2, ``Gaussian``: a deterministic tensor Gauss-Legendre rule on a grid of cells
  (default 96 x 96 cells of 2 x 2 nodes, truncated to [-8 std, 8 std]^2).  The kinks
  of the integrand are not aligned with the cells, so the rule converges like O(h^2);
  a test bounds its error against a 4x finer rule.
* any n_in: :meth:`Quadrature.from_samples` (an empirical / Monte Carlo rule).
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["Distribution", "Gaussian", "Quadrature", "UniformBox", "box_rule_2d", "breakpoints_1d", "check_inputs",
           "expectation_rule", "piecewise_rule_1d", "tensor_rule_2d"]

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
    """Input distribution q(x), uniform on the box [-a, a]^n_in.

        q(x) = (2a)^(-n_in) on [-half_width, half_width]^n_in

    Expectations are exact for n_in <= 2 (module docstring).

    Attributes:
        half_width: a > 0.
        n_in: the input dimension, >= 1.
        cells: cells per axis of :func:`tensor_rule_2d`, used only when that rule is asked for
            explicitly.
        order: Gauss-Legendre nodes per axis and cell of :func:`tensor_rule_2d` (1..16), likewise.
    """

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
    """Input distribution q(x), a centred Gaussian.

        q(x) = N(0, std^2 I_n_in)

    Attributes:
        std: the standard deviation, > 0.
        n_in: the input dimension, >= 1.
        cells: for n_in = 2, the tensor rule's ``cells`` x ``cells`` cells (module docstring).
        order: for n_in = 2, ``order`` x ``order`` Gauss-Legendre nodes per cell (1..16).
    """

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
"""An input distribution q(x), the type the losses and the Fisher information take as ``inputs``."""


def piecewise_rule_1d(edges: jax.Array, order: int, density) -> Quadrature:
    """Gauss-Legendre with ``order`` nodes on each interval [edges[j], edges[j+1]] (sorted edges)."""
    t, g = (jnp.asarray(a, edges.dtype) for a in np.polynomial.legendre.leggauss(order))
    lo, hi = edges[:-1], edges[1:]
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    x = (mid[:, None] + half[:, None] * t).reshape(-1)
    wts = (half[:, None] * g).reshape(-1) * density(x)
    return Quadrature(x[:, None], wts.astype(edges.dtype))


def check_inputs(inputs, n_in: int | None = None):
    """Return ``inputs`` if it is a UniformBox, Gaussian or Quadrature (with ``n_in`` inputs when
    given: the parameters'); else an error naming it.  Called before a jit boundary, so the
    user sees this message rather than JAX's."""
    if not isinstance(inputs, (UniformBox, Gaussian, Quadrature)):
        raise TypeError(f"inputs: expected UniformBox, Gaussian or Quadrature, got {type(inputs).__name__}")
    if n_in is not None and inputs.n_in != n_in:
        raise ValueError(f"inputs: expected n_in = {n_in} like the parameters, got {type(inputs).__name__} "
                         f"with n_in = {inputs.n_in}")
    return inputs


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
    if isinstance(check_inputs(inputs), Quadrature):
        return inputs
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
        return piecewise_rule_1d(edges, order, inputs.density_1d)
    if inputs.n_in == 2:
        if isinstance(inputs, UniformBox):
            return box_rule_2d(inputs.half_width, *networks, dtype=dtype)
        return tensor_rule_2d(inputs, dtype)
    raise ValueError(
        f"inputs.n_in = {inputs.n_in}: exact population expectations are implemented for n_in <= 2; "
        "pass a Quadrature instead (e.g. Quadrature.from_samples(inputs.sample(key, n)))"
    )


def _sort_small(keys, *values):
    """Sort along the last axis by comparison counting (no XLA sort; faster for the short rows used
    here under vmap).  Ties keep their original order.  Returns (sorted keys, *values in that order)."""
    n = keys.shape[-1]
    if n > 64:  # comparison counting costs n^3 via the one-hot product: use XLA's sort
        order = jnp.argsort(keys, axis=-1, stable=True)
        return tuple(jnp.take_along_axis(v, order, -1) for v in (keys,) + values)
    idx = jnp.arange(n)
    before = (keys[..., None, :] < keys[..., :, None]) | (
        (keys[..., None, :] == keys[..., :, None]) & (idx[None, :] < idx[:, None]))
    rank = jnp.sum(before, axis=-1)  # position of each entry after sorting
    onehot = (rank[..., :, None] == idx).astype(keys.dtype)  # (..., entry, position)
    return tuple(jnp.einsum("...ip,...i->...p", onehot, v) for v in (keys,) + values)


def box_rule_2d(half_width: float, *networks, dtype=None) -> Quadrature:
    """Exact rule for E[g] over the uniform box [-a, a]^2 when g is a polynomial of degree <= 2
    on every cell of the arrangement of the networks' activation lines <w_i, x> + b_i = 0.

    The box is cut into vertical slabs at every x where two lines cross or a line crosses
    y = +-a; inside a slab no two lines cross, so the lines sorted by height bound L + 1
    trapezoids (L lines) on each of which g is one polynomial.  A 2 x 2 Gauss-Legendre rule in
    the trapezoid's bilinear coordinates is exact there (degree <= 3 in each variable after the
    linear Jacobian).  Points: 4 (L + 1) (L (L - 1) / 2 + 2 L + 1); zero-width slabs and
    zero-height trapezoids get zero weight, so shapes depend only on L (jit friendly).
    """
    dtype = dtype or (networks[0].w.dtype if networks else jnp.zeros(()).dtype)
    a = float(half_width)
    if networks:
        W = jnp.concatenate([p.w for p in networks]).astype(dtype)
        B = jnp.concatenate([p.b for p in networks]).astype(dtype)
    else:
        W, B = jnp.zeros((0, 2), dtype), jnp.zeros((0,), dtype)
    L = W.shape[0]
    i, j = np.triu_indices(L, 1)
    with np.errstate(all="ignore"):
        det = W[i, 0] * W[j, 1] - W[i, 1] * W[j, 0]
        x_cross = (W[i, 1] * B[j] - W[j, 1] * B[i]) / jnp.where(det == 0, jnp.nan, det)
        w0 = jnp.where(W[:, 0] == 0, jnp.nan, W[:, 0])
        x_edge = jnp.concatenate([-(B + W[:, 1] * a) / w0, -(B - W[:, 1] * a) / w0])
    xs = jnp.concatenate([jnp.array([-a, a], dtype), x_cross, x_edge])
    (xs,) = _sort_small(jnp.clip(jnp.where(jnp.isfinite(xs), xs, -a), -a, a))
    x0, x1 = xs[:-1], xs[1:]  # (S,)

    w1 = jnp.where(W[:, 1] == 0, jnp.nan, W[:, 1])
    line_y = lambda x: -(W[:, 0] * x[:, None] + B) / w1  # (S,) -> (S, L), NaN for vertical lines
    xm = (x0 + x1) / 2
    ym = line_y(xm)
    # A line is inside the box on the whole slab or outside on the whole slab; decide at the midpoint
    # (deciding at the ends would misplace nearly vertical lines by rounding).
    inside = jnp.isfinite(ym) & (jnp.abs(ym) < a)
    outside_y = jnp.clip(jnp.where(jnp.isfinite(ym), ym, -a), -a, a)
    y0 = jnp.where(inside, jnp.clip(line_y(x0), -a, a), outside_y)
    y1 = jnp.where(inside, jnp.clip(line_y(x1), -a, a), outside_y)
    edge = jnp.full(x0.shape + (1,), a, dtype)
    y0 = jnp.concatenate([-edge, y0, edge], axis=1)  # (S, L + 2) with the box's bottom and top
    y1 = jnp.concatenate([-edge, y1, edge], axis=1)
    keys = jnp.concatenate([-edge, jnp.where(inside, ym, outside_y), edge], axis=1)
    _, y0, y1 = _sort_small(keys, y0, y1)
    g = float(1.0 / np.sqrt(3.0))
    hx = (x1 - x0) / 2
    pts, wts = [], []
    for sx in (-g, g):
        frac = (1 + sx) / 2
        x = xm + hx * sx  # (S,)
        y = (1 - frac) * y0 + frac * y1  # (S, L + 2): each line's height at x
        lo, hi = y[:, :-1], y[:, 1:]
        for sy in (-g, g):
            yy = (lo + hi) / 2 + (hi - lo) / 2 * sy
            pts.append(jnp.stack([jnp.broadcast_to(x[:, None], yy.shape), yy], -1).reshape(-1, 2))
            wts.append((hx[:, None] * jnp.maximum(hi - lo, 0.0) / 2).reshape(-1) / (4 * a * a))
    return Quadrature(jnp.concatenate(pts), jnp.concatenate(wts))


def tensor_rule_2d(inputs, dtype=None, cells: int | None = None, order: int | None = None) -> Quadrature:
    """Tensor Gauss-Legendre rule on ``cells x cells`` equal cells of the (truncated) support."""
    dtype = dtype or jnp.zeros(()).dtype
    cells = cells or inputs.cells
    order = order or inputs.order
    lo, hi = inputs.support()
    edges = jnp.linspace(lo, hi, cells + 1, dtype=dtype)
    rule = piecewise_rule_1d(edges, order, inputs.density_1d)
    x, wx = rule.points[:, 0], rule.weights
    pts = jnp.stack(jnp.meshgrid(x, x, indexing="ij"), -1).reshape(-1, 2)
    return Quadrature(pts, (wx[:, None] * wx[None, :]).reshape(-1))
