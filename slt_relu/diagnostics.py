"""MCMC diagnostics: rank-normalised split R-hat, bulk ESS, Monte Carlo standard errors.

Vehtari, Gelman, Simpson, Carpenter, Buerkner (2021), "Rank-normalization, folding, and
localization: an improved R-hat for assessing convergence of MCMC":

* split chains: each chain of S draws becomes two chains of S // 2 (the first and the second
  half), so that a drifting chain shows up as disagreement between its halves;
* rank normalisation: all draws are replaced by z = Phi^{-1}((r - 3/8) / (N + 1/4)), r their
  average rank among the N pooled draws;
* R-hat = max(R-hat of the rank-normalised split chains, R-hat of the rank-normalised folded
  split chains |x - median(x)|), each by Gelman-Rubin on the split chains;
* bulk ESS = the effective sample size (Geyer's initial monotone sequence, numpyro's
  ``effective_sample_size``) of the rank-normalised split chains.

Chains that sample different posteriors (DSLT4's trials each have their own data set) must
not be pooled: :func:`grouped` applies a diagnostic within each data set and reports the worst.
"""
from __future__ import annotations

import numpy as np


def _as_chains(x) -> np.ndarray:
    x = np.asarray(x, np.float64)
    if x.ndim == 1:
        x = x[None]
    if x.ndim != 2:
        raise ValueError(f"x: expected draws of shape (chains, draws), got {x.shape}")
    if x.shape[1] < 4:
        raise ValueError(f"x: expected at least 4 draws per chain, got {x.shape[1]}")
    return x


def split_chains(x) -> np.ndarray:
    """(C, S) -> (2C, S // 2): first and second halves (a middle draw is dropped when S is odd)."""
    x = _as_chains(x)
    half = x.shape[1] // 2
    return np.concatenate([x[:, :half], x[:, x.shape[1] - half:]])


def average_ranks(values) -> np.ndarray:
    """Ranks 1..N of the flattened values, ties given their average rank (shape kept)."""
    v = np.asarray(values).reshape(-1)
    _, inverse, counts = np.unique(v, return_inverse=True, return_counts=True)
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return (first + (counts + 1) / 2.0)[inverse].reshape(np.shape(values))


def rank_normalize(x) -> np.ndarray:
    """z = Phi^{-1}((r - 3/8) / (N + 1/4)) of the pooled average ranks r (Blom's offset)."""
    from statistics import NormalDist

    x = np.asarray(x, np.float64)
    r = average_ranks(x)
    u = (r - 0.375) / (x.size + 0.25)
    inv = np.vectorize(NormalDist().inv_cdf, otypes=[float])
    uniq, back = np.unique(u, return_inverse=True)
    return inv(uniq)[back].reshape(x.shape)


def gelman_rubin(x) -> float:
    """Classic potential scale reduction sqrt(((S-1)/S W + B/S) / W) of (C, S) chains; 1 for
    constant draws."""
    x = _as_chains(x)
    C, S = x.shape
    W = float(np.mean(np.var(x, axis=1, ddof=1)))
    B_over_S = float(np.var(np.mean(x, axis=1), ddof=1)) if C > 1 else 0.0
    if W == 0.0:
        return 1.0 if B_over_S == 0.0 else float("inf")
    return float(np.sqrt(((S - 1) / S * W + B_over_S) / W))


def rhat(x) -> float:
    """Rank-normalised split R-hat (maximum of the bulk and the folded versions); x: (C, S)."""
    s = split_chains(x)
    folded = np.abs(s - np.median(s))
    return max(gelman_rubin(rank_normalize(s)), gelman_rubin(rank_normalize(folded)))


def ess(x) -> float:
    """Effective sample size of (C, S) draws (numpyro's Geyer estimator, chains pooled), capped
    like Stan's at N log10 N (antithetic chains, e.g. HMC with a fixed number of steps on a
    Gaussian, give a negative autocorrelation time); the number of draws for constant draws."""
    from numpyro.diagnostics import effective_sample_size

    x = _as_chains(x)
    if np.ptp(x) == 0.0:
        return float(x.size)
    cap = x.size * np.log10(x.size)
    e = float(effective_sample_size(x))
    return cap if not np.isfinite(e) or e <= 0 or e > cap else e


def ess_bulk(x) -> float:
    """Bulk ESS: ESS of the rank-normalised split chains; x: (C, S)."""
    s = split_chains(x)
    if np.ptp(s) == 0.0:
        return float(s.size)
    return ess(rank_normalize(s))


def mcse_mean(x) -> float:
    """Monte Carlo standard error of the mean of (C, S) draws: sd / sqrt(ESS)."""
    x = _as_chains(x)
    return float(np.std(x, ddof=1) / np.sqrt(ess(x)))


def grouped(fn, x, groups, worst=max) -> float:
    """``worst`` over groups of ``fn(x[chains of the group])``; x: (C, S), groups: (C,) ids
    (e.g. the data set of each chain)."""
    x = np.asarray(x)
    groups = np.asarray(groups)
    return float(worst(fn(x[groups == g]) for g in np.unique(groups)))
