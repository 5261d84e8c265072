"""lambda of a toy-model-of-superposition k-gon minimum from the free-energy curve of its local potential.

At a refined k-gon w* (``slt_relu.tms.kgon``) the local free energy of a region U_a around it,

    Z_a(t) = int_{U_a} phi(v) exp(-t (L(w* + v) - L(w*))) dv ~ C t^(-lambda),   phi = N(0, prior_std^2 I),

is measured by tempered SMC (``slt_relu.posterior.free_energy_curve``) on a region U_a that keeps the
first-principles lambda's hypotheses:

- **the rotation is gauge-fixed**: W[1, 0] (column 0's component across its direction, 0 at w*) is pinned
  at 0, a slice through the rotation orbit (L is rotation invariant, so lambda is that of the slice).  Left
  free, the orbit spreads the particles over the prior's width while the other directions narrow as
  1/sqrt(t), and SMC's HMC moves (a diagonal mass matrix) fall behind above t ~ 1e8: t E_t[L - L*] then grows
  without bound (docs/experiments/tms_kgons.md);
- **negative unused biases stay negative**: each b_u of a feature with a negative unused bias is folded,
  b_u = b_u* - |v_b| <= b_u* = -1/(2c).  Its first-principles lambda holds only while every unused bias is
  negative (at b_u > 0 the loss falls, towards the "+" variant, by up to 1/(4c^2), which exp(-t ...) at
  t = 1e10 would weight above any prior tail); the fold restricts the integral to b_u <= b_u* (Z changes
  by a factor 2 a fold, not its t-dependence).  A Gaussian localization (SGLD's gamma) would have to be
  ~1e4 to keep b_u < 0, which biases the soft directions (curvature 0.02-0.06) unless t >> 1e6;
- **a hard ball** |v| <= ``radius``: outside it the potential is t (a wall), so no lower basin (another
  k-gon) can take over at large t.  :func:`kgon_lambda` checks the region: projected gradient descent from random
  starts inside the ball finds no loss below L(w*) (``region_min_loss`` >= 0).

``prior_std`` sets the region's scale: small enough that the flat directions' walls (|W_u| ~ 0.06 for the
negative unused columns at c = 6) are rarely reached, large enough that the softest direction (Hessian
eigenvalue h ~ 0.02 at the 6-gon) is resolved over the window: t h prior_std^2 >> 1 there (80 at t = 1e7).
lambda is fitted over the last ``decades`` of t up to ``t_max`` (m fixed at 1 by default: at these minima
the volume of {L - L* < eps} scales as eps^lambda without a log factor), with its standard error over
``runs`` independent SMC runs; the fit is repeated on the window's two halves (a drift between them says
the window is not asymptotic).

References:
    Chen, Lau, Mendel, Wei, Murfet 2023, "Dynamical versus Bayesian phase transitions in a toy model of
    superposition", arXiv 2310.06301; Watanabe 2009 (lambda of the local free energy).
"""
from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np

__all__ = ["KGonFit", "LocalKGonLoss", "kgon_lambda", "local_data", "region_min", "verdict"]

ESTIMATORS = ("free_energy", "tempered_loss", "thermodynamic")
WALL = 1.0                   # L - L* outside the ball: t * 1 at the fitted t is a wall


class LocalKGonLoss(NamedTuple):
    """L(w* + v) - L(w*) on the local coordinates v (3c - 1,) of a k-gon w* of c features (module docstring):
    v is the flat offset (W row-major, then b) without W[1, 0] (pinned at 0: the rotation's slice); the
    coordinates flagged in ``data["fold"]`` enter as -|v_j| (negative unused biases stay <= b_u*); outside
    |v| <= ``data["radius"]`` the value is WALL.  ``data``: {"center": (1, 3c) w*, "fold": (1, 3c) 0/1,
    "loss_star": (1,) L(w*), "radius": (1,)} (a leading data axis of 1).  Hashable: one compiled program per c."""

    num_features: int

    def __call__(self, v, data):
        import jax.numpy as jnp

        from ..models.tms import from_flat, population_loss

        c = self.num_features
        full = jnp.concatenate([v[:c], jnp.zeros((1,), v.dtype), v[c:]])
        full = jnp.where(data["fold"][0] > 0, -jnp.abs(full), full)
        dl = population_loss(from_flat(data["center"][0] + full, c)) - data["loss_star"][0]
        return jnp.where(jnp.sum(v * v) <= data["radius"][0] ** 2, dl, WALL)


def local_data(params, radius: float) -> dict:
    """The ``data`` of :class:`LocalKGonLoss` at the k-gon ``params`` (b_u < 0 on its zero columns are folded).

    Args:
        params: the k-gon w*, a ``TMSParams`` (W (2, c), b (c,)).
        radius: the ball |v| <= radius, > 0.
    """
    import jax.numpy as jnp

    from ..models.tms import check_params, check_positive, population_loss, to_flat

    check_params(params)
    radius = check_positive(radius, "radius")
    center = to_flat(params)
    c = params.W.shape[1]
    zero_column = jnp.sum(params.W ** 2, axis=0) == 0
    fold = jnp.concatenate([jnp.zeros(2 * c), (zero_column & (params.b < 0)).astype(center.dtype)])
    return {"center": center[None], "fold": fold[None], "loss_star": jnp.asarray([population_loss(params)]),
            "radius": jnp.asarray([radius], center.dtype)}


def region_min(loss: LocalKGonLoss, data: dict, key, starts: int = 8, steps: int = 400, lr: float = 0.2):
    """min over ``starts`` runs of projected gradient descent on the local loss inside the ball (random starts
    uniform in it, ``steps`` steps of size ``lr`` kept at 0.999 radius): below 0 exhibits a lower loss inside the
    region.  Compiled once per c."""
    return _region_min_jit()(loss, data, key, starts, steps, lr)


@lru_cache(maxsize=None)
def _region_min_jit():
    import jax

    return jax.jit(_region_min_impl, static_argnums=(0, 3, 4))


def _region_min_impl(loss, data, key, starts, steps, lr):
    """:func:`region_min`, traced."""
    import jax
    import jax.numpy as jnp

    dim = 3 * loss.num_features - 1
    R = 0.999 * data["radius"][0]
    project = lambda v: v * jnp.minimum(1.0, R / jnp.maximum(jnp.linalg.norm(v), 1e-300))
    f = lambda v: loss(v, data)

    def run(k):
        k1, k2 = jax.random.split(k)
        u = jax.random.normal(k1, (dim,), data["center"].dtype)
        v = u / jnp.linalg.norm(u) * R * jax.random.uniform(k2, (), u.dtype) ** (1.0 / dim)
        v, _ = jax.lax.scan(lambda v, _: (project(v - lr * jax.grad(f)(v)), None), v, None, length=steps)
        return f(v)

    return jnp.min(jax.vmap(run)(jax.random.split(key, starts)))


def _below(curve, t_hi: float):
    """The curve with its stages above t_hi dropped (NaN)."""
    keep = curve.t <= t_hi * (1 + 1e-12)
    nan = lambda a: np.where(keep, a, np.nan)
    return curve._replace(t=nan(curve.t), free_energy=nan(curve.free_energy), mean_loss=nan(curve.mean_loss))


class KGonFit(NamedTuple):
    """What a k-gon's lambda rests on (the ``details`` of :func:`kgon_lambda`'s estimate).

    Attributes:
        curve: the SMC runs' :class:`~slt_relu.posterior.learning_coefficient.TemperedCurve` of the local potential.
        estimator: the estimator reported as lambda.
        by_estimator: {estimator: LambdaEstimate} every estimator's fit over the window (ESTIMATORS).
        lower_half, upper_half: the reported estimator's fit on the window's lower and upper half (LambdaEstimate), or
            None where a half holds too few stages.
        drift_z: |upper - lower| over their combined standard error, or None.
        region_min_loss: the least L - L* that projected gradient descent found inside the region (:func:`region_min`).
        num_params: the local coordinates' count, 3c - 1.
        pinned: the coordinate pinned at 0 (the rotation's slice), "W[1,0]".
        folded: the folded coordinates (negative unused biases), e.g. ["b[4]"].
    """

    curve: object
    estimator: str
    by_estimator: dict
    lower_half: object
    upper_half: object
    drift_z: float | None
    region_min_loss: float
    num_params: int
    pinned: str
    folded: list


def kgon_lambda(key, params, smc, *, prior_std: float, radius: float, t_max: float, decades: float, runs: int,
                estimator: str = "free_energy", max_multiplicity: int = 1):
    """lambda at a k-gon minimum from tempered SMC's free-energy curve of its local potential (module docstring),
    fitted over the last ``decades`` of t up to ``t_max`` by the asymptotic form
    (``slt_relu.posterior.free_energy_curve.fit_learning_coefficient``, L* = 0) and again on the window's two halves:

        Z_a(t) = int_{U_a} phi(v) exp(-t (L(w* + v) - L(w*))) dv ~ C t^(-lambda).

    Args:
        key: a PRNG key.
        params: the refined k-gon w*, a ``TMSParams`` (``slt_relu.tms.refined_kgon``).
        smc: the SMC runs' ``SMCSettings``.
        prior_std: phi = N(0, prior_std^2 I) on the local coordinates v.
        radius: the region's ball |v| <= radius.
        t_max: the largest inverse temperature t.
        decades: the fitted window, in decades of t below t_max.
        runs: independent SMC runs (their spread: the errors), >= 2.
        estimator: the estimator reported as lambda (ESTIMATORS, ``slt_relu.posterior.free_energy_curve``).
        max_multiplicity: the largest m the fit considers (1: m fixed at 1).

    Returns:
        :class:`~slt_relu.posterior.learning_coefficient.LambdaEstimate`: the reported estimator's fit, with the
        warnings (a run short of t_max, a lower loss inside the region, a drift over 3 se between the halves) and
        details :class:`KGonFit` (the curve, every estimator's fit, the halves, the region's check).

    References:
        Chen, Lau, Mendel, Wei, Murfet 2023 (the k-gons); Watanabe 2009 (lambda of the local free energy).
    """
    import jax

    from ..network import check_count
    from ..posterior.free_energy_curve import fit_learning_coefficient, smc_free_energy_curve
    from ..models.tms import check_params, check_positive

    check_params(params)
    for name, value in (("prior_std", prior_std), ("radius", radius), ("t_max", t_max), ("decades", decades)):
        check_positive(value, name)
    check_count(runs, "runs", 2)
    check_count(max_multiplicity, "max_multiplicity")
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator: expected one of {ESTIMATORS}, got {estimator!r}")

    c = params.W.shape[1]
    loss, data = LocalKGonLoss(c), local_data(params, radius)
    k_curve, k_region = jax.random.split(key)
    curve = smc_free_energy_curve(k_curve, loss, 3 * c - 1, t_max, smc, num_runs=runs, prior_std=prior_std,
                                  data=data)
    fit = lambda cv, est, dec: fit_learning_coefficient(cv, est, loss_min=0.0, decades=dec,
                                                        max_multiplicity=max_multiplicity)
    by_estimator = {name: fit(curve, name, decades) for name in ESTIMATORS}
    main = by_estimator[estimator]
    halves = {}
    half = decades / 2
    for part, cv in (("lower", _below(curve, t_max / 10 ** half)), ("upper", curve)):
        try:
            halves[part] = fit(cv, estimator, half)
        except ValueError:                       # too few stages in half the window
            halves[part] = None
    lo, hi = halves["lower"], halves["upper"]
    drift = None if lo is None or hi is None else abs(hi.lambda_ - lo.lambda_) / max(np.hypot(lo.se, hi.se), 1e-300)
    lowest = float(region_min(loss, data, k_region))
    warnings = []
    short = float(np.nanmin(np.nanmax(curve.t, axis=1)))
    if short < t_max * (1 - 1e-9):
        warnings.append(f"an SMC run stopped at t = {short:.3g} < t_max (smc.max_stages)")
    if lowest < -1e-10:
        warnings.append(f"the region holds a lower loss (L - L* = {lowest:.3g}): not a local minimum at "
                        "estimate.radius")
    if drift is not None and drift > 3:
        warnings.append(f"lambda drifts across the window: {lo.lambda_:.4g} +- {lo.se:.2g} on its lower half, "
                        f"{hi.lambda_:.4g} +- {hi.se:.2g} on its upper half")
    folded = [f"b[{j - 2 * c}]" for j in np.flatnonzero(np.asarray(data["fold"][0]))]
    details = KGonFit(curve, estimator, by_estimator, lo, hi, drift, lowest, 3 * c - 1, "W[1,0]", folded)
    return main._replace(warnings=main.warnings + tuple(warnings), details=details)


def verdict(lam: float, se: float, exact: float | None) -> tuple[str, float | None]:
    """('agrees'/'differs' ... within 3 se, z) against the first-principles value, or ('no first-principles
    value', None)."""
    if exact is None:
        return "no first-principles value", None
    z = (lam - exact) / se if se > 0 else float("inf")
    word = "agrees" if abs(z) <= 3 else "differs"
    return f"{word} ({lam - exact:+.3g} = {z:+.1f} se, {100 * (lam / exact - 1):+.1f} %)", float(z)
