"""The learning coefficient's one curve type, its one estimate type, and the least squares every reader fits with.

The tempered posterior at inverse temperature t of a loss L whose minimum on the prior's support is L*,

    p_t(w) proportional to phi(w) exp(-t L(w)),   Z(t) = int phi(w) exp(-t L(w)) dw,   F(t) = -log Z(t),

has F(t) = t L* + lambda log t - (m - 1) log log t + O(1) and its derivative t E_t[L] = dF / dlog t = t L* + lambda
- (m - 1) / log t + ... (Watanabe 2009, Theorem 6.1 and Section 6.2); a data set's L_n at t = n beta has the same
expansion (Watanabe 2013).  A *curve builder* samples p_t along t and returns a :class:`TemperedCurve`; a *reader*
reads lambda off a curve, or off a sampler's draws at one t, and returns a :class:`LambdaEstimate`:

- builders: ``free_energy_curve.smc_free_energy_curve`` (F and E_t[L] at SMC's stages);
  ``estimand_curve.tempered_loss_curve`` (NUTS at given t), ``estimand_curve.mcmc_tempered_loss_curve`` (NUTS over a
  window), ``estimand_curve.sgld_tempered_loss_curve`` (SGLD over a window); ``linear_gibbs.linear_gibbs_curve``
  (deep linear networks, exactly); ``beta_sweep.beta_sweep_curve`` (NUTS at t = n beta around n / log n);
- readers: ``free_energy_curve.fit_learning_coefficient`` (the asymptotic form over a window: lambda and m);
  ``beta_sweep.beta_sweep_lambda`` (the slope of E_t[L] against 1 / t); ``llc.estimate_llc`` and
  ``llc.llc_two_layer`` (the local SGLD estimate at one t); ``evidence.free_energy_slopes`` (a phase's local free
  energy against log t); ``slt_relu.tms.local_lambda.kgon_lambda`` (at a k-gon minimum).  ``beta_sweep.wbic`` reads
  a free energy off NUTS's draws at t = n / log n, not lambda: its result is its own (``beta_sweep.WBIC``).

Every fitter fits by :func:`weighted_least_squares`.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

__all__ = ["LambdaEstimate", "LeastSquares", "TemperedCurve", "stack_curves", "weighted_least_squares"]


class TemperedCurve(NamedTuple):
    """A tempered posterior along its inverse temperature t: R independent runs at K stages each (module docstring).

        F(t) = -log Z(t),   Z(t) = int phi(w) exp(-t L(w)) dw,   E_t[L] = -dlog Z / dt.

    Run r is an independent estimate of the whole curve (an SMC run through its stages; an MCMC chain at each t), so
    the runs' spread at a t is its standard error.  A run's stages past its last are NaN; where a builder has no
    evidence (MCMC, Gibbs) ``free_energy`` and ``prior_mean_loss`` are NaN.

    Attributes:
        t: (R, K) the stages' inverse temperatures (> 0 where a reader reads them; 0 is the prior).
        free_energy: (R, K) F(t), or NaN.
        mean_loss: (R, K) E_t[L], each run's mean loss at each stage.
        prior_mean_loss: (R,) E[L] under the prior (t = 0), or NaN.
        grad_evals: the gradients the runs spent (all runs together; 0 for a gradient-free sampler).
        particles: (R, N, D) each run's final particles at its last t (SMC), or None.
        draw_loss: (R, K, S) L at each run's S kept draws at each stage (MCMC at given t), or None: the
            draws' Monte Carlo standard errors and R-hat.
    """

    t: np.ndarray
    free_energy: np.ndarray
    mean_loss: np.ndarray
    prior_mean_loss: np.ndarray
    grad_evals: int
    particles: np.ndarray | None = None
    draw_loss: np.ndarray | None = None

    def thermodynamic(self) -> np.ndarray:
        """(R, K) F(t_k) = int_0^t_k E_s[L] ds by thermodynamic integration: the first segment a
        trapezoid in s from the prior (s = 0), the rest trapezoids in log s of s E_s[L] (smooth in
        log s: lambda - (m - 1) / log s + ...)."""
        out = np.full_like(self.t, np.nan)
        for r in range(len(self.t)):
            ok = np.isfinite(self.t[r])
            t, y = self.t[r, ok], self.mean_loss[r, ok]
            if not len(t):
                continue
            first = 0.5 * t[0] * (self.prior_mean_loss[r] + y[0])
            steps = 0.5 * (t[1:] * y[1:] + t[:-1] * y[:-1]) * np.diff(np.log(t))
            out[r, np.flatnonzero(ok)] = first + np.concatenate([[0.0], np.cumsum(steps)])
        return out

    def select_runs(self, keep) -> "TemperedCurve":
        """The curve of the runs ``keep`` selects (a boolean mask (R,) or indices): every per-run field cut alike."""
        cut = lambda a: None if a is None else np.asarray(a)[keep]
        return self._replace(t=cut(self.t), free_energy=cut(self.free_energy), mean_loss=cut(self.mean_loss),
                             prior_mean_loss=cut(self.prior_mean_loss), particles=cut(self.particles),
                             draw_loss=cut(self.draw_loss))


def stack_curves(curves, field: str) -> np.ndarray:
    """One field ("t", "free_energy" or "mean_loss") of several :class:`TemperedCurve` as one array
    (curves, runs, stages), NaN where a curve has fewer runs or stages than the longest (for an xarray
    Dataset of several curves)."""
    runs = max(c.t.shape[0] for c in curves)
    stages = max(c.t.shape[1] for c in curves)
    out = np.full((len(curves), runs, stages), np.nan)
    for i, c in enumerate(curves):
        a = np.asarray(getattr(c, field), np.float64)
        out[i, : a.shape[0], : a.shape[1]] = a
    return out


class LambdaEstimate(NamedTuple):
    """A learning coefficient read off a curve or a sampler's draws: what every reader returns (module docstring).

    Attributes:
        lambda_: the learning coefficient lambda.
        se: its standard error (what it carries is the reader's: over runs, chains or data sets, and for the
            asymptotic fit also the choice of m where m is not identified).
        m: the multiplicity, or None where it is not identifiable or the reader does not read it (``m_reason``).
        m_reason: why m is None ("" where it is given).
        method: the reader and its estimator: "asymptotic:free_energy", "asymptotic:tempered_loss",
            "asymptotic:thermodynamic" (``fit_learning_coefficient``), "beta_sweep" (``beta_sweep_lambda``),
            "local_sgld" (``estimate_llc``), "phase_free_energy_slope" (``free_energy_slopes``).
        window: (t_lo, t_hi) the inverse temperatures it read (t_lo = t_hi = n beta at one t).
        warnings: why it may not be trusted (empty where nothing was found).
        details: the reader's own diagnostics, a NamedTuple of its own (``free_energy_curve.AsymptoticFit``,
            ``beta_sweep.BetaSweepSlope``, ``llc.LocalSGLD``, ``evidence.PhaseSlope``,
            ``slt_relu.tms.local_lambda.KGonFit``), or None.
    """

    lambda_: float
    se: float
    m: int | None
    m_reason: str
    method: str
    window: tuple[float, float]
    warnings: tuple[str, ...] = ()
    details: Any = None


class LeastSquares(NamedTuple):
    """The solution of :func:`weighted_least_squares`.

    Attributes:
        coef: (P,) the coefficients, or (P, K) one column per right-hand side.
        cov: (P, P) (X^T W X)^(-1): the coefficients' covariance where ``se`` are the points' independent standard
            errors (by the pseudo-inverse where X^T W X is singular).
        chi2: the weighted residuals' sum of squares, () or (K,).
        dof: N - P.
    """

    coef: np.ndarray
    cov: np.ndarray
    chi2: np.ndarray
    dof: int


def weighted_least_squares(X, y, se=None) -> LeastSquares:
    """Least squares of y on the columns of X, each point weighted by 1 / se^2:

        coef = argmin_b sum_i ((y_i - X_i b) / se_i)^2,    cov(coef) = (X^T W X)^(-1),   W = diag(1 / se_i^2),
        chi2 = sum_i ((y_i - X_i coef) / se_i)^2,

    by LAPACK's least squares (an SVD, rcond from float64's eps) on the weighted system, one right-hand side at a
    time.  The one fitter of the learning-coefficient readers (module docstring).

    Args:
        X: (N, P) the regressors.
        y: (N,) the values, or (N, K): K right-hand sides that share X and the weights.  A right-hand side with a
            non-finite value gets NaN coefficients and chi^2.
        se: (N,) the points' standard errors (> 0; below 1e-300 they count as 1e-300), or None: unit weights.

    Returns:
        :class:`LeastSquares` (coef (P,) or (P, K), cov (P, P), chi2 () or (K,), dof N - P).
    """
    X, y = np.asarray(X, np.float64), np.asarray(y, np.float64)
    if X.ndim != 2 or X.shape[0] < X.shape[1]:
        raise ValueError(f"X: expected (N, P) regressors with N >= P, got shape {X.shape}")
    if y.ndim not in (1, 2) or y.shape[0] != X.shape[0]:
        raise ValueError(f"y: expected ({X.shape[0]},) or ({X.shape[0]}, K) values, got shape {y.shape}")
    cols = y.reshape(len(y), -1)
    if se is None:
        scale = None
        Xw = X
    else:
        scale = np.maximum(np.asarray(se, np.float64), 1e-300)
        if scale.shape != (X.shape[0],) or not np.all(np.isfinite(scale)):
            raise ValueError(f"se: expected ({X.shape[0]},) finite standard errors, got shape {scale.shape}")
        Xw = X / scale[:, None]
    coef = np.full((X.shape[1], cols.shape[1]), np.nan)
    chi2 = np.full(cols.shape[1], np.nan)
    for k in np.flatnonzero(np.all(np.isfinite(cols), 0)):
        yk = cols[:, k]
        coef[:, k] = np.linalg.lstsq(Xw, yk if scale is None else yk / scale, rcond=None)[0]
        resid = yk - X @ coef[:, k]
        chi2[k] = np.sum((resid if scale is None else resid / scale) ** 2)
    pinv = np.linalg.pinv(Xw)
    if y.ndim == 1:
        coef, chi2 = coef[:, 0], chi2[0]
    return LeastSquares(coef, pinv @ pinv.T, chi2, X.shape[0] - X.shape[1])

