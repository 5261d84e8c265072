"""The toy model of superposition (TMS): parameters, forward map, data, and its losses.

    f(x; W, b) = ReLU(W^T W x + b),    W: (r, c),  b: (c,)

with r hidden dimensions (r = 2 in the study) and c features.  Inputs x = mu e_i, i uniform over the
c features and mu ~ U[0, 1] (one active feature of random magnitude).  Losses, summed over the c
outputs (no 1 / (2 sigma^2) factor):

    L(w)   = E_x ||x - f(x; w)||^2                       (population loss, exact: :func:`population_loss`)
    L_n(w) = (1/n) sum_k ||x_k - f(x_k; w)||^2           (empirical loss: :func:`empirical_loss`)

Parameters are the pytree ``TMSParams(W, b)``; the flat order (Hessians, Fisher matrices, samplers'
flat coordinates, ``jax.flatten_util.ravel_pytree``) is W row-major (W[0, 0], ..., W[0, c-1],
W[1, 0], ...), then b: D = (r + 1) c.

The exact population loss.  With G = W^T W (c, c), the input mu e_i gives the outputs
f_j = ReLU(mu G_ji + b_j), so

    L = (1/c) sum_i sum_j T(G_ji, b_j, delta_ij),   T(a, b, t) = int_0^1 (t mu - ReLU(a mu + b))^2 dmu.

a mu + b is positive on one interval [lo, hi] of [0, 1] (empty, all of it, or cut at the kink
mu* = -b / a, inside (0, 1) exactly when b and a + b have opposite signs), so

    T = t^2 / 3 + P(hi) - P(lo),   P(mu) = (a^2 - 2 t a) mu^3 / 3 - b (t - a) mu^2 + b^2 mu,

P the antiderivative of ((t - a) mu - b)^2 - t^2 mu^2.  The integrand of T is continuous at the kink,
so T is C^1 in (a, b) everywhere and analytic away from b = 0 and a + b = 0 (the pre-activation
zero at an end of [0, 1]).  In JAX the kink is computed only where it lies inside (0, 1) with
|a| above tiny^(1/4) of the dtype (the double-where trick: the division never sees a = 0, so
jax.grad and jax.hessian return no NaN, also at G_ji = 0); for |a| below that the pre-activation is
below 2 tiny^(1/4) on all of [0, 1] and the term is computed as if the kink were at an end (an error
below 4 tiny^(1/4), 1e-77 in float64).

References:
    Chen, Lau, Mendel, Wei, Murfet 2023, "Dynamical versus Bayesian phase transitions in a toy model
    of superposition", arXiv 2310.06301; Elhage et al. 2022, "Toy models of superposition".
"""
from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..network import check_count, check_finite

__all__ = ["R_HIDDEN", "TMSParams", "active_interval", "check_params", "check_positive", "coordinate_names",
           "empirical_loss", "flat_empirical_loss", "flat_population_loss", "forward", "from_flat", "make_params",
           "num_params", "population_loss", "sample_inputs", "squared_errors", "term", "to_flat"]

R_HIDDEN = 2
"""The hidden dimension r of the study (the k-gons live in the plane)."""


class TMSParams(NamedTuple):
    """Parameters of the toy model of superposition, a pytree (NamedTuple).

        f(x) = ReLU(W^T W x + b)

    A batch of parameters carries leading batch axes on both leaves (``W: (..., r, c)``,
    ``b: (..., c)``), which is what ``jax.vmap`` produces.

    Attributes:
        W: (r, c) the embedding; column i is feature i's direction in the r-dimensional hidden space.
        b: (c,) the output biases.

    References:
        Chen, Lau, Mendel, Wei, Murfet 2023 (arXiv 2310.06301), Section 2.
    """

    W: jax.Array
    b: jax.Array

    @property
    def num_features(self) -> int:
        return self.W.shape[-1]

    @property
    def hidden(self) -> int:
        return self.W.shape[-2]


def make_params(W, b, dtype=None) -> TMSParams:
    """A ``TMSParams`` from array-likes, checking shapes and finiteness.

    Args:
        W: (r, c) embedding.
        b: (c,) biases, or a scalar for every feature.
        dtype: the leaves' dtype (default: W's floating dtype).

    Returns:
        TMSParams(W (r, c), b (c,)).

    Raises:
        ValueError: W not 2-D, b not of shape (c,), or a non-finite entry.
    """
    W = jnp.asarray(W, dtype=dtype)
    dtype = dtype or jnp.result_type(W, float)
    W = W.astype(dtype)
    if W.ndim != 2:
        raise ValueError(f"W: expected shape (r, c), got {W.shape}")
    c = W.shape[1]
    b = jnp.asarray(b, dtype=dtype)
    b = jnp.full((c,), b, dtype) if b.ndim == 0 else b
    if b.shape != (c,):
        raise ValueError(f"b: expected shape ({c},) to match W's {c} columns, got {b.shape}")
    check_finite(W, "W")
    check_finite(b, "b")
    return TMSParams(W, b)


def check_params(params, name: str = "params") -> TMSParams:
    """params if it is one well-shaped ``TMSParams`` (W (r, c), b (c,)); else TypeError / ValueError naming it."""
    if not isinstance(params, TMSParams):
        raise TypeError(f"{name}: expected slt_relu.tms.TMSParams, got {type(params).__name__}")
    W, b = params
    if np.ndim(W) != 2 or np.shape(b) != np.shape(W)[-1:]:
        raise ValueError(f"{name}: expected W of shape (r, c) and b of shape (c,), got {np.shape(W)} and {np.shape(b)}")
    return params


def check_positive(value, name: str, *, allow_zero: bool = False) -> float:
    """float(value) if it is a finite real number > 0 (>= 0 with ``allow_zero``), not a bool; else a ValueError
    naming it (the scalar settings of the TMS functions: beta, prior_std, learning_rate, ...)."""
    ok = isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool)
    if not ok or not math.isfinite(float(value)) or float(value) < 0 or (float(value) == 0 and not allow_zero):
        raise ValueError(f"{name}: expected a {'non-negative' if allow_zero else 'positive'} finite number, "
                         f"got {value!r}")
    return float(value)


def num_params(num_features: int, hidden: int = R_HIDDEN) -> int:
    """The number of parameters, D = (r + 1) c.

    Args:
        num_features: c >= 1.
        hidden: r >= 1 (default 2).

    Returns:
        D.
    """
    return (check_count(hidden, "hidden") + 1) * check_count(num_features, "num_features")


def to_flat(params: TMSParams) -> jax.Array:
    """The flat parameters in the module's order: W row-major, then b.

    Args:
        params: one ``TMSParams`` (W (r, c), b (c,)).

    Returns:
        (D,) with D = (r + 1) c, the same vector as ``jax.flatten_util.ravel_pytree(params)[0]``.
    """
    return jnp.concatenate([params.W.reshape(-1), params.b])


def from_flat(flat, num_features: int, hidden: int = R_HIDDEN) -> TMSParams:
    """Inverse of :func:`to_flat`.

    Args:
        flat: (D,) with D = (hidden + 1) num_features.
        num_features: c >= 1.
        hidden: r >= 1 (default 2).

    Returns:
        TMSParams(W (r, c), b (c,)).
    """
    D = num_params(num_features, hidden)
    flat = jnp.asarray(flat)
    if flat.shape != (D,):
        raise ValueError(f"flat: expected shape ({D},) for c = {num_features}, r = {hidden}; got {flat.shape}")
    c, r = num_features, hidden
    return TMSParams(flat[: r * c].reshape(r, c), flat[r * c:])


def coordinate_names(num_features: int, hidden: int = R_HIDDEN) -> list[str]:
    """Names of the D flat coordinates, in order: ``W[h,i]`` (row-major), then ``b[i]``."""
    c, r = check_count(num_features, "num_features"), check_count(hidden, "hidden")
    return [f"W[{h},{i}]" for h in range(r) for i in range(c)] + [f"b[{i}]" for i in range(c)]


def forward(params: TMSParams, x) -> jax.Array:
    """The model's output.

        f(x; W, b) = ReLU(W^T W x + b)

    Args:
        params: one ``TMSParams`` (vmap for a batch of parameters).
        x: (..., c) inputs.

    Returns:
        (..., c) outputs.
    """
    x = jnp.asarray(x)
    c = params.W.shape[-1]
    if x.shape[-1:] != (c,):
        raise ValueError(f"x: expected a last axis of c = {c} features, got shape {x.shape}")
    return jax.nn.relu((x @ params.W.T) @ params.W + params.b)


def sample_inputs(key, n: int, num_features: int, dtype=None) -> jax.Array:
    """n inputs x = mu e_i, i uniform over the c features, mu ~ U[0, 1], independently.

    Args:
        key: a PRNG key (split once: features, magnitudes).
        n: the number of inputs, >= 1.
        num_features: c >= 1.
        dtype: the inputs' dtype (default: JAX's default float).

    Returns:
        (n, c) the inputs, one nonzero entry a row.

    References:
        Chen et al. 2023 (arXiv 2310.06301), Section 2.
    """
    n, c = check_count(n, "n"), check_count(num_features, "num_features")
    dtype = dtype or jnp.zeros(()).dtype
    k_i, k_mu = jax.random.split(key)
    i = jax.random.randint(k_i, (n,), 0, c)
    mu = jax.random.uniform(k_mu, (n,), dtype)
    return jax.nn.one_hot(i, c, dtype=dtype) * mu[:, None]


def squared_errors(params: TMSParams, x) -> jax.Array:
    """||x - f(x; w)||^2 for each input: x (..., c) -> (...)."""
    return jnp.sum((jnp.asarray(x) - forward(params, x)) ** 2, axis=-1)


@jax.jit
def empirical_loss(params: TMSParams, x) -> jax.Array:
    """The empirical loss, a mean over the data.

        L_n(w) = (1/n) sum_k ||x_k - f(x_k; w)||^2

    The TMS is an autoencoder: the data are the inputs alone, so ``x`` is the whole data set (the
    ``data`` argument of :class:`~slt_relu.posterior.target.TemperedTarget` and
    :func:`~slt_relu.posterior.llc.estimate_llc`).

    Args:
        params: one ``TMSParams``.
        x: (n, c) inputs (:func:`sample_inputs`).

    Returns:
        () L_n.

    References:
        Chen et al. 2023 (arXiv 2310.06301), Section 2.
    """
    return jnp.mean(squared_errors(params, x))


def flat_empirical_loss(flat, x) -> jax.Array:
    """:func:`empirical_loss` on flat parameters: the loss
    :func:`~slt_relu.posterior.free_energy_curve.smc_free_energy_curve` takes (a module-level function,
    hashable).

    Args:
        flat: (D,) parameters in the module's flat order, D = (r + 1) c.
        x: (n, c) inputs.

    Returns:
        () L_n.
    """
    c = x.shape[-1]
    r = flat.shape[-1] // c - 1
    return empirical_loss(TMSParams(flat[: r * c].reshape(r, c), flat[r * c:]), x)


def _tiny_slope(dtype) -> float:
    """tiny(dtype)^(1/4): slopes below it are treated as zero in the kink (module docstring)."""
    return float(jnp.finfo(dtype).tiny) ** 0.25


def active_interval(a, b):
    """The interval [lo, hi] of mu in [0, 1] where a mu + b > 0 (lo = hi where it is empty).

    The kink mu* = -b / a is used only where it lies inside (0, 1) (b and a + b of opposite signs)
    and |a| > tiny^(1/4); its division sees a safe denominator elsewhere (the double-where trick), so
    derivatives are finite at a = 0.  Elementwise over broadcast a, b.

    Returns:
        (lo, hi), each of the broadcast shape of a and b.
    """
    a, b = jnp.asarray(a), jnp.asarray(b)
    inside = (b * (a + b) < 0) & (jnp.abs(a) > _tiny_slope(jnp.result_type(a, b)))
    a_safe = jnp.where(inside, a, 1.0)
    kink = jnp.where(inside, -b / a_safe, 0.0)
    whole = (0.5 * a + b > 0).astype(kink.dtype)            # no kink inside: active on all of [0, 1] or on none
    lo = jnp.where(inside, jnp.where(a > 0, kink, 0.0), 0.0)
    hi = jnp.where(inside, jnp.where(a > 0, 1.0, kink), whole)
    return lo, hi


def term(a, b, t):
    """T(a, b, t) = int_0^1 (t mu - ReLU(a mu + b))^2 dmu, exactly (module docstring); elementwise.

        T = t^2 / 3 + P(hi) - P(lo),  P(mu) = (a^2 - 2 t a) mu^3 / 3 - b (t - a) mu^2 + b^2 mu.

    Args:
        a: the slope G_ji; b: the bias b_j; t: the target's coefficient delta_ij (0 or 1); broadcast.

    Returns:
        T, of the broadcast shape.
    """
    lo, hi = active_interval(a, b)

    def P(m):
        return (a * a - 2 * t * a) * m ** 3 / 3 - b * (t - a) * m ** 2 + b * b * m

    return t * t / 3 + P(hi) - P(lo)


@jax.jit
def population_loss(params: TMSParams) -> jax.Array:
    """The exact population loss of the toy model of superposition.

        L(w) = E_x ||x - f(x; w)||^2 = (1/c) sum_i sum_j int_0^1 (mu delta_ij - ReLU(mu G_ji + b_j))^2 dmu,
        G = W^T W,

    each term in closed form (module docstring: :func:`term`).  Jit-able, vmappable and twice
    differentiable wherever no pre-activation vanishes at mu = 0 or mu = 1 (C^1 everywhere), with
    finite derivatives at G_ji = 0.

    Args:
        params: one ``TMSParams`` (W (r, c), b (c,)); vmap for a batch.

    Returns:
        () L(w).

    References:
        Chen et al. 2023 (arXiv 2310.06301), Section 2 (the loss) and Appendix (the k-gon losses as
        one-dimensional integrals over mu).
    """
    W, b = params
    if W.ndim != 2 or b.shape != W.shape[-1:]:
        raise ValueError(f"params: expected W of shape (r, c) and b of shape (c,) (vmap for a batch), got "
                         f"{W.shape} and {b.shape}")
    c = W.shape[-1]
    G = W.T @ W                                            # G[j, i] = <W_j, W_i>
    T = term(G, b[:, None], jnp.eye(c, dtype=G.dtype))      # T[j, i]: output j at input mu e_i
    return jnp.sum(T) / c


def flat_population_loss(flat, data=None) -> jax.Array:
    """:func:`population_loss` on flat parameters, ignoring ``data``: a loss of
    :func:`~slt_relu.posterior.free_energy_curve.smc_free_energy_curve` with no data (the tempered
    posterior of L itself; a module-level function, hashable).

    Args:
        flat: (3 c,) parameters of r = 2 in the module's flat order.
        data: ignored (the dummy data of a data-free posterior).

    Returns:
        () L(w).
    """
    c = flat.shape[-1] // (R_HIDDEN + 1)
    return population_loss(TMSParams(flat[: R_HIDDEN * c].reshape(R_HIDDEN, c), flat[R_HIDDEN * c:]))
