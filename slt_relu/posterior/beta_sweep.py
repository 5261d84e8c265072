"""Global (or localized) learning coefficients from tempered NUTS posteriors at a few n beta: the beta sweep's curve
and its slope reading, and WBIC.

Watanabe 2013 (Corollary 3): E_beta[n L_n] = n L_n(w0) + lambda / beta + O_p(sqrt(log n)) near beta = 1 / log n.
In the curve's terms, t = n beta and E_beta[n L_n] = n E_t[L_n], this is

    E_t[L_n] = L_n(w0) + lambda / t + ...,

so lambda is the slope of E_t[L] against 1 / t over a few t around n / log n (:func:`beta_sweep_lambda`, on the
curve of :func:`beta_sweep_curve`: NUTS's chains at each t, ``slt_relu.posterior.estimand_curve.tempered_loss_curve``),
each point weighted by its Monte Carlo standard error (Wei, Murfet, Gong, Li, Gell-Redman, Quella 2022).  With a
localization gamma > 0 the same sweep of the localized posterior exp(-t L_n - (gamma / 2) |w - w*|^2) reads the
local lambda at w* without L_n(w*).  The slope has no term for m: it reads lambda - (m - 1) / log t near the sweep's
t, not m.

WBIC = E_beta[n L_n] at beta = 1 / log n (:func:`wbic`; Watanabe 2013: WBIC = F_n + O_p(sqrt(log n))) is an estimate
of the free energy F_n, not of lambda.

References:
    Watanabe 2013, "A widely applicable Bayesian information criterion", JMLR 14; Wei, Murfet, Gong, Li,
    Gell-Redman, Quella 2022, "Deep learning is singular, and that's good" (the beta sweep).
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple, Sequence

import numpy as np

from .estimand_curve import tempered_loss_curve
from .learning_coefficient import LambdaEstimate, TemperedCurve, weighted_least_squares

__all__ = ["BetaSweepSlope", "WBIC", "beta_sweep_curve", "beta_sweep_lambda", "wbic"]

DEFAULT_FACTORS = (2 / 3, 1.0, 1.5, 2.0, 3.0)          # the default betas, as multiples of 1 / log n


class BetaSweepSlope(NamedTuple):
    """The beta sweep's slope reading (the ``details`` of :func:`beta_sweep_lambda`'s estimate).

    Attributes:
        t: (K,) the sweep's inverse temperatures t = n beta.
        mean_loss: (K,) E_t[L] over every chain's draws at each t.
        mean_loss_se: (K,) its Monte Carlo standard error (from the draws' effective sample size; the chains'
            spread where the curve has no draws).
        loss_min: the intercept: E_t[L] extrapolated to 1 / t = 0, L_n(w0) up to O(1 / n) from the prior
            (0 for a localized sweep of a loss that is 0 at w*).
        chi2: the weighted residuals' chi^2, with K - 2 degrees of freedom.
    """

    t: np.ndarray
    mean_loss: np.ndarray
    mean_loss_se: np.ndarray
    loss_min: float
    chi2: float


class WBIC(NamedTuple):
    """WBIC, an estimate of the free energy F_n (:func:`wbic`).

    Attributes:
        value: E_beta[n L_n] at beta = 1 / log n.
        se: its Monte Carlo standard error (from the draws' effective sample size).
        n_beta: n beta = n / log n.
    """

    value: float
    se: float
    n_beta: float


def beta_sweep_curve(key, loss_fn: Callable, params_init, data, *, betas: Sequence[float] | None = None,
                     chains: int = 4, prior_std: float = 1.0, localization: float = 0.0, settings=None,
                     init_radius: float = 2.0, devices=None) -> TemperedCurve:
    """NUTS's tempered posterior at t = n beta for each beta of the sweep (module docstring), ``chains`` chains at
    each, all in one program:

        p_t(w) proportional to N(w; 0, prior_std^2 I) exp(-t L_n(w))     (localization = 0),
        p_t(w) proportional to exp(-t L_n(w) - (gamma / 2) |w - w*|^2)   (localization gamma > 0, w* = params_init).

    Args:
        key: a PRNG key.
        loss_fn: L_n(params, data) -> scalar mean loss over the data given (as for ``estimate_llc``).
        params_init: a parameter pytree: w* of the localized posterior (its chains start there), else only its
            structure counts (the chains start uniformly in [-init_radius, init_radius]).
        data: the data pytree, leaves with a leading axis n.
        betas: (B,) at least two positive betas; default (1 / log n) x (2/3, 1, 3/2, 2, 3) (DEFAULT_FACTORS).
        chains: NUTS chains per beta (the curve's runs).
        prior_std: the global posterior's prior N(0, prior_std^2 I).
        localization: gamma >= 0 (0: the global posterior; > 0: the local lambda at params_init).
        settings: NUTSSettings or HMCSettings (default NUTSSettings()).
        init_radius: the global chains' starting box.
        devices: to shard the chains over (default jax.local_devices()).

    Returns:
        :class:`~slt_relu.posterior.learning_coefficient.TemperedCurve` at t = n betas (R = chains runs, B
        stages), with ``draw_loss`` (R, B, S) L_n at every kept draw
        (``slt_relu.posterior.estimand_curve.tempered_loss_curve``).

    References:
        Watanabe 2013 (Corollary 3); Wei et al. 2022.
    """
    from .target import num_data

    n = num_data(data)
    if betas is None and n < 2:
        raise ValueError("betas: the default (1/log n) x (2/3, ..., 3) needs n >= 2 data points")
    betas = np.asarray(betas if betas is not None else np.array(DEFAULT_FACTORS) / math.log(n), np.float64)
    if betas.ndim != 1 or betas.size < 2 or not np.all(np.isfinite(betas) & (betas > 0)):
        raise ValueError(f"betas: expected at least two positive finite numbers, got {betas!r}")
    return tempered_loss_curve(key, loss_fn, params_init, data, n * betas, chains=chains, prior_std=prior_std,
                               localization=localization, settings=settings, init_radius=init_radius,
                               devices=devices)


def _pooled(curve: TemperedCurve) -> tuple[np.ndarray, np.ndarray]:
    """(E_t[L], its standard error) (K,) over every run at each t: the Monte Carlo error of the draws' mean
    (``slt_relu.diagnostics.mcse_mean``) where the curve has its draws, else the runs' spread."""
    from .. import diagnostics as dg

    if curve.draw_loss is not None:
        draws = np.asarray(curve.draw_loss, np.float64)
        return (np.array([draws[:, k].mean() for k in range(draws.shape[1])]),
                np.array([dg.mcse_mean(draws[:, k]) for k in range(draws.shape[1])]))
    runs = np.asarray(curve.mean_loss, np.float64)
    return runs.mean(0), runs.std(0, ddof=1) / math.sqrt(len(runs))


def beta_sweep_lambda(curve: TemperedCurve) -> LambdaEstimate:
    """lambda as the weighted least-squares slope of E_t[L] against 1 / t (module docstring):

        E_t[L] = L* + lambda / t,   weights 1 / se_t^2,

    E_t[L] and se_t over every run at each t (:class:`BetaSweepSlope`).

    Args:
        curve: a :class:`~slt_relu.posterior.learning_coefficient.TemperedCurve` whose runs share their t, at two
            t or more (:func:`beta_sweep_curve`'s; any MCMC curve): with ``draw_loss``, the points' errors are the
            draws' Monte Carlo errors, else the runs' spread (which needs two runs).

    Returns:
        :class:`~slt_relu.posterior.learning_coefficient.LambdaEstimate`: the slope and its standard error (from
        the points' errors), m None, method "beta_sweep", window (the smallest t, the largest), details
        :class:`BetaSweepSlope`.

    References:
        Watanabe 2013 (Corollary 3); Wei et al. 2022.
    """
    t = np.asarray(curve.t, np.float64)
    if t.ndim != 2 or t.shape[1] < 2 or not np.all(t == t[:1]) or not np.all(np.isfinite(t[0]) & (t[0] > 0)):
        raise ValueError(f"curve: expected runs that share two or more positive finite t, got t of shape {t.shape}")
    if curve.draw_loss is None and len(t) < 2:
        raise ValueError("curve: expected its draws (draw_loss) or two runs or more (their spread is the error)")
    mean, se = _pooled(curve)
    fit = weighted_least_squares(np.stack([np.ones(t.shape[1]), 1.0 / t[0]], 1), mean, se)
    window = (float(t[0].min()), float(t[0].max()))
    reason = "not read: the slope of E_t[L] against 1 / t has no term for m (it reads lambda - (m - 1) / log t)"
    return LambdaEstimate(float(fit.coef[1]), float(math.sqrt(fit.cov[1, 1])), None, reason, "beta_sweep", window,
                          (), BetaSweepSlope(t[0], mean, se, float(fit.coef[0]), float(fit.chi2)))


def wbic(key, loss_fn: Callable, params_init, data, *, chains: int = 4, prior_std: float = 1.0, settings=None,
         init_radius: float = 2.0, devices=None) -> WBIC:
    """WBIC = E_beta[n L_n] at beta = 1 / log n by NUTS (Watanabe 2013: WBIC = F_n + O_p(sqrt(log n)), an estimate of
    the free energy F_n), with its Monte Carlo standard error: ``n E_t[L_n]`` on
    ``slt_relu.posterior.estimand_curve.tempered_loss_curve`` at the one t = n / log n.

    Args:
        key: a PRNG key.
        loss_fn: L_n(params, data) -> scalar mean loss over the data given.
        params_init: a parameter pytree (its structure: the chains start uniformly in [-init_radius, init_radius]).
        data: the data pytree, leaves with a leading axis n >= 2.
        chains: NUTS chains.
        prior_std: the prior N(0, prior_std^2 I).
        settings: NUTSSettings or HMCSettings (default NUTSSettings()).
        init_radius: the chains' starting box.
        devices: to shard the chains over (default jax.local_devices()).

    Returns:
        :class:`WBIC` (value, se, n beta).

    References:
        Watanabe 2013, "A widely applicable Bayesian information criterion".
    """
    from .. import diagnostics as dg
    from .target import num_data

    n = num_data(data)
    if n < 2:
        raise ValueError("data: WBIC's beta = 1/log n needs n >= 2 data points")
    curve = tempered_loss_curve(key, loss_fn, params_init, data, [n / math.log(n)], chains=chains,
                                prior_std=prior_std, settings=settings, init_radius=init_radius, devices=devices)
    v = n * curve.draw_loss[:, 0]
    return WBIC(float(v.mean()), dg.mcse_mean(v), n / math.log(n))
