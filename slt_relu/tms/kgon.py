"""Regular k-gons of the toy model of superposition: the points, their refined length and bias, their exact loss.

A k-gon of c features (0 <= k <= c): columns 0..k-1 of W at the angles 2 pi j / k with one length l,
one bias b on those k active features; the other c - k columns zero ("unused" features), each with
its own bias b_u.

Which unused biases the loss tells apart.  A zero column W_u makes output u the constant ReLU(b_u)
for every input, and (with every active bias <= 0) feature u's own input reaches no other output.
So with W_u = 0 the unused features enter L only through

    (1/c) [int_0^1 (mu - ReLU(b_u))^2 dmu + (c - 1) ReLU(b_u)^2] = (1/c) [1/3 - ReLU(b_u) + c ReLU(b_u)^2]:

every b_u <= 0 gives the same loss 1/(3c) (exactly flat: a *negative* unused bias, "-"), and the
best positive one is b_u = 1/(2c), lower by 1/(4c^2) ("+").  The variants are thus the number
n_+ of positive unused biases (which features carry them is a feature permutation), written as the
string ``"+" * n_+ + "-" * (c - k - n_+)``, and

    L(k-gon of c, n_+) = (k L_k + (c - k) / 3) / c - n_+ / (4 c^2),

with L_k the k-gon's loss as a model of k features: (l, b) depend on k alone (:func:`refine_kgon`).
Negative unused biases are set to -1/(2c) (any negative value gives the same loss).

Refined (l, b).  For k <= 4 every pair of active columns has G_ji = l^2 cos(2 pi m / k) <= 0, so l = 1,
b = 0 reconstructs the k active features exactly: L_k = 0, the minimum (a point where L is C^1 but
not C^2: pre-activations vanish at mu = 0).  For k >= 5 neighbours interfere (cos(2 pi / k) > 0)
and (l, b) minimise L_k by Newton's method on the exact loss (b < 0).

The table of every k-gon as a critical point, its Hessian, Fisher rank and first-principles lambda is
``slt_relu.tms.critical_points``.

References:
    Chen, Lau, Mendel, Wei, Murfet 2023, "Dynamical versus Bayesian phase transitions in a toy model
    of superposition", arXiv 2310.06301 (the k-gon critical points, their losses and variants);
    Watanabe 2009 (lambda of a nondegenerate critical manifold: half its codimension).
"""
from __future__ import annotations

from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np

from ..network import check_count, check_number
from ..models.tms import R_HIDDEN, TMSParams

__all__ = ["check_kgon_args", "kgon_loss_formula", "make_kgon", "positive_unused_bias", "refine_kgon", "refined_kgon",
           "variant_name"]


def positive_unused_bias(num_features: int) -> float:
    """The best positive bias of an unused feature (a zero column), b_u = 1/(2c) (module docstring).

    Args:
        num_features: c >= 1.

    Returns:
        1 / (2c).
    """
    return 0.5 / check_count(num_features, "num_features")


def variant_name(num_features: int, k: int, n_positive: int) -> str:
    """The variant's string: ``"+" * n_positive + "-" * (c - k - n_positive)`` ("" for k = c)."""
    return "+" * n_positive + "-" * (num_features - k - n_positive)


def check_kgon_args(num_features, k, n_positive) -> tuple[int, int, int]:
    """(c, k, n_positive) as ints if 0 <= k <= c and 0 <= n_positive <= c - k; else a ValueError naming the
    argument."""
    c = check_count(num_features, "num_features")
    k = check_count(k, "k", minimum=0)
    if k > c:
        raise ValueError(f"k: expected 0 <= k <= c = {c}, got {k}")
    n_positive = check_count(n_positive, "n_positive", minimum=0)
    if n_positive > c - k:
        raise ValueError(f"n_positive: expected 0 <= n_positive <= c - k = {c - k}, got {n_positive}")
    return c, k, n_positive


def make_kgon(num_features: int, k: int, length=1.0, bias=0.0, n_positive: int = 0, *, positive_bias=None,
              negative_bias=None, dtype=None) -> TMSParams:
    """A regular k-gon of c features.

        W[:, j] = l (cos(2 pi j / k), sin(2 pi j / k))  for j < k,   W[:, j] = 0 otherwise;
        b_j = b for j < k;  b_j = positive_bias for k <= j < k + n_positive;  b_j = negative_bias after.

    Entries of W below 4 eps l in magnitude are set to 0, so that columns at right angles have
    G_ji = 0 exactly.

    Args:
        num_features: c >= 1.
        k: the number of active features, 0 <= k <= c.
        length: l > 0.
        bias: b, the active features' common bias.
        n_positive: the unused features with a positive bias, 0 <= n_positive <= c - k.
        positive_bias: their bias (> 0; default 1/(2c), the best one).
        negative_bias: the other unused features' bias (< 0; default -1/(2c)).
        dtype: the leaves' dtype (default: JAX's default float).

    Returns:
        TMSParams(W (2, c), b (c,)).

    References:
        Chen et al. 2023 (arXiv 2310.06301), Section 3 (the k-gons).
    """
    c, k, n_positive = check_kgon_args(num_features, k, n_positive)
    check_number(length, "length")
    pos = positive_unused_bias(c) if positive_bias is None else positive_bias
    neg = -positive_unused_bias(c) if negative_bias is None else negative_bias
    check_number(pos, "positive_bias")
    if not (np.ndim(neg) == 0 and np.isfinite(neg) and neg < 0):
        raise ValueError(f"negative_bias: expected a negative finite number, got {neg!r}")
    if not np.isfinite(bias):
        raise ValueError(f"bias: expected a finite number, got {bias!r}")
    dtype = dtype or jnp.zeros(()).dtype
    theta = 2 * np.pi * np.arange(k) / max(k, 1)
    cols = float(length) * np.stack([np.cos(theta), np.sin(theta)])
    cols[np.abs(cols) <= 4 * np.finfo(np.float64).eps * float(length)] = 0.0
    W = np.zeros((R_HIDDEN, c))
    W[:, :k] = cols
    b = np.full(c, float(neg))
    b[:k] = float(bias)
    b[k:k + n_positive] = float(pos)
    return TMSParams(jnp.asarray(W, dtype), jnp.asarray(b, dtype))


@jax.jit
def _reduced_derivatives(z, cosines):
    """L_k(l, b) = T(l^2, b, 1) + sum_m T(l^2 cos_m, b, 0) (the k-gon's loss as a model of k features)
    with its gradient and Hessian in z = (l, b)."""
    from ..models.tms import term

    def L(z):
        l2 = z[0] ** 2
        return term(l2, z[1], 1.0) + jnp.sum(term(l2 * cosines, z[1], 0.0))

    return L(z), jax.grad(L)(z), jax.hessian(L)(z)


@lru_cache(maxsize=64)
def refine_kgon(k: int, *, tol: float = 1e-13, max_steps: int = 200) -> tuple[float, float]:
    """The refined (length, bias) of the regular k-gon: the minimiser of its exact loss.

        L_k(l, b) = (1/k) sum_i sum_j T(G_ji, b, delta_ij),  G_ji = l^2 cos(2 pi (i - j) / k),

    which is the same for every c >= k and every variant (module docstring).  k <= 4: (1, 0) in
    closed form (exact reconstruction of the active features).  k >= 5: damped Newton steps on the
    exact loss from (l, b) = (1.2, -0.3), until the gradient's norm is below ``tol`` (float64; in
    float32 1e4 eps).

    Args:
        k: the number of active features, >= 1 (k = 0 has no columns: (0, 0)).
        tol: the gradient norm to stop at.
        max_steps: Newton steps at most.

    Returns:
        (length, bias) as floats.

    Raises:
        RuntimeError: no convergence within max_steps.
    """
    k = check_count(k, "k", minimum=0)
    if k == 0:
        return 0.0, 0.0
    if k <= 4:
        return 1.0, 0.0
    dtype = jnp.zeros(()).dtype
    tol = max(tol, 1e4 * float(jnp.finfo(dtype).eps))
    cosines = jnp.asarray(np.cos(2 * np.pi * np.arange(1, k) / k), dtype)
    z = jnp.asarray([1.2, -0.3], dtype)
    for _ in range(max_steps):
        value, g, H = _reduced_derivatives(z, cosines)
        if float(jnp.linalg.norm(g)) < tol:
            return float(z[0]), float(z[1])
        ev = np.linalg.eigvalsh(np.asarray(H, np.float64))
        step = -jnp.linalg.solve(H, g) if ev[0] > 0 else -g
        t, slack = 1.0, 1e3 * float(jnp.finfo(dtype).eps) * abs(float(value))     # rounding of L near the minimum
        while t > 1e-10 and float(_reduced_derivatives(z + t * step, cosines)[0]) > float(value) + slack:
            t *= 0.5
        z = z + t * step
    raise RuntimeError(f"refine_kgon: Newton's method did not reach |grad| < {tol:.1g} for k = {k} in {max_steps} steps")


def refined_kgon(num_features: int, k: int, n_positive: int = 0, *, negative_bias=None, dtype=None) -> TMSParams:
    """:func:`make_kgon` at the refined (length, bias) of :func:`refine_kgon`, with the best positive
    unused bias 1/(2c) on n_positive unused features.

    Args:
        num_features: c >= 1.
        k: the active features, 0 <= k <= c.
        n_positive: the unused features with a positive bias, 0 <= n_positive <= c - k.
        negative_bias: the other unused features' bias (< 0; default -1/(2c)).
        dtype: the leaves' dtype (default: JAX's default float).

    Returns:
        TMSParams(W (2, c), b (c,)).
    """
    c, k, n_positive = check_kgon_args(num_features, k, n_positive)
    length, bias = refine_kgon(k)
    return make_kgon(c, k, length if k else 1.0, bias, n_positive, negative_bias=negative_bias, dtype=dtype)


def kgon_loss_formula(num_features: int, k: int, n_positive: int = 0) -> float:
    """The refined k-gon's loss from the k-feature model's (module docstring), a check of the table.

        L(k-gon of c, n_+) = (k L_k + (c - k) / 3) / c - n_+ / (4 c^2),

    L_k = 0 for k <= 4 and the closed form at the refined (l, b) for k >= 5.

    Args:
        num_features: c >= 1.
        k: the active features, 0 <= k <= c.
        n_positive: the unused features with a positive bias.

    Returns:
        L as a float.
    """
    c, k, n_positive = check_kgon_args(num_features, k, n_positive)
    Lk = 0.0
    if k >= 5:                                     # k <= 4: the active features are reconstructed exactly
        length, bias = refine_kgon(k)
        cosines = jnp.asarray(np.cos(2 * np.pi * np.arange(1, k) / k))
        Lk = float(_reduced_derivatives(jnp.asarray([length, bias], cosines.dtype), cosines)[0])
    return (k * Lk + (c - k) / 3) / c - n_positive / (4 * c * c)
