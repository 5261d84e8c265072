"""The k-gons of the toy model of superposition as critical points, and their table.

The table (:func:`kgon_table`) checks every k-gon (``slt_relu.tms.kgon``: the points, their refined length and
bias and their variants) in the full parameter space (W, b), D = 3 c:
the gradient norm of L, the Hessian's eigenvalues (positive / zero / negative relative to the
largest |eigenvalue|), the exact Fisher information's rank (``slt_relu.tms.fisher``), whether the
point is a minimum, a saddle (a descent direction exhibited) or not critical, and the learning
coefficient lambda where it follows from first principles:

- "morse-bott": at a minimum where L is smooth, the Hessian is positive semi-definite and its null
  space is spanned by the rotation orbit's tangent and the coordinates (W_u, b_u) of the features
  with negative unused biases.  The rotation is an exact symmetry, and L does not depend on those
  coordinates at all in a neighbourhood (every pre-activation they enter has a strictly negative
  bias, b_u < 0 or the active b < 0, so stays <= 0 for small W_u).  By the Morse-Bott lemma L is
  then L* + a nondegenerate quadratic in the remaining coordinates, so lambda = rank(H) / 2 with
  multiplicity 1.  It would not hold if a null direction of H were flat only to second order: a
  direction where L grows like t^4 contributes 1/4, not 0, and a null direction with a cubic term
  makes the point a saddle; the check that the null space is exactly the span of the exactly flat
  directions excludes both.
- "sandwich" (k <= 4, negative unused biases, where L is not C^2): near the point L - L* is
  bounded above and below by constant multiples of a sum of squares of m local coordinates, and
  does not depend on (or vanishes on a set of positive measure in) the others, so the volume of
  {L - L* < eps} scales as eps^(m/2): lambda = m / 2.  The coordinates: every active column's
  length r_i and bias b_i (the diagonal term int (mu - ReLU(mu r_i^2 + b_i))^2 is a positive-definite
  quadratic in (r_i^2 - 1, b_i) up to O(|b_i|^3)); for k = 4 the three relative angles (any change
  makes one neighbour angle smaller than 90 degrees, G_ji > 0, whose term h(G, b_j) =
  int ReLU(mu G + b_j)^2 costs ~ G^2 unless b_j < -G / 4 costs b_j^2); for k = 3, 4 the 2 (c - k)
  unused columns (the active columns positively span the plane, so max_j <W_j, W_u> >= |W_u| / 2
  enters an h term).  For k = 3 the relative angles only enter through h(G < 0, b_j) = O(b_j^3);
  for k = 2 the two columns are antipodal, so an unused column's terms vanish only on the line
  orthogonal to them and its component along them enters an h term: one coordinate per unused
  column; for k = 1 the unused columns with <W_1, W_u> <= 0 form a half-plane (positive measure) on
  which their terms vanish, and they add nothing.  Hence m = 2k + 3 + 2 (c - 4) for k = 4
  (lambda = c + 3/2), m = 2c for k = 3 (lambda = c), m = 4 + (c - 2) for k = 2 (lambda = (c + 2)/2),
  m = 2 for k = 1 (lambda = 1).  A hand derivation; SGLD at the c = 4 square
  agrees with 5.5 and not with half the rank of the one-sided Hessian, 4 (tests/test_tms_posterior.py).

A local lambda with negative unused biases describes a neighbourhood small enough that every b_u
stays negative: the flat b_u directions end at b_u = 0, beyond which L decreases (towards the "+"
variant), so a localized sampler whose localization lets b_u reach 0 does not measure it.

References:
    Chen, Lau, Mendel, Wei, Murfet 2023, "Dynamical versus Bayesian phase transitions in a toy model
    of superposition", arXiv 2310.06301 (the k-gon critical points, their losses and variants);
    Watanabe 2009 (lambda of a nondegenerate critical manifold: half its codimension).
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..network import check_count, check_number
from .fisher import fisher_rank
from .kgon import check_kgon_args, positive_unused_bias, refine_kgon, refined_kgon, variant_name
from ..models.tms import R_HIDDEN, TMSParams, from_flat, population_loss, to_flat
from .symmetry import rotation_generator

__all__ = ["HessianCounts", "KGonRecord", "hessian_counts", "is_smooth", "kgon_record", "kgon_table", "loss_hessian",
           "sandwich_lambda"]


@jax.jit
def _full_derivatives(flat):
    c = flat.shape[0] // (R_HIDDEN + 1)
    L = lambda w: population_loss(from_flat(w, c))
    return L(flat), jax.grad(L)(flat), jax.hessian(L)(flat)


def loss_hessian(params: TMSParams) -> jax.Array:
    """The Hessian of the exact population loss L in the flat order (W row-major, then b).

    Where L is not C^2 (:func:`is_smooth` false) it is the second derivative of the piece of the closed
    form selected at the point (one-sided).

    Args:
        params: one TMSParams with W (2, c).

    Returns:
        (D, D) with D = 3 c.
    """
    if not isinstance(params, TMSParams) or np.shape(params.W)[:1] != (R_HIDDEN,):
        raise ValueError("params: expected one TMSParams with W of shape (2, c)")
    return _full_derivatives(to_flat(params))[2]


def is_smooth(params: TMSParams, atol: float = 1e-12) -> bool:
    """Whether L is analytic near params, conservatively: no pre-activation mu G_ji + b_j vanishes (within
    atol) at an end of [0, 1] (b_j = 0 or G_ji + b_j = 0), where the pieces of the closed form meet (the
    only places where a term can fail to be C^2; some of them are C^2 all the same)."""
    G = np.asarray(params.W.T @ params.W, np.float64)
    b = np.asarray(params.b, np.float64)[:, None]
    return bool(np.all(np.abs(b) > atol) and np.all(np.abs(G + b) > atol))


class HessianCounts(NamedTuple):
    """The Hessian's eigenvalues counted relative to the largest |eigenvalue| s: positive (> rtol s),
    zero (|.| <= rtol s), negative (< -rtol s); eigenvalues: all of them, ascending."""

    positive: int
    zero: int
    negative: int
    eigenvalues: np.ndarray


def hessian_counts(params: TMSParams, rtol: float = 1e-8) -> HessianCounts:
    """Count the eigenvalues of the Hessian of the exact population loss L at params (full space, D = 3c).

    Where L is not C^2 (:func:`is_smooth` false) the Hessian is that of the piece of the closed
    form selected at the point (a one-sided second derivative).

    Args:
        params: one TMSParams with r = 2.
        rtol: the relative threshold (default 1e-8: the refined k-gons' smallest nonzero eigenvalue is
            above 1e-3 of the largest and the flat ones below 1e-12 in float64).

    Returns:
        :class:`HessianCounts`.
    """
    H = np.asarray(_full_derivatives(to_flat(params))[2], np.float64)
    ev = np.linalg.eigvalsh(0.5 * (H + H.T))
    s = max(float(np.max(np.abs(ev))), 1e-300)
    return HessianCounts(int(np.sum(ev > rtol * s)), int(np.sum(np.abs(ev) <= rtol * s)),
                         int(np.sum(ev < -rtol * s)), ev)


def sandwich_lambda(num_features: int, k: int) -> float:
    """lambda of the k-gon (k <= 4, l = 1, b = 0) with negative unused biases, by the module
    docstring's sandwich bound: 1 for k = 1, (c + 2)/2 for k = 2, c for k = 3, c + 3/2 for k = 4."""
    c, k, _ = check_kgon_args(num_features, k, 0)
    if not 1 <= k <= 4:
        raise ValueError(f"k: the sandwich bound is derived for 1 <= k <= 4, got {k}")
    return {1: 1.0, 2: (c + 2) / 2, 3: float(c), 4: c + 1.5}[k]


class KGonRecord(NamedTuple):
    """One row of the k-gon table (:func:`kgon_table`).

    Attributes:
        c: the features.
        k: the active features.
        variant: the unused biases' signs, ``"+" * n_positive + "-" * (c - k - n_positive)``.
        n_positive: the unused features with a positive bias.
        length: the refined l of the active columns.
        bias: the refined b of the active features.
        positive_bias: the positive unused biases, 1/(2c).
        negative_bias: the negative unused biases, -1/(2c).
        loss: the exact population loss L.
        grad_norm: |grad L| in the full space (D = 3c).
        kind: "minimum", "saddle" (a descent direction or a lower loss nearby was found), "numerical
            minimum" (not C^2 there, no lower loss found nearby), "not critical" (grad_norm > the
            tolerance) or "unknown" (:func:`kgon_record`).
        smooth: whether L is analytic near the point (:func:`is_smooth`); where false the Hessian
            counts are those of a one-sided second derivative.
        hessian_positive: the Hessian's eigenvalues above hessian_rtol times the largest |eigenvalue|.
        hessian_zero: those within it.
        hessian_negative: those below minus it.
        fisher_rank: the rank of the exact Fisher information E[J^T J].
        lambda_: the learning coefficient from first principles, or None.
        lambda_rule: "morse-bott", "sandwich" or "" (module docstring).
        note: why lambda_ is None or the kind is what it is, where that needs saying.
    """

    c: int
    k: int
    variant: str
    n_positive: int
    length: float
    bias: float
    positive_bias: float
    negative_bias: float
    loss: float
    grad_norm: float
    kind: str
    smooth: bool
    hessian_positive: int
    hessian_zero: int
    hessian_negative: int
    fisher_rank: int
    lambda_: float | None
    lambda_rule: str
    note: str


def _null_space_is_explained(params, H, counts: HessianCounts, n_negative_unused: int, k: int, rtol: float) -> bool:
    """The Hessian's null space has the dimension of, and contains, the span of the rotation tangent and
    the (W_u, b_u) coordinates of the negative unused features (|H e| <= 10 rtol max|eigenvalue| for each)."""
    c = params.W.shape[1]
    basis = []
    if k:
        v = np.asarray(rotation_generator(params), np.float64)
        basis.append(v / np.linalg.norm(v))
    for u in range(c - n_negative_unused, c):
        for idx in (u, c + u, 2 * c + u):          # W[0, u], W[1, u], b[u] in the flat order
            e = np.zeros(3 * c)
            e[idx] = 1.0
            basis.append(e)
    if len(basis) != counts.zero:
        return False
    if not basis:
        return True
    E = np.stack(basis, 1)
    s = max(float(np.max(np.abs(counts.eigenvalues))), 1e-300)
    return bool(np.linalg.norm(H @ E, axis=0).max() <= rtol * s * 10)


@partial(jax.jit, static_argnames=("starts", "steps"))
def _lowest_nearby(flat, radius, key, starts: int = 8, steps: int = 400, lr: float = 0.2):
    """min over ``starts`` runs of projected gradient descent on L inside the ball |w - flat| <= radius
    (random starts in the ball) of L(w) - L(flat): negative exhibits a lower loss within radius."""
    c = flat.shape[0] // (R_HIDDEN + 1)
    f = lambda w: population_loss(from_flat(w, c))

    def project(w):
        d = w - flat
        return flat + d * jnp.minimum(1.0, radius / jnp.maximum(jnp.linalg.norm(d), 1e-300))

    def run(k):
        w = project(flat + radius * jax.random.normal(k, flat.shape, flat.dtype))
        w, _ = jax.lax.scan(lambda w, _: (project(w - lr * jax.grad(f)(w)), None), w, None, length=steps)
        return f(w)

    return jnp.min(jax.vmap(run)(jax.random.split(key, starts))) - f(flat)


def kgon_record(num_features: int, k: int, n_positive: int = 0, *, grad_tol: float | None = None,
                hessian_rtol: float = 1e-8, fisher_rtol: float | None = None, probe: float = 1e-3,
                search_radius: float = 1e-2, key=None) -> KGonRecord:
    """One row of the k-gon table: the refined k-gon's loss, criticality, Hessian, Fisher rank and lambda.

    The kind of a critical point: where L is C^2 near it, a negative Hessian eigenvalue makes it a
    saddle (confirmed by L(w +- probe v) < L(w) along its eigenvector v), and a positive
    semi-definite Hessian whose null space is that of the exactly flat directions a minimum
    ("morse-bott").  Where L is not C^2 (k <= 4): with negative unused biases a minimum (each term of
    L is at its smallest possible value there; lambda by the "sandwich" bound); otherwise projected
    gradient descent from 8 random starts inside the ball of radius ``search_radius`` decides between
    "saddle" (a loss lower by more than 1e-10 found in the ball) and "numerical minimum" (none found:
    evidence, not a proof, and no lambda).

    Args:
        num_features: c >= 1.
        k: the active features, 1 <= k <= c.
        n_positive: the unused features with a positive bias, 0 <= n_positive <= c - k.
        grad_tol: the gradient norm below which the point counts as critical (default 1e-9 in
            float64, 1e-3 in float32).
        hessian_rtol: the Hessian's relative zero threshold (:func:`hessian_counts`).
        fisher_rtol: the Fisher rank's relative threshold (default D eps).
        probe: the step along the most negative Hessian eigenvector that confirms a saddle.
        search_radius: the ball of the descent search at points where L is not C^2.
        key: the PRNG key of the search's starts (default ``jax.random.key(0)``: the table is
            deterministic).

    Returns:
        :class:`KGonRecord`.
    """
    c, k, n_positive = check_kgon_args(num_features, k, n_positive)
    if k == 0:
        raise ValueError("k: expected 1 <= k <= c (k = 0 has no polygon)")
    check_number(probe, "probe")
    check_number(search_radius, "search_radius")
    key = jax.random.key(0) if key is None else key
    params = refined_kgon(c, k, n_positive)
    flat = to_flat(params)
    dtype = flat.dtype
    if grad_tol is None:
        grad_tol = 1e-9 if dtype == jnp.float64 else 1e-3
    value, grad, H = (np.asarray(a, np.float64) for a in _full_derivatives(flat))
    value = float(value)
    grad_norm = float(np.linalg.norm(grad))
    counts = hessian_counts(params, hessian_rtol)
    smooth = is_smooth(params)
    n_neg_unused = c - k - n_positive
    note, rule, lam = "", "", None
    if grad_norm > grad_tol:
        kind, note = "not critical", f"|grad L| = {grad_norm:.3g} > {grad_tol:.1g}"
    elif smooth and counts.negative:
        v = jnp.asarray(np.linalg.eigh(0.5 * (H + H.T))[1][:, 0], dtype)
        slack = 1e3 * float(jnp.finfo(dtype).eps) * max(abs(value), 1.0)
        descent = min(float(_full_derivatives(flat + s * probe * v)[0]) for s in (1.0, -1.0)) < value - slack
        kind = "saddle" if descent else "unknown"
        note = f"{counts.negative} negative Hessian eigenvalues" + ("" if descent else "; no descent along them")
    elif smooth:
        if _null_space_is_explained(params, H, counts, n_neg_unused, k, hessian_rtol):
            kind, rule, lam = "minimum", "morse-bott", counts.positive / 2
        else:
            kind, note = "unknown", "Hessian null directions beyond the rotation and the negative unused features"
    elif n_positive == 0 and k <= 4:
        kind, rule, lam = "minimum", "sandwich", sandwich_lambda(c, k)
    else:
        drop = float(_lowest_nearby(flat, jnp.asarray(search_radius, dtype), key))
        if drop < -1e-10:
            kind, note = "saddle", f"L lower by {-drop:.3g} within distance {search_radius:g} (not C^2 here)"
        else:
            kind, note = "numerical minimum", (f"no lower L within distance {search_radius:g} (projected gradient "
                                               "descent, 8 starts); not C^2 here, lambda not derived")
    length, bias = refine_kgon(k)
    return KGonRecord(c, k, variant_name(c, k, n_positive), n_positive, float(length), float(bias),
                      positive_unused_bias(c), -positive_unused_bias(c), value, grad_norm, kind, smooth,
                      counts.positive, counts.zero, counts.negative, fisher_rank(params, fisher_rtol), lam, rule, note)


def kgon_table(num_features: Sequence[int] = (4, 5, 6, 8), *, variants: str = "all", **kwargs) -> list[KGonRecord]:
    """The k-gon table: a :class:`KGonRecord` for every c, every k = 1..c and every variant.

    Args:
        num_features: the c to tabulate.
        variants: "all" (n_positive = 0..c-k) or "extremes" (all unused biases negative, all positive).
        **kwargs: passed to :func:`kgon_record` (grad_tol, hessian_rtol, fisher_rtol, probe,
            search_radius, key).

    Returns:
        list of :class:`KGonRecord`, by c, k, n_positive.

    References:
        Chen et al. 2023 (arXiv 2310.06301), the k-gon critical points.
    """
    if variants not in ("all", "extremes"):
        raise ValueError(f"variants: expected 'all' or 'extremes', got {variants!r}")
    rows = []
    for c in num_features:
        c = check_count(c, "num_features")
        for k in range(1, c + 1):
            npos = range(c - k + 1) if variants == "all" else sorted({0, c - k})
            rows.extend(kgon_record(c, k, n, **kwargs) for n in npos)
    return rows
