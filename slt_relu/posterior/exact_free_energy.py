"""Exact free energies F(t) = -log Z(t) of losses with a known learning coefficient, by quadrature, and SMC's
free-energy curves checked against them: an evidence independent of SMC's tempering, weights and moves.

    Z(t) = int phi(w) exp(-t K(w)) dw,     phi = N(0, prior_std^2 I).

- :func:`normal_crossing_free_energy`: K = w1^(2 k1) w2^(2 k2) (lambda = 1 / (2 max k), m = 2 where k1 = k2);
- :func:`reduced_rank_one_free_energy`: reduced-rank regression with one hidden unit and a zero truth,
  K = |b a^T|_F^2 / 2 = |a|^2 |b|^2 / 2 (a (N,), b (M,)): lambda = min(M, N) / 2, m = 2 where M = N (Aoyagi and
  Watanabe 2005), the one linear network whose evidence reduces to one dimension;
- :func:`gaussian_free_energy`: a quadratic loss L(w) = w^T H w / 2 - g^T w (a regular model: lambda = d / 2, m = 1;
  with g, a data set's loss of a linear regression, L* = -g^T H^(-1) g / 2), in closed form;
- :func:`check_free_energy`: SMC's F(t) against any of them, point by point over a window, with Student-t bounds
  (one exact F for every run, or each run's own: a data set per run).

Both quadratures integrate in log coordinates, where the neck of exp(-t K) (t^(-1/2) wide in w, moving with t) is
a smooth step of width ~1 wherever it lies, so one Gauss-Legendre rule on panels of fixed width serves every t
alike (docs/concepts/learning_coefficient.md).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .learning_coefficient import TemperedCurve

__all__ = ["FreeEnergyCheck", "check_free_energy", "gaussian_free_energy", "normal_crossing_free_energy",
           "reduced_rank_one_free_energy"]


def _checked_t(t, prior_std):
    """(t as float64, prior_std), each checked (a one-line ValueError naming it)."""
    from ..network import check_number

    s = float(check_number(prior_std, "prior_std"))
    t = np.asarray(t, np.float64)
    if not np.all(np.isfinite(t) & (t > 0)):
        raise ValueError("t: expected finite inverse temperatures > 0")
    return t, s


def _checked_rule(t, prior_std, panel, order):
    """(t as float64, prior_std, panel, order) of a quadrature, each checked (a one-line ValueError naming it)."""
    from ..network import check_count, check_number

    t, s = _checked_t(t, prior_std)
    return t, s, float(check_number(panel, "panel")), check_count(order, "order")


def _panels(lo: float, hi: float, panel: float, order: int):
    """(nodes u, log weights) of ``order``-point Gauss-Legendre rules on panels of width ``panel`` from lo, enough
    of them to reach hi."""
    x, wx = np.polynomial.legendre.leggauss(order)
    n = math.ceil((hi - lo) / panel)
    mid = lo + panel * (np.arange(n) + 0.5)
    return (mid[:, None] + 0.5 * panel * x).ravel(), np.log(np.tile(0.5 * panel * wx, n))


def normal_crossing_free_energy(k, t, prior_std: float = 1.0, *, panel: float = 1.0, order: int = 16) -> np.ndarray:
    """The exact free energy F(t) = -log Z(t) of a two-parameter normal crossing K = w1^(2 k1) w2^(2 k2) under the
    prior N(0, prior_std^2 I), by quadrature: an evidence independent of SMC's (its tempering, weights and moves).

        Z(t) = int phi(w) exp(-t K(w)) dw
             = 4 int int g(u1) g(u2) exp(-t e^(2 k1 u1 + 2 k2 u2)) du1 du2,   g(u) = phi_1(e^u) e^u,

    (w_i = +-e^(u_i); phi_1 the one-dimensional prior density).  In log coordinates the neck of exp(-t K) along the
    axes, t^(-1/2) wide in w, is a smooth step of width ~1 in u wherever it lies, so a tensor Gauss-Legendre rule on
    panels of fixed width resolves every t alike: u from log(prior_std) - 40 - log(t) / (2 min k) (the tail below
    holds e^(-40) of the mass above the neck) to log(prior_std) + log 12 (the prior beyond 12 sd), ``order`` nodes per
    panel, the sum in log space (logsumexp).  For k = (1, 1) the closed form Z(t) = e^x K_0(x) / (2 sqrt(pi T)),
    x = 1 / (8 T), T = t prior_std^4 (the w2 integral is (1 + 2 t prior_std^2 w1^2)^(-1/2)), agrees within 1e-12 (4e-15
    measured) for t in 1e-3 .. 1e20; so does scipy's adaptive quadrature of the one-dimensional form for k = (1, 2),
    (1, 3), and halving the panels or doubling the nodes moves F by rounding only (tests/test_free_energy_curve.py).

    Args:
        k: (k1, k2) non-negative integers, at least one positive (k_i = 0: K does not depend on w_i).
        t: inverse temperatures, any shape, > 0.
        prior_std: the prior's standard deviation.
        panel, order: the rule's panel width in u and nodes per panel.

    Returns:
        F(t), t's shape.
    """
    from scipy.special import logsumexp

    k = tuple(k)
    if (len(k) != 2 or any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 0 for x in k)
            or not any(k)):
        raise ValueError(f"k: expected two non-negative integers, at least one positive, got {k!r}")
    t, s, panel, order = _checked_rule(t, prior_std, panel, order)
    out = np.empty(t.size)
    for i, ti in enumerate(t.ravel()):
        lo = math.log(s) - 40.0 - math.log(max(ti, 1.0)) / (2 * min(kk for kk in k if kk))
        u, log_w = _panels(lo, math.log(s) + math.log(12.0), panel, order)
        log_g = -0.5 * np.exp(2 * u) / s ** 2 - math.log(s * math.sqrt(2 * math.pi)) + u + log_w
        log_k = 2 * k[0] * u[:, None] + 2 * k[1] * u[None, :]
        out[i] = -(math.log(4.0) + logsumexp(log_g[:, None] + log_g[None, :] - ti * np.exp(log_k)))
    return out.reshape(t.shape)


def reduced_rank_one_free_energy(input_dim: int, output_dim: int, t, prior_std: float = 1.0, *, panel: float = 1.0,
                                 order: int = 16) -> np.ndarray:
    """The exact free energy F(t) = -log Z(t) of zero-truth reduced-rank regression with one hidden unit,
    K = |b a^T|_F^2 / 2 = |a|^2 |b|^2 / 2 with a (N,) = input_dim, b (M,) = output_dim, under the prior
    N(0, prior_std^2 I), by quadrature.  The Gaussian integral over b is closed,
    int phi(b) exp(-t |a|^2 |b|^2 / 2) db = (1 + t |a|^2 prior_std^2)^(-M / 2), and |a|^2 / prior_std^2 = s is
    chi^2 with N degrees of freedom, so

        Z(t) = E_s[(1 + T s)^(-M / 2)],   s ~ chi^2_N,   T = t prior_std^4,

    one dimension, integrated in u = log s on panels of width ``panel`` (``order`` Gauss-Legendre nodes each) from
    -log max(T, 1) - 100 / N (the chi^2 density's mass below is e^(-50) of that at s = 1 / T) to
    log(N + 40 sqrt(2 N) + 100) (its tail beyond), the sum in log space.  For M = N = 2 the closed form
    Z = e^x E_1(x) x, x = 1 / (2 T), agrees within 1e-12 (3e-16 measured; tests/test_exact_free_energy.py); Z is
    symmetric in M and N (integrating a out first gives the same), which the tests check as well.  As t -> infinity
    Z ~ C t^(-min(M, N) / 2) (log t)^(m - 1), m = 2 where M = N (else 1).

    Args:
        input_dim, output_dim: N and M, positive integers.
        t: inverse temperatures, any shape, > 0.
        prior_std: the prior's standard deviation.
        panel, order: the rule's panel width in u and nodes per panel.

    Returns:
        F(t), t's shape.
    """
    from scipy.special import gammaln, logsumexp

    from ..network import check_count

    N, M = check_count(input_dim, "input_dim"), check_count(output_dim, "output_dim")
    t, s, panel, order = _checked_rule(t, prior_std, panel, order)
    out = np.empty(t.size)
    for i, ti in enumerate(t.ravel()):
        T = ti * s ** 4
        u, log_w = _panels(-math.log(max(T, 1.0)) - 100.0 / N, math.log(N + 40 * math.sqrt(2 * N) + 100), panel, order)
        log_density = 0.5 * N * (u - math.log(2.0)) - 0.5 * np.exp(u) - gammaln(0.5 * N)   # chi^2_N in log s
        out[i] = -logsumexp(log_density + log_w - 0.5 * M * np.log1p(T * np.exp(u)))
    return out.reshape(t.shape)


def gaussian_free_energy(hessian, t, gradient=None, prior_std: float = 1.0) -> np.ndarray:
    """The exact free energy of a quadratic loss L(w) = w^T H w / 2 - g^T w under the prior N(0, prior_std^2 I), in
    closed form (a Gaussian integral): with A = I / prior_std^2 + t H,

        F(t) = log det(I + t prior_std^2 H) / 2 - t^2 g^T A^(-1) g / 2,

    so that F(t) = t L* + (d / 2) log t + c + c3 / t + O(t^(-2)) with L* = -g^T H^(-1) g / 2 (a regular model:
    lambda = d / 2, m = 1).  g = 0 is the population loss of the regular case; g = E^T X / n with H = X^T X / n the
    data set's loss L_n(w) - L_n(0) of the regression y = e (``known_lambda.losses.RegressionLoss``, family regular).

    Args:
        hessian: H (d, d), symmetric positive definite.
        t: inverse temperatures, any shape, > 0.
        gradient: g (d,), or None (zero).
        prior_std: the prior's standard deviation.

    Returns:
        F(t), t's shape.
    """

    H = np.asarray(hessian, np.float64)
    if H.ndim != 2 or H.shape[0] != H.shape[1] or not np.all(np.isfinite(H)) or not np.allclose(H, H.T):
        raise ValueError(f"hessian: expected a finite symmetric (d, d) matrix, got shape {H.shape}")
    lam, V = np.linalg.eigh(0.5 * (H + H.T))
    if lam[0] <= 0:
        raise ValueError(f"hessian: expected positive definite, got the smallest eigenvalue {lam[0]:.3g}")
    g = np.zeros(len(H)) if gradient is None else np.asarray(gradient, np.float64)
    if g.shape != (len(H),) or not np.all(np.isfinite(g)):
        raise ValueError(f"gradient: expected a finite ({len(H)},) vector, got shape {g.shape}")
    t, s = _checked_t(t, prior_std)
    x = t[..., None] * s * s * lam                                                   # t prior_std^2 (eigenvalues of H)
    gv2 = (V.T @ g) ** 2
    return 0.5 * np.sum(np.log1p(x), -1) - 0.5 * np.sum(t[..., None] ** 2 * s * s * gv2 / (1 + x), -1)


class FreeEnergyCheck(NamedTuple):
    """SMC's free-energy curves against an exact F(t) (:func:`check_free_energy`), on a log grid of the window.

    Fields:
        t: (G,) the grid.
        exact: (G,) the exact F(t), or (R, G) each run's.
        residual: (R, G) each run's F - exact at its own stages, interpolated (linearly in log t) to the grid.
        mean, se: (G,) the runs' mean residual and its standard error (their sd / sqrt(R)).
        z: (G,) mean / se.
    """

    t: np.ndarray
    exact: np.ndarray
    residual: np.ndarray
    mean: np.ndarray
    se: np.ndarray
    z: np.ndarray


def check_free_energy(curve: TemperedCurve, exact, t_lo: float, t_hi: float, points: int = 24) -> FreeEnergyCheck:
    """SMC's F(t) against an exact free energy at the t of SMC's stages: each run's residual F_r(t_k) - F(t_k) at its
    stages t_k in [t_lo, t_hi] (``exact`` evaluated there), then, since the runs' stages differ, the residuals
    interpolated to ``points`` log-spaced t of the window, where the runs give the mean residual and its standard
    error.  The exact F's own error (quadrature, 1e-12) is negligible beside SMC's, so z = mean / se is Student's t
    with R - 1 degrees of freedom at each t where SMC is unbiased, and agreement at every point of the grid is
    |z| below the t quantile of 1 - alpha / (2 points) (Bonferroni over the points, which are correlated: a
    conservative bound).  (SMC's F carries an upward bias of about half the variance of log Z, part of what the
    check sees.)

    Args:
        curve: :class:`TemperedCurve` of R >= 2 runs reaching t_hi.
        exact: F(t) for an array of t (e.g. ``functools.partial(normal_crossing_free_energy, (1, 1))`` or
            ``functools.partial(reduced_rank_one_free_energy, 2, 2)``), or a sequence of R such functions, each
            run's own (each run its own data set: ``gaussian_free_energy`` with that run's H and g).
        t_lo, t_hi: the window.
        points: grid points in the window.

    Returns:
        :class:`FreeEnergyCheck`.
    """
    if len(curve.t) < 2:
        raise ValueError(f"curve: expected at least 2 independent runs, got {len(curve.t)}")
    if not 0 < t_lo < t_hi <= float(np.nanmin(np.nanmax(curve.t, axis=1))) * (1 + 1e-9):
        raise ValueError(f"t_lo, t_hi: expected 0 < t_lo < t_hi <= every run's last t, got {t_lo!r}, {t_hi!r}")
    per_run = not callable(exact)
    if per_run and (not hasattr(exact, "__len__") or len(exact) != len(curve.t)):
        raise ValueError(f"exact: expected one function of t, or a sequence of one per run ({len(curve.t)}), got "
                         f"{type(exact).__name__}{f' of {len(exact)}' if hasattr(exact, '__len__') else ''}")
    exacts = list(exact) if per_run else [exact] * len(curve.t)
    grid = np.logspace(math.log10(t_lo), math.log10(t_hi), points)
    residual = []
    for t, f, F in zip(curve.t, curve.free_energy, exacts):
        ok = np.isfinite(t) & np.isfinite(f) & (t >= t_lo / 2) & (t <= t_hi * 2)   # the stages around the window
        r = f[ok] - np.asarray(F(t[ok]), np.float64)
        residual.append(np.interp(np.log(grid), np.log(t[ok]), r))
    residual = np.array(residual)
    mean, se = residual.mean(0), residual.std(0, ddof=1) / math.sqrt(len(residual))
    on_grid = np.array([F(grid) for F in exacts], np.float64) if per_run else np.asarray(exact(grid), np.float64)
    return FreeEnergyCheck(grid, on_grid, residual, mean, se, mean / np.maximum(se, 1e-300))
