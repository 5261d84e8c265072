"""The learning coefficient lambda and its multiplicity m read off a tempered curve by its asymptotic form, and
tempered SMC's free-energy curve.

For the tempered posterior at inverse temperature t = n beta of a loss L with minimum L* on the prior's support
(K itself where there is no data),

    Z(t) = int phi(w) exp(-t L(w)) dw  ~  C exp(-t L*) t^(-lambda) (log t)^(m - 1),
    F(t) = t L* + lambda log t - (m - 1) log log t + c + c2 / log t + o(1 / log t),
    t E_t[L] = dF / dlog t = t L* + lambda - (m - 1) / log t - c2 / log^2 t + ...

(Watanabe 2009, Theorem 6.1 and Section 6.2: the asymptotic expansion of Z; the c2 term is the next order of
log(log t + c1) = log log t + c1 / log t - ..., which the fit carries: docs/concepts/learning_coefficient.md).
Tempered SMC computes F at every stage of its bridge from 0 to t_max in one run (``slt_relu.sampling.smc.SMCInfo``:
``log_evidence``, ``mean_slope``), so one run gives the whole curve (:func:`smc_free_energy_curve`), and
:func:`fit_learning_coefficient` reads lambda off any :class:`~slt_relu.posterior.learning_coefficient.TemperedCurve`
by three estimators:

- ``"free_energy"``: F(t_k) at the stages;
- ``"tempered_loss"``: the derivative form, t E_t[L] at the stages (the estimand of ``estimate_llc`` and WBIC at
  one t, here at every t of the curve; the one estimator of the MCMC curves, which have no F);
- ``"thermodynamic"``: F by thermodynamic integration of E_s[L] over s (trapezoids in log s), an estimate of F
  independent of SMC's importance weights.

The fit, a stated rule:

1. window: the last ``decades`` decades of t up to the smallest t_max of the runs (the asymptotic form holds best
   at large t); each run's curve is interpolated (linearly in log t) at ``points`` log-spaced t in the window, so
   that the runs share a grid: the mean curve and, point by point, its standard error over runs;
2. m: for each candidate m = 1 .. ``max_multiplicity`` the derivative form t E_t[L] (whose points, unlike F's
   cumulative sums, have nearly independent errors) is fitted to the mean curve by weighted least squares (with
   c2 / log^2 t for m >= 2 only: for m = 1 the next terms are powers of t); starting from m = 1, m grows while the
   next candidate lowers chi^2 by at least 9 (three standard deviations of a one-parameter change).  The chosen m
   is identified only if (a) m + 1 fits worse by at least 4 (m = 1: two standard deviations; where m = 2's
   -1 / log t barely changes over the window, at large t or from noisy chains, the two fit alike and m = 1 would
   otherwise be read off the noise) or by at least 9 (m >= 2, since the c2 term lets m + 1 mimic m over a short
   range of 1 / log t), (b) each half of the window, on its own, chooses the same m, and (c) lambda with that m on
   the two halves agrees within 3 combined standard errors (else it still drifts along t: the window is not
   asymptotic).  Otherwise m is None ("not identifiable at this range", the reason says which test failed) and
   lambda is reported for the chosen m; ``lambda_by_m`` gives lambda for every candidate;
3. lambda: each run's curve of the chosen estimator is fitted with that m (least squares), and lambda is the runs'
   mean with its standard error over runs s (their sd / sqrt(runs)).  Where m is not identifiable, lambda's
   standard error also carries the choice of m: over the m's the rule could not exclude (the chosen one, each
   half's, and m + 1 where it was not rejected and m < ``max_multiplicity``; where these are the chosen m alone,
   e.g. lambda drifts but every part chooses the same m, the standard error is s),
   lambda_se^2 = s^2 + mean_k (lambda_k - lambda)^2, the mean square error of the reported lambda if m were any of
   them with equal weight (lambda_k: the estimator's lambda at m = k).  A standard error over runs alone would
   state a precision the fit does not have (lambda at m and m + 1 differ by about 1 / log t at the window, often
   many times s).
4. the residual check: chi^2 of the mean curve's residuals of that fit against the points' standard errors; for F
   and its thermodynamic integral the points' errors are strongly correlated (cumulative sums), so only
   ``tempered_loss`` has a meaningful p-value, which is reported for every estimator.

Choosing the window.  m's signal (m - 1) / log t shows best at small t, the next pole's power t^(-(lambda2 -
lambda)) fades only at large t, so a population curve (L* given) is read over a window wide enough for both; the
forms carry no power of t with a free exponent (with one, the exact curves of the two-parameter crossings fit at the
wrong m as well as at the right one, so m could not be identified).  A data set's curve (L* fitted:
``loss_min=None``) is read over t = n beta well below n: a data set's tempered posterior departs from the
population's by a random term of order sqrt(beta), U_n sqrt(lambda beta / 2) in t E_t[L_n] with U_n asymptotically
Gaussian (Watanabe 2013, WBIC's main theorem), largest at the Bayes posterior beta = 1.  Such a window reaches down
to small t, where the expansion's power corrections are not negligible, so with L* fitted every form carries c3 / t
beside t L* (in F and, with another coefficient, in t E_t[L]): the leading correction of the regular directions
(for a regular model under a Gaussian prior, F(t) = t L* + (d / 2) log t + c + c3 / t + O(t^(-2)) exactly), which
a curve with L* given, read further out, goes without (there the term would only weaken m's identification).  Every
half of the window must hold more grid points than the largest candidate's terms (:func:`min_points`).  The
readings that chose these rules: docs/notes.md; by window and case: docs/experiments/known_lambda_suite.md.

References:
    Watanabe 2009, "Algebraic Geometry and Statistical Learning Theory" (Theorem 6.1, Section 6.2); Watanabe 2013,
    "A widely applicable Bayesian information criterion".
"""
from __future__ import annotations

import math
from typing import Literal, NamedTuple

import numpy as np

from .learning_coefficient import LambdaEstimate, TemperedCurve, weighted_least_squares

__all__ = ["AsymptoticFit", "fit_learning_coefficient", "min_points", "smc_free_energy_curve"]

ESTIMATORS = ("free_energy", "tempered_loss", "thermodynamic")


class AsymptoticFit(NamedTuple):
    """The asymptotic fit's own numbers (the ``details`` of :func:`fit_learning_coefficient`'s estimate; module
    docstring's rule).

    Attributes:
        estimator: "free_energy", "tempered_loss" or "thermodynamic".
        chi2_by_m: the derivative form's chi^2 for each candidate m (m -> chi^2).
        lambda_by_m: lambda of the chosen estimator for each candidate m (m -> lambda).
        lambda_se_by_m: its standard error over runs for each candidate m (m -> se).
        lambda_se_runs: lambda's standard error over runs alone, at the reported m.
        m_candidates: the m's the rule could not exclude (the identified m alone where it is identified).
        loss_min: L* (given, or fitted: the runs' mean).
        run_loss_min: (R,) each run's L* (given, or fitted to that run's curve: a run's own data set has its own).
        residual_chi2, residual_dof, residual_p: the chosen fit's residual check (module docstring, step 4).
        num_runs: the runs behind the fit.
        grad_evals: the gradients they spent.
    """

    estimator: str
    chi2_by_m: dict
    lambda_by_m: dict
    lambda_se_by_m: dict
    lambda_se_runs: float
    m_candidates: tuple
    loss_min: float
    run_loss_min: tuple
    residual_chi2: float
    residual_dof: int
    residual_p: float
    num_runs: int
    grad_evals: int


def _curve_of_smc(draws, t_max) -> TemperedCurve:
    """The curve of tempered SMC runs (``slt_relu.sampling.sample`` with SMCSettings) whose t_max (R,) or scalar is
    the last argument they were given."""
    info = draws.info
    lam = np.asarray(info.lambda_, float)
    used = np.arange(lam.shape[1])[None, :] < np.asarray(info.num_stages)[:, None]
    t = np.where(used, lam * np.broadcast_to(np.asarray(t_max, float), lam.shape[:1])[:, None], np.nan)
    return TemperedCurve(t, np.where(used, -np.asarray(info.log_evidence, float), np.nan),
                         np.where(used, np.asarray(info.mean_slope, float), np.nan),
                         np.asarray(info.prior_mean_slope, float), int(np.sum(draws.grad_evals)), np.asarray(draws.z))


def _design(t, form: str, m: int, loss_min: float | None):
    """Regressors X and offset of y = X beta + offset at points t, for multiplicity m (module docstring)."""
    lt = np.log(t)
    if form == "free_energy":
        cols = [lt, np.ones_like(lt)] + ([1.0 / lt] if m > 1 else [])          # lambda, c, c2
        offset = -(m - 1) * np.log(lt)
    else:                                                                       # t E_t[L] = dF / dlog t
        cols = [np.ones_like(lt)] + ([-1.0 / lt ** 2] if m > 1 else [])        # lambda, c2
        offset = -(m - 1) / lt
    if loss_min is None:                                                        # c3 / t, then L* (last)
        cols += [1.0 / t, t]
    else:
        offset = offset + t * loss_min
    return np.stack(cols, 1), offset


def _wls(t, y, se, form, m, loss_min):
    """Weighted least squares of the mean curve: (coefficients, chi^2, degrees of freedom)."""
    X, off = _design(t, form, m, loss_min)
    fit = weighted_least_squares(X, y - off, se)
    return fit.coef, float(fit.chi2), fit.dof


def _mean_se(x):
    x = np.asarray(x, float)
    return float(np.mean(x)), float(np.std(x, ddof=1) / math.sqrt(len(x))) if len(x) > 1 else math.nan


def _on_grid(curve_t, values, grid):
    """(R, G) each run's values interpolated linearly in log t at the grid."""
    out = []
    for t, v in zip(curve_t, values):
        ok = np.isfinite(t) & np.isfinite(v) & (t > 0)
        out.append(np.interp(np.log(grid), np.log(t[ok]), v[ok]))
    return np.array(out)


def _choose_m(grid, slopes, loss_min, max_multiplicity):
    """(chosen m, whether m + 1 is rejected, chi^2 by m) by the module docstring's rule, on t E_t[L] at grid."""
    mean, se = slopes.mean(0), np.maximum(slopes.std(0, ddof=1) / math.sqrt(len(slopes)), 1e-300)
    chi2_by_m = {m: _wls(grid, mean, se, "tempered_loss", m, loss_min)[1:] for m in range(1, max_multiplicity + 1)}
    chosen = 1
    while chosen < max_multiplicity and chi2_by_m[chosen][0] - chi2_by_m[chosen + 1][0] >= 9.0:
        chosen += 1
    nxt = chi2_by_m.get(chosen + 1, (math.inf,))[0]
    # m = 1 only where m = 2 fits worse by 4; m >= 2 only where m + 1 fits worse by 9 (c2 lets m + 1 mimic m)
    rejected = nxt >= chi2_by_m[chosen][0] + (4.0 if chosen == 1 else 9.0) and chosen < max_multiplicity
    return chosen, chi2_by_m, rejected


def _lambda(grid, runs, form, m, loss_min):
    """(lambda, its standard error over runs, each run's L* (R,) or None): each run's curve fitted by least squares
    with m."""
    X, off = _design(grid, form, m, loss_min)
    coefs = weighted_least_squares(X, (runs - off).T).coef.T                  # (R, terms)
    lam, se = _mean_se(coefs[:, 0])
    return lam, se, coefs[:, -1] if loss_min is None else None


def min_points(estimator: str, max_multiplicity: int, fits_loss_min: bool) -> int:
    """The fewest grid points :func:`fit_learning_coefficient` takes: each half of the window must hold more points
    than the largest candidate's terms (m = max_multiplicity, L* fitted or not), so that every fit of the rule's
    steps 2 and 3 on a half has a degree of freedom."""
    form = "tempered_loss" if estimator == "tempered_loss" else "free_energy"
    terms = _design(np.array([2.0, 3.0]), form, max_multiplicity, None if fits_loss_min else 0.0)[0].shape[1]
    return 2 * (terms + 1)


def fit_learning_coefficient(curve: TemperedCurve, estimator: Literal["free_energy", "tempered_loss",
                             "thermodynamic"] = "free_energy", *, loss_min: float | None = 0.0,
                             decades: float = 3.0, points: int = 24, max_multiplicity: int = 3,
                             min_stages: int = 6) -> LambdaEstimate:
    """lambda and m from the curves of independent runs by their asymptotic form, over a window (the module
    docstring's rule):

        F(t) = t L* + lambda log t - (m - 1) log log t + c + c2 / log t  (+ c3 / t where L* is fitted),
        t E_t[L] = t L* + lambda - (m - 1) / log t - c2 / log^2 t        (+ c3 / t where L* is fitted).

    Args:
        curve: :class:`~slt_relu.posterior.learning_coefficient.TemperedCurve` of R >= 2 independent runs (t (R, K));
            ``free_energy`` is needed by the estimators "free_energy" and "thermodynamic" (with
            ``prior_mean_loss``), ``mean_loss`` by all.
        estimator: "free_energy", "tempered_loss" or "thermodynamic" (module docstring).
        loss_min: L*, the loss's minimum (0 for a population loss K); None fits it, each run its own.
        decades: the window's width in decades of t, ending at the smallest t_max of the runs.
        points: log-spaced grid points in the window (at least :func:`min_points`).
        max_multiplicity: the largest candidate m.
        min_stages: stages each run needs inside the window (the grid interpolates between them).

    Returns:
        :class:`~slt_relu.posterior.learning_coefficient.LambdaEstimate`: lambda (for the chosen m) and its
        standard error (over runs, combined with the choice of m where m is not identified and other m's remain:
        step 3), m or None with the reason (step 2), method "asymptotic:<estimator>", window (t_lo, t_hi), and
        details :class:`AsymptoticFit`.

    References:
        Watanabe 2009, Theorem 6.1 and Section 6.2 (the asymptotic form).
    """
    from scipy.stats import chi2 as chi2_dist

    from ..network import check_count

    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator: expected one of {', '.join(ESTIMATORS)}, got {estimator!r}")
    if isinstance(decades, bool) or not isinstance(decades, (int, float)) or not 0 < decades < 300:
        raise ValueError(f"decades: expected a positive number of decades, got {decades!r}")
    points, max_multiplicity = check_count(points, "points", 4), check_count(max_multiplicity, "max_multiplicity")
    if len(curve.t) < 2:
        raise ValueError(f"curve: expected at least 2 independent runs (their spread is the standard error), "
                         f"got {len(curve.t)}")
    t_hi = float(np.nanmin(np.nanmax(curve.t, axis=1)))
    t_lo = t_hi * 10.0 ** -decades
    inside = np.sum((curve.t >= t_lo * (1 - 1e-9)) & (curve.t <= t_hi * (1 + 1e-9)), axis=1)
    if t_lo <= 1.0 or inside.min() < min_stages:
        raise ValueError(f"curve: expected at least {min_stages} stages of every run in t = {t_lo:.3g} .. {t_hi:.3g} "
                         f"(t > 1), got {int(inside.min())} (a larger target_ess gives more stages; or fewer decades)")
    least = min_points(estimator, max_multiplicity, loss_min is None)
    if points < least:
        raise ValueError(f"points: expected at least {least} (each half of the window fits every candidate m, up to "
                         f"{max_multiplicity}{', with L* fitted' if loss_min is None else ''}, with a degree of freedom "
                         f"to spare), got {points}")
    grid = np.logspace(math.log10(t_lo), math.log10(t_hi), points)
    slopes = _on_grid(curve.t, curve.t * curve.mean_loss, grid)
    if estimator == "free_energy":
        runs, form = _on_grid(curve.t, curve.free_energy, grid), "free_energy"
    elif estimator == "thermodynamic":
        runs, form = _on_grid(curve.t, curve.thermodynamic(), grid), "free_energy"
    else:
        runs, form = slopes, "tempered_loss"
    lower, upper = slice(0, points // 2), slice(points - points // 2, None)
    chosen, chi2_by_m, higher_rejected = _choose_m(grid, slopes, loss_min, max_multiplicity)
    halves = [_choose_m(grid[h], slopes[:, h], loss_min, max_multiplicity)[0] for h in (lower, upper)]
    lam_lo, se_lo = _lambda(grid[lower], runs[:, lower], form, chosen, loss_min)[:2]
    lam_hi, se_hi = _lambda(grid[upper], runs[:, upper], form, chosen, loss_min)[:2]
    drift = abs(lam_hi - lam_lo) / math.hypot(se_lo, se_hi)
    window = f"t = {t_lo:.3g} .. {t_hi:.3g}"
    if drift > 3:
        m, reason = None, (f"lambda (m = {chosen}) drifts along t: {lam_lo:.4g} +- {se_lo:.2g} on the window's lower half, "
                           f"{lam_hi:.4g} +- {se_hi:.2g} on its upper half ({window}): not yet asymptotic")
    elif halves != [chosen, chosen]:
        m, reason = None, (f"the window's halves choose m = {halves[0]} and {halves[1]}, the whole {chosen} ({window})")
    elif not higher_rejected:
        m, reason = None, (f"chi^2 of t E_t[L] for m = {', '.join(f'{k}: {v[0]:.1f}' for k, v in chi2_by_m.items())} "
                           f"({chi2_by_m[chosen][1]} dof) over {window}: m >= {chosen}, larger m fit as well")
    else:
        m, reason = chosen, ""
    if reason:
        reason += f"; lambda is given for m = {chosen}"
    by_m = {k: _lambda(grid, runs, form, k, loss_min)[:2] for k in chi2_by_m}
    lambda_by_m, lambda_se_by_m = {k: v[0] for k, v in by_m.items()}, {k: v[1] for k, v in by_m.items()}
    lam, lam_se_runs, run_lstar = _lambda(grid, runs, form, chosen, loss_min)
    candidates = (chosen,) if m is not None else tuple(sorted(
        {chosen, *halves} | ({chosen + 1} if not higher_rejected and chosen < max_multiplicity else set())))
    lam_se = math.sqrt(lam_se_runs ** 2 + float(np.mean([(lambda_by_m[k] - lam) ** 2 for k in candidates])))
    Lstar = float(np.mean(run_lstar)) if loss_min is None else float(loss_min)
    run_lstar = tuple(map(float, run_lstar)) if loss_min is None else (Lstar,) * len(runs)
    y_mean, y_se = runs.mean(0), np.maximum(runs.std(0, ddof=1) / math.sqrt(len(runs)), 1e-300)
    _, chi2, dof = _wls(grid, y_mean, y_se, form, chosen, loss_min)
    details = AsymptoticFit(estimator, {k: v[0] for k, v in chi2_by_m.items()}, lambda_by_m, lambda_se_by_m,
                            lam_se_runs, candidates, Lstar, run_lstar, chi2, dof, float(chi2_dist.sf(chi2, dof)),
                            len(runs), curve.grad_evals)
    return LambdaEstimate(lam, lam_se, m, reason, f"asymptotic:{estimator}", (t_lo, t_hi), (), details)


def smc_free_energy_curve(key, loss, dim: int, t_max: float, settings, *, num_runs: int = 4,
                          prior_std: float = 1.0, data=None, run_data=None, moves=None) -> TemperedCurve:
    """Free-energy curves of ``num_runs`` independent tempered SMC runs from the prior N(0, prior_std^2 I)
    on w (dim,) to t_max:

        p_t(w) proportional to phi(w) exp(-t L(w; data)),  0 <= t <= t_max.

    Args:
        key: a PRNG key.
        loss: L(w, data) -> scalar on flat w (dim,), hashable (a module-level function or NamedTuple);
            the population loss K itself where there is no data (``data`` None: L gets a dummy (1,)).
        dim: the number of parameters D.
        t_max: the largest inverse temperature (n beta).
        settings: ``slt_relu.sampling.SMCSettings``.
        num_runs: independent runs (their spread gives the fit's standard errors).
        prior_std: the Gaussian prior's standard deviation.
        data: a pytree with a leading axis n, shared by the runs, or None.
        run_data: instead of ``data``, each run's own data: a pytree whose leaves have a leading axis
            num_runs (e.g. each run its own data set, so that the runs' spread holds the data's).
        moves: with ``settings.symmetry_moves``, the symmetry proposal after every HMC move, move(key, w) ->
            (w', log |det dw'/dw|), hashable (``slt_relu.moves.LayerReparametrization`` for a product of layers).

    Returns:
        :class:`~slt_relu.posterior.learning_coefficient.TemperedCurve` (R = num_runs runs at their stages, NaN past
        a run's last; ``particles`` each run's final particles (R, N, D)).
    """
    import jax
    import jax.numpy as jnp

    from ..network import check_count, check_number
    from ..pytree import unravel_fn
    from ..sampling import check_keys, sample
    from .prior import Prior
    from .target import TemperedTarget

    dim = check_count(dim, "dim")
    num_runs = check_count(num_runs, "num_runs")
    t_max = float(check_number(t_max, "t_max"))
    prior_std = float(check_number(prior_std, "prior_std"))
    k_init, k_run = jax.random.split(jax.random.wrap_key_data(check_keys(key, batch_ndim=0)))
    dtype = jnp.zeros(()).dtype
    _, unravel = unravel_fn(jnp.zeros(dim, dtype))
    target = TemperedTarget(loss, unravel, Prior.normal(prior_std))
    if run_data is not None:
        if data is not None:
            raise ValueError("data, run_data: expected at most one of them")
        if any(jnp.ndim(a) < 1 or jnp.shape(a)[0] != num_runs for a in jax.tree.leaves(run_data)):
            raise ValueError(f"run_data: expected leaves with a leading axis num_runs = {num_runs}, got shapes "
                             f"{[jnp.shape(a) for a in jax.tree.leaves(run_data)]}")
        batched = run_data
    else:
        data = jnp.zeros((1,), dtype) if data is None else data
        batched = jax.tree.map(lambda a: jnp.broadcast_to(a, (num_runs,) + jnp.shape(a)), data)
    init = prior_std * jax.random.normal(k_init, (num_runs, settings.num_particles, dim), dtype)
    t = jnp.full((num_runs,), t_max, dtype)
    draws = sample(jax.random.split(k_run, num_runs), target, init, (batched, t), settings, moves=moves)
    return _curve_of_smc(draws, t_max)
