"""MCMC diagnostics: rank-normalised split R-hat, nested R-hat, bulk and tail ESS, Monte Carlo errors.

Vehtari, Gelman, Simpson, Carpenter, Buerkner (2021), "Rank-normalization, folding, and
localization: an improved R-hat for assessing convergence of MCMC":

* split chains: each chain of S draws becomes two chains of S // 2 (the first and the second
  half), so that a drifting chain shows up as disagreement between its halves;
* rank normalisation: all draws are replaced by z = Phi^{-1}((r - 3/8) / (N + 1/4)), r their
  average rank among the N pooled draws;
* R-hat = max(R-hat of the rank-normalised split chains, R-hat of the rank-normalised folded
  split chains |x - median(x)|), each by Gelman-Rubin on the split chains;
* bulk ESS = the effective sample size (Geyer's initial monotone sequence) of the
  rank-normalised split chains; tail ESS = the smaller ESS of the 5% and 95% quantile
  indicators; MCSE of the mean = sd / sqrt(ESS of the split chains).

Nested R-hat (Margossian et al. 2024) is for many short chains, the regime of the vectorised
runners: :func:`rhat_nested`.  The numbers are arviz-stats's: each function is a thin layer over
``arviz_stats.base.array_stats`` (its NumPy level, no xarray, sub-millisecond per call) that checks
its arguments, names the method, and returns NaN for draws holding a NaN anywhere (also in the middle
draw that splitting an odd chain drops).

Chains that sample different posteriors (DSLT4's trials each have their own data set) must
not be pooled: :func:`grouped` applies a diagnostic within each data set and reports the worst.

Undefined diagnostics are NaN, as in ``arviz_stats``: every diagnostic of draws that hold a NaN
(:func:`grouped`: of any group), and R-hat (split, rank-normalised, nested) of constant draws
(0 / 0); the ESS of constant draws is the number of draws and their MCSE 0 (up to rounding), as
ArviZ's.  A comparison with NaN is False, so a check written ``rhat > 1.05`` passes NaN
silently: test ``np.isnan`` first (``slt_relu.posterior.masses.sampler_warnings``).
"""
from __future__ import annotations

import numpy as np

__all__ = ["ess", "ess_bulk", "ess_mean", "ess_tail", "gelman_rubin", "grouped", "mcse_mean", "rhat", "rhat_nested"]


def _as_chains(x) -> np.ndarray:
    x = np.asarray(x, np.float64)
    if x.ndim == 1:
        x = x[None]
    if x.ndim != 2:
        raise ValueError(f"x: expected draws of shape (chains, draws), got {x.shape}")
    if x.shape[1] < 4:
        raise ValueError(f"x: expected at least 4 draws per chain, got {x.shape[1]}")
    return x


def _arviz(name: str, x, **kwargs) -> float:
    """arviz_stats.base.array_stats.<name>(x, chain_axis=-2, draw_axis=-1, **kwargs) of (C, S) draws; NaN
    for draws holding a NaN; arviz-stats's 0 / 0 of constant draws is NaN without a warning."""
    from arviz_stats.base import array_stats

    x = _as_chains(x)
    if np.isnan(x).any():
        return float("nan")
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(getattr(array_stats, name)(x, chain_axis=-2, draw_axis=-1, **kwargs))


def gelman_rubin(x) -> float:
    """Classic potential scale reduction sqrt(((S-1)/S W + B/S) / W) of (C, S) chains (no split, no
    ranks; arviz-stats's method "identity" for C >= 2; B = 0 for one chain); NaN for constant draws
    (W = B = 0) or draws holding a NaN, inf for chains each constant at different values (W = 0 < B)."""
    x = _as_chains(x)
    if np.isnan(x).any():
        return float("nan")
    C, S = x.shape
    W = float(np.mean(np.var(x, axis=1, ddof=1)))
    B_over_S = float(np.var(np.mean(x, axis=1), ddof=1)) if C > 1 else 0.0
    if W == 0.0:
        return float("nan") if B_over_S == 0.0 else float("inf")
    return float(np.sqrt(((S - 1) / S * W + B_over_S) / W))


def _rank_normalize(x: np.ndarray) -> np.ndarray:
    """z = Phi^{-1}((r - 3/8) / (N + 1/4)) of the pooled average ranks r (ties: their average rank)."""
    from statistics import NormalDist

    _, inverse, counts = np.unique(x.reshape(-1), return_inverse=True, return_counts=True)
    ranks = np.concatenate([[0], np.cumsum(counts)[:-1]]) + (counts + 1) / 2.0          # per distinct value
    z = np.array([NormalDist().inv_cdf(u) for u in (ranks - 0.375) / (x.size + 0.25)])
    return z[inverse].reshape(x.shape)


def rhat(x) -> float:
    """Rank-normalised split R-hat, the larger of the bulk and the folded versions.

        R-hat = max(R-hat(z(split x)), R-hat(z(|split x - median|))),  z the rank normalisation

    One chain (which arviz-stats leaves undefined): the same from its two halves, as Stan computes
    it.

    Args:
        x: (C, S) draws (or (S,), one chain), S >= 4.

    Returns:
        float: R-hat; NaN for constant draws or draws holding a NaN.

    References:
        Vehtari, Gelman, Simpson, Carpenter, Buerkner (2021).
    """
    x = _as_chains(x)
    if x.shape[0] > 1 or np.isnan(x).any():
        return _arviz("rhat", x, method="rank")
    half = x.shape[1] // 2
    s = np.concatenate([x[:, :half], x[:, x.shape[1] - half:]])
    return max(gelman_rubin(_rank_normalize(s)), gelman_rubin(_rank_normalize(np.abs(s - np.median(s)))))


def ess(x) -> float:
    """Effective sample size of (C, S) draws as they are (no split, no ranks; Vehtari et al. 2021, eqs.
    10-11; Geyer's initial monotone sequence): ESS = C S / tau, tau = -1 + 2 sum_t rho_t, capped at
    C S log10(C S); C S for constant draws."""
    return _arviz("ess", x, method="identity")


def ess_bulk(x) -> float:
    """Bulk ESS: the effective sample size of the rank-normalised split chains.

        ESS = C S / tau,  tau = -1 + 2 sum_t rho_t  (Geyer's initial monotone sequence)

    Args:
        x: (C, S) draws (or (S,), one chain), S >= 4.

    Returns:
        float: the bulk ESS; NaN for draws holding a NaN.

    References:
        Vehtari, Gelman, Simpson, Carpenter, Buerkner (2021).
    """
    return _arviz("ess", x, method="bulk")


def ess_tail(x, prob: float = 0.05) -> float:
    """Tail ESS: the smaller ESS of the indicators x <= q_prob and x <= q_(1-prob) on the split chains
    (Vehtari et al. 2021, sec. 4.3); 0 < prob < 1."""
    if not (isinstance(prob, (float, np.floating)) and 0 < prob < 1):
        raise ValueError(f"prob: expected a number in (0, 1), got {prob!r}")
    return _arviz("ess", x, method="tail", prob=min(prob, 1.0 - prob))


def ess_mean(x) -> float:
    """ESS of the mean: ESS of the split chains (not rank-normalised); x: (C, S)."""
    return _arviz("ess", x, method="mean")


def mcse_mean(x) -> float:
    """Monte Carlo standard error of the mean of (C, S) draws: sd / sqrt(ESS of the split chains); 0 for
    constant draws (up to rounding)."""
    return _arviz("mcse", x, method="mean")


def rhat_nested(x, superchains) -> float:
    """Nested R-hat (Margossian, Hoffman, Sountsov, Riou-Durand, Vehtari, Gelman 2024) for many
    short chains: chains are grouped into K superchains of M chains that started at one point,

        nR-hat = sqrt(1 + B_nu / W_nu),   B_nu = var_k(mean of superchain k) (ddof 1),
        W_nu = mean_k [var_m(chain means in k) (ddof 1; 0 if M = 1) + mean_m(chain variances)],

    on the rank-normalised split chains (each chain's two halves stay in its superchain), the
    larger of the bulk and the folded versions as for :func:`rhat`.  x: (C, S); superchains:
    (C,) integer ids, every superchain the same size, at least two superchains.  NaN for constant
    draws."""
    x = _as_chains(x)
    ids = np.asarray(superchains)
    if ids.shape != (x.shape[0],):
        raise ValueError(f"superchains: expected one id per chain ({x.shape[0]}), got shape {ids.shape}")
    groups, counts = np.unique(ids, return_counts=True)
    if len(groups) < 2 or counts.min() != counts.max():
        raise ValueError(f"superchains: expected at least two superchains of equal size, got sizes {counts.tolist()}")
    if np.ptp(x) == 0:
        return float("nan")
    return _arviz("rhat_nested", x, superchain_ids=ids, method="rank")


def grouped(fn, x, groups, worst=max) -> float:
    """``worst`` over groups of ``fn(x[chains of the group])``; x: (C, S), groups: (C,) ids
    (e.g. the data set of each chain).  NaN if any group's value is NaN (Python's max and min
    would return or drop a NaN depending on its place)."""
    x = np.asarray(x)
    groups = np.asarray(groups)
    values = [fn(x[groups == g]) for g in np.unique(groups)]
    return float("nan") if np.isnan(values).any() else float(worst(values))
