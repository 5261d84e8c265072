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
runners: :func:`rhat_nested`.  Every function equals its ``arviz_stats`` counterpart to 1e-6
(tests/test_diagnostics.py: iid, AR(1), shifted and drifting chains, NaN and constant draws);
they are kept here as plain NumPy because the kinds call them per data set, coordinate and sweep
point, where one call of ArviZ's xarray layer costs more than the computation.

Chains that sample different posteriors (DSLT4's trials each have their own data set) must
not be pooled: :func:`grouped` applies a diagnostic within each data set and reports the worst.

Undefined diagnostics are NaN, as in ``arviz_stats``: every diagnostic of draws that hold a NaN
(:func:`grouped`: of any group), and R-hat (split, rank-normalised, nested) of constant draws
(0 / 0); the ESS of constant draws is the number of draws and their MCSE 0 (up to rounding), as
ArviZ's.  A comparison with NaN is False, so a check written ``rhat > 1.05`` passes NaN
silently: test ``np.isnan`` first (``slt_relu.analysis.sampler_warnings``).
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


def _undefined(x: np.ndarray) -> bool:
    """Whether draws hold a NaN: then every diagnostic of them is NaN."""
    return bool(np.isnan(x).any())


def gelman_rubin(x) -> float:
    """Classic potential scale reduction sqrt(((S-1)/S W + B/S) / W) of (C, S) chains; NaN for
    constant draws (W = B = 0) or draws holding a NaN, inf for chains each constant at different
    values (W = 0 < B)."""
    x = _as_chains(x)
    if _undefined(x):
        return float("nan")
    C, S = x.shape
    W = float(np.mean(np.var(x, axis=1, ddof=1)))
    B_over_S = float(np.var(np.mean(x, axis=1), ddof=1)) if C > 1 else 0.0
    if W == 0.0:
        return float("nan") if B_over_S == 0.0 else float("inf")
    return float(np.sqrt(((S - 1) / S * W + B_over_S) / W))


def rhat(x) -> float:
    """Rank-normalised split R-hat (maximum of the bulk and the folded versions); x: (C, S).
    NaN for draws holding a NaN or constant draws."""
    x = _as_chains(x)
    if _undefined(x):
        return float("nan")
    s = split_chains(x)
    folded = np.abs(s - np.median(s))
    return max(gelman_rubin(rank_normalize(s)), gelman_rubin(rank_normalize(folded)))


def autocov(x) -> np.ndarray:
    """Autocovariances of each chain at every lag, by FFT: x (C, S) -> (C, S), lag 0 first,
    normalised by S (the biased estimator Stan and ArviZ use)."""
    x = np.asarray(x, np.float64)
    S = x.shape[-1]
    m = 1 << int(np.ceil(np.log2(2 * S)))                 # zero padding: no wrap-around
    f = np.fft.rfft(x - x.mean(-1, keepdims=True), n=m, axis=-1)
    return np.fft.irfft(f * np.conjugate(f), n=m, axis=-1)[..., :S] / S


def ess(x) -> float:
    """Effective sample size of (C, S) draws as in Stan and ArviZ (Vehtari et al. 2021, eqs.
    10-11; Geyer 1992): autocorrelations rho_t = 1 - (W - mean_c acov_c(t)) / var+ with
    var+ = (S-1)/S W + B/S, summed in pairs while a pair is positive (initial positive
    sequence), made monotone (initial monotone sequence); ESS = C S / tau with
    tau = -1 + 2 sum_{t <= T} rho_t + rho_{T+1}, capped at C S log10(C S) (antithetic chains);
    C S for constant draws, NaN for draws holding a NaN (or infinity, whose autocorrelations are
    NaN).  Equal to ``arviz_stats.ess(x, method="identity")`` (tests/test_diagnostics.py)."""
    x = _as_chains(x)
    if _undefined(x):
        return float("nan")
    C, S = x.shape
    if np.max(x) - np.min(x) < np.finfo(float).resolution:
        return float(x.size)
    acov = autocov(x)
    mean_var = np.mean(acov[:, 0]) * S / (S - 1.0)           # W
    var_plus = mean_var * (S - 1.0) / S + (np.var(x.mean(1), ddof=1) if C > 1 else 0.0)
    rho = 1.0 - (mean_var - acov.mean(0)) / var_plus          # (S,)
    if np.isnan(rho).any():
        return float("nan")
    rho[0] = 1.0
    keep = np.zeros(S)
    keep[:2] = rho[:2]
    t = 1
    even, odd = rho[0], rho[1]
    while t < S - 3 and even + odd > 0.0:                     # initial positive sequence
        even, odd = rho[t + 1], rho[t + 2]
        if even + odd >= 0.0:
            keep[t + 1], keep[t + 2] = even, odd
        t += 2
    last = t - 2
    if even > 0.0:
        keep[last + 1] = even
    for t in range(1, last - 1, 2):                           # initial monotone sequence
        if keep[t + 1] + keep[t + 2] > keep[t - 1] + keep[t]:
            keep[t + 1] = keep[t + 2] = (keep[t - 1] + keep[t]) / 2.0
    tau = -1.0 + 2.0 * np.sum(keep[:last + 1]) + np.sum(keep[last + 1:last + 2])
    tau = max(tau, 1.0 / np.log10(x.size))
    return float(x.size / tau)


def ess_bulk(x) -> float:
    """Bulk ESS: ESS of the rank-normalised split chains; x: (C, S).  NaN for draws holding a NaN."""
    x = _as_chains(x)
    if _undefined(x):
        return float("nan")
    return ess(rank_normalize(split_chains(x)))


def ess_tail(x, prob: float = 0.05) -> float:
    """Tail ESS: the smaller ESS of the indicators x <= q_prob and x <= q_(1-prob) (quantiles of
    all draws, NumPy's linear rule) on the split chains (Vehtari et al. 2021, sec. 4.3); 0 < prob < 1.
    NaN for draws holding a NaN."""
    x = _as_chains(x)
    if not (isinstance(prob, (float, np.floating)) and 0 < prob < 1):
        raise ValueError(f"prob: expected a number in (0, 1), got {prob!r}")
    if _undefined(x):
        return float("nan")
    lo, hi = sorted((prob, 1.0 - prob))
    return min(ess(split_chains(x <= np.quantile(x, p)).astype(np.float64)) for p in (lo, hi))


def ess_mean(x) -> float:
    """ESS of the mean: ESS of the split chains (not rank-normalised); x: (C, S).  NaN for draws
    holding a NaN."""
    x = _as_chains(x)
    if _undefined(x):
        return float("nan")
    return ess(split_chains(x))


def mcse_mean(x) -> float:
    """Monte Carlo standard error of the mean of (C, S) draws: sd / sqrt(ESS of the split chains);
    0 for constant draws (up to rounding), NaN for draws holding a NaN."""
    x = _as_chains(x)
    if _undefined(x):
        return float("nan")
    return float(np.std(x, ddof=1) / np.sqrt(ess_mean(x)))


def rhat_nested(x, superchains) -> float:
    """Nested R-hat (Margossian, Hoffman, Sountsov, Riou-Durand, Vehtari, Gelman 2024) for many
    short chains: chains are grouped into K superchains of M chains that started at one point,

        nR-hat = sqrt(1 + B_nu / W_nu),   B_nu = var_k(mean of superchain k) (ddof 1),
        W_nu = mean_k [var_m(chain means in k) (ddof 1; 0 if M = 1) + mean_m(chain variances)],

    on the rank-normalised split chains (each chain's two halves stay in its superchain), the
    larger of the bulk and the folded versions as for :func:`rhat`.  x: (C, S); superchains:
    (C,) integer ids, every superchain the same size, at least two superchains.  NaN for draws
    holding a NaN or constant draws."""
    x = _as_chains(x)
    ids = np.asarray(superchains)
    if ids.shape != (x.shape[0],):
        raise ValueError(f"superchains: expected one id per chain ({x.shape[0]}), got shape {ids.shape}")
    groups, counts = np.unique(ids, return_counts=True)
    if len(groups) < 2 or counts.min() != counts.max():
        raise ValueError(f"superchains: expected at least two superchains of equal size, got sizes {counts.tolist()}")
    if _undefined(x) or np.ptp(x) == 0:
        return float("nan")
    s = split_chains(x)
    ids = np.concatenate([ids, ids])

    def nested(z):
        means, vars_ = z.mean(1), z.var(1, ddof=1)
        sup = np.array([means[ids == g].mean() for g in groups])
        between = np.array([means[ids == g].var(ddof=1) for g in groups])     # 2M >= 2 half-chains each
        within = np.array([vars_[ids == g].mean() for g in groups])
        with np.errstate(divide="ignore", invalid="ignore"):                # constant folded draws: 0 / 0
            return float(np.sqrt(1.0 + np.var(sup, ddof=1) / np.mean(within + between)))

    return max(nested(rank_normalize(s)), nested(rank_normalize(np.abs(s - np.median(s)))))


def grouped(fn, x, groups, worst=max) -> float:
    """``worst`` over groups of ``fn(x[chains of the group])``; x: (C, S), groups: (C,) ids
    (e.g. the data set of each chain).  NaN if any group's value is NaN (Python's max and min
    would return or drop a NaN depending on its place)."""
    x = np.asarray(x)
    groups = np.asarray(groups)
    values = [fn(x[groups == g]) for g in np.unique(groups)]
    return float("nan") if np.isnan(values).any() else float(worst(values))
