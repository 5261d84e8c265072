"""The local posterior's observables: Bayesian influence functions and susceptibilities, from any
sampler's draws.

Both are posterior covariances of per-sample losses ell_k(w) with something, and both answer "what if
the data were weighted differently".  Take the tempered posterior with part A of the data reweighted,

    p_eps(w)  proportional to  phi(w) exp(-n beta [L_n(w) + eps L_A(w)]),
    L_n(w) = (1/n) sum_k ell_k(w),   L_A(w) = (1/n) sum_{k in A} ell_k(w),

(eps = 1 counts A's samples twice, eps = -1 removes them).  Differentiating
E_eps[O] = int O p_eps / int p_eps under the integral,

    d/d eps E_eps[O] |_{eps = 0} = -n beta Cov(O, L_A) = -beta sum_{k in A} Cov(O, ell_k).

* :func:`bayesian_influence`: Cov(ell_k, ell_l) and the correlation for all pairs of samples, or
  between two index sets (Kreer et al. 2025, "Bayesian influence functions for Hessian-free data
  attribution"; devinterp 2.0's ``bif``, whose default is the correlation).  -beta Cov(ell_k, ell_l)
  is the response of the posterior mean of ell_l to upweighting sample k.
* :func:`susceptibility`: chi_A = d/d eps E_eps[O] at eps = 0 for each group A of a partition of the
  samples (bins of the input box, say) and each observable O (the indicator of a phase, say).
* :func:`per_sample_losses`: ell_k(w) of the two-layer network at every draw, in chunks of bounded
  memory, to feed both.

Monte Carlo errors.  The estimates pool every draw of every chain (the plug-in covariance of the
pooled draws, so that chains in different modes count with the spread between them); their standard
errors are the delete-one-chain jackknife,

    se^2 = (C - 1) / C sum_c (theta_{-c} - mean_c' theta_{-c'})^2,

theta_{-c} the estimate without chain c (the remaining chains' weights renormalised; the weights 1/C,
or for independent SMC runs their evidence weights, :func:`slt_relu.posterior.masses.run_weights`), as
for phase masses (:func:`~slt_relu.posterior.masses.runs_mcse`).  For a plain mean it is the spread of
the per-chain means over sqrt(C); for a pool by evidence it does not understate at few runs where the
delta method does (Efron-Stein), and a run carrying most of the evidence shows in it.

Why chains and not batch means: the only independence a sampler guarantees is between its chains
(SMC's particles share ancestors after resampling, NUTS's draws are autocorrelated, and a chain stuck
in one mode has small batch-mean errors however wrong it is); the jackknife needs no autocorrelation
model and covers nonlinear estimates such as the correlation.  It has C - 1 degrees of freedom: use
C >= 8 chains (runs) for error bars worth reading.

Memory.  Three passes over the chains (their means and variances; the pooled cross moment; the
jackknife), one chain's (S, n_a) and (S, n_b) blocks at a time: besides the draws, a constant number
(at most seven) of (n_a, n_b) matrices, so all pairs of n samples need 7 x 8 n^2 bytes (n = 10^4: 5.6 GB;
pass index sets for less).
"""
from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..loss import check_data, check_sigma
from ..models.base import check_model
from ..models.likelihood import GaussianLoss, check_regression_data
from ..network import TwoLayer, check_count, check_params, forward_columns, from_flat, num_params
from .target import LOSSES_CHUNK_POINTS

__all__ = ["bayesian_influence", "per_sample_losses", "susceptibility"]

JACKKNIFE = ("delete-one-chain jackknife of the pooled estimate: se^2 = (C-1)/C sum_c "
             "(theta_-c - mean theta_-c)^2")


# ----------------------------------------------------------------------------------------
# per-sample losses at draws


def per_sample_losses(params, x, y, sigma: float = 1.0, *, chunk: int | None = None, model=None) -> np.ndarray:
    """The per-sample negative log likelihood of the two-layer network (or of any ``model``) at every draw.

        ell_k(w) = (y_k - f(x_k, w))^2 / (2 sigma^2) + log(sigma sqrt(2 pi)),   L_n(w) = (1/n) sum_k ell_k(w)

    (docs/design.md's L_n, term by term.)  Evaluated ``chunk`` draws at a time in one compiled
    ``lax.map``: besides the result (..., n), memory for chunk x n elements per intermediate array.

    Args:
        params: the draws: a TwoLayer with leading axes (...,) (``PosteriorSamples.params``,
            ``SMCPosterior.params``: (C, S)), or flat parameters (..., D) in docs/design.md's order
            (w row-major, b, q, c; D = d (n_in + 2) + 1), e.g. ``jax.vmap(model.embed_flat)`` of a
            sampler's constrained draws.  NaN parameters give NaN losses.
        x: (n, n_in) inputs of one data set, finite.
        y: (n,) outputs, finite.
        sigma: the noise standard deviation, > 0.
        chunk: draws per chunk (default max(1, 2^22 // n)).
        model: a :class:`~slt_relu.models.Model`: params are then its parameters with leading axes (...,), x
            (n, ...) its inputs and y (n,) or (n, n_out), and ell_k its :class:`~slt_relu.models.GaussianLoss`'s
            terms.

    Returns:
        (..., n) ell_k at each draw, a NumPy array in the draws' dtype.

    References:
        Kreer et al. 2025 (per-sample losses at posterior draws); DSLT4 (the regression likelihood).
    """
    if model is not None:
        return _model_per_sample(model, params, x, y, sigma, chunk)
    if isinstance(params, TwoLayer):
        check_params(params)
        w = jnp.asarray(params.w)
        lead, (width, n_in) = w.shape[:-2], w.shape[-2:]
        flat = jnp.concatenate([w.reshape(lead + (width * n_in,)), jnp.asarray(params.b), jnp.asarray(params.q),
                                jnp.asarray(params.c)[..., None]], axis=-1)
    else:
        flat = jnp.asarray(params)
        if flat.ndim < 1 or not jnp.issubdtype(flat.dtype, jnp.floating):
            raise ValueError(f"params: expected a TwoLayer or flat float parameters (..., D), got "
                             f"{getattr(flat, 'dtype', type(params).__name__)} of shape {flat.shape}")
        if np.ndim(x) != 2 or np.shape(x)[1] < 1:
            raise ValueError(f"x: expected shape (n, n_in), got {np.shape(x)}")
        n_in, D = int(np.shape(x)[1]), flat.shape[-1]
        width = (D - 1) // (n_in + 2)
        if width < 1 or num_params(width, n_in) != D:
            raise ValueError(f"params: expected a last axis of D = d (n_in + 2) + 1 with n_in = x's columns "
                             f"({n_in}), got {D}")
        lead = flat.shape[:-1]
    x, y = check_data(x, y, n_in, "the parameters")
    check_sigma(sigma)
    n = x.shape[0]
    chunk = max(1, LOSSES_CHUNK_POINTS // n) if chunk is None else check_count(chunk, "chunk")
    B = math.prod(lead)
    dtype = jnp.result_type(flat.dtype, x.dtype)
    flat = flat.reshape(B, flat.shape[-1]).astype(dtype)
    if B == 0:
        return np.zeros(lead + (n,), dtype)
    out = _per_sample(flat, x.T.astype(dtype), y.astype(dtype), jnp.asarray(sigma, dtype), width, n_in,
                      min(chunk, B))
    return np.asarray(out).reshape(lead + (n,))


def _model_per_sample(model, params, x, y, sigma, chunk):
    """per_sample_losses of any model: params with leading axes (...,) on every leaf."""
    check_model(model)
    check_sigma(sigma)
    leaves = jax.tree.leaves(params)
    first = model.structure.shapes[0]
    if not leaves or jnp.ndim(leaves[0]) < len(first):
        raise ValueError(f"params: expected {model.name!r}'s parameters with leading draw axes, got "
                         f"{[jnp.shape(a) for a in leaves]}")
    lead = jnp.shape(leaves[0])[:jnp.ndim(leaves[0]) - len(first)]
    one = jax.tree.map(lambda a: a[(0,) * len(lead)], params) if lead else params
    x, y = check_regression_data(model, one, x, y)
    n = x.shape[0]
    chunk = max(1, LOSSES_CHUNK_POINTS // n) if chunk is None else check_count(chunk, "chunk")
    B = math.prod(lead)
    flat = jax.vmap(model.ravel)(jax.tree.map(lambda a: jnp.reshape(a, (B,) + jnp.shape(a)[len(lead):]), params))
    if B == 0:
        return np.zeros(lead + (n,), flat.dtype)
    out = _model_per_sample_jit(GaussianLoss(model, float(sigma)), flat, x, y, min(chunk, B))
    return np.asarray(out).reshape(lead + (n,))


@partial(jax.jit, static_argnums=(0, 4))
def _model_per_sample_jit(loss, flat, x, y, chunk: int):
    return jax.lax.map(lambda w: loss.per_sample(loss.model.unravel(w), (x, y)), flat, batch_size=chunk)


@partial(jax.jit, static_argnums=(4, 5, 6))
def _per_sample(flat, x_cols, y, sigma, width: int, n_in: int, chunk: int):
    """ell_k at each row of flat (B, D): (B, n), ``chunk`` rows vmapped at a time."""
    const = jnp.log(sigma * jnp.sqrt(2.0 * jnp.pi))

    def one(theta):
        resid = y - forward_columns(from_flat(theta, width, n_in), x_cols)
        return resid**2 / (2.0 * sigma**2) + const
    return jax.lax.map(one, flat, batch_size=chunk)


# ----------------------------------------------------------------------------------------
# the pooled covariance and its jackknife over chains


def _check_losses(losses, name: str = "losses") -> np.ndarray:
    a = np.asarray(losses)
    if a.ndim != 3 or min(a.shape) < 1:
        raise ValueError(f"{name}: expected shape (chains, draws, samples) with each >= 1, got {a.shape}")
    if a.dtype.kind not in "iuf":
        raise ValueError(f"{name}: expected real numbers, got dtype {a.dtype}")
    if a.shape[1] < 2:
        raise ValueError(f"{name}: expected at least 2 draws per chain, got {a.shape[1]}")
    return a


def _check_weights(weights, C: int) -> np.ndarray:
    """Chain weights (C,) normalised to sum 1 (NaN stays NaN); default 1/C."""
    if weights is None:
        return np.full(C, 1.0 / C)
    w = np.asarray(weights, np.float64) if np.asarray(weights).dtype.kind in "iuf" else None
    if w is None or w.shape != (C,):
        raise ValueError(f"weights: expected one finite weight >= 0 per chain, shape ({C},), got "
                         f"{np.shape(weights)}")
    if np.isnan(w).any():
        return np.full(C, np.nan)
    if not (np.all(np.isfinite(w)) and np.all(w >= 0) and w.sum() > 0):
        raise ValueError(f"weights: expected finite weights >= 0 with a positive sum, got {w.tolist()}")
    return w / w.sum()


def _check_index(index, n: int, name: str) -> np.ndarray:
    if index is None:
        return np.arange(n)
    idx = np.asarray(index)
    if idx.ndim != 1 or idx.size == 0 or idx.dtype.kind not in "iu":
        raise ValueError(f"{name}: expected a non-empty 1-D array of sample indices, got {idx.dtype} of shape "
                         f"{idx.shape}")
    if idx.min() < 0 or idx.max() >= n:
        raise ValueError(f"{name}: expected indices in [0, {n}), got {idx.min()}..{idx.max()}")
    return idx.astype(np.int64)


def _pooled_covariance(block_a, block_b, C: int, w: np.ndarray, correlation: bool):
    """The pooled (weighted plug-in) covariance of a and b, (n_a, n_b), its jackknife se over chains, and
    with ``correlation`` the correlation and its se; block_a(c) -> (S, n_a), block_b(c) -> (S, n_b)
    float64 draws of chain c.

    Pass 1: per-chain means and variances (small), the pooled mean, and T = sum_c w_c M_c with M_c
    chain c's mean of (a - mu_a)(b - mu_b)^T: the pooled covariance.  Pass 2: each chain's M_c again,
    its leave-one-out covariance (T - w_c M_c) / (1 - w_c) - outer(mbar_-c,a, mbar_-c,b) with
    mbar_-c = -w_c (m_c - mu) / (1 - w_c) (its mean, centred at the pooled one), and the jackknife
    sums of d_c = theta_-c - theta and d_c^2 (sum_c (theta_-c - mean theta_-c)^2 = sum d^2 - (sum d)^2 / C;
    a chain of weight 0 has d_c = 0)."""
    ma, mb, va, vb = [], [], [], []
    for c in range(C):
        a, b = block_a(c), block_b(c)
        ma.append(a.mean(0))
        mb.append(b.mean(0))
        va.append(a.var(0))
        vb.append(b.var(0))
    ma, mb, va, vb = map(np.array, (ma, mb, va, vb))                 # (C, n_a), (C, n_b)
    mu_a, mu_b = w @ ma, w @ mb
    da, db = ma - mu_a, mb - mu_b                                     # chains' means about the pooled ones
    sa, sb = va + da**2, vb + db**2                                   # chains' second moments about them
    Va, Vb = w @ sa, w @ sb                                           # pooled variances

    def moment(c):
        a, b = block_a(c) - mu_a, block_b(c) - mu_b
        return a.T @ b / a.shape[0]

    T = np.zeros((ma.shape[1], mb.shape[1]))
    for c in range(C):
        T += w[c] * moment(c)
    with np.errstate(divide="ignore", invalid="ignore"):
        corr = T / np.sqrt(np.outer(Va, Vb)) if correlation else None
        sums = [np.zeros_like(T), np.zeros_like(T)]                  # sum_c d_c, sum_c d_c^2
        sums_corr = [np.zeros_like(T), np.zeros_like(T)] if correlation else None
        for c in np.flatnonzero(w > 0):
            rest = 1.0 - w[c]
            ka, kb = -w[c] * da[c] / rest, -w[c] * db[c] / rest          # leave-one-out means (centred)
            cov_c = (T - w[c] * moment(c)) / rest - np.outer(ka, kb)
            _accumulate(sums, cov_c - T)
            if correlation:
                va_c = (Va - w[c] * sa[c]) / rest - ka**2
                vb_c = (Vb - w[c] * sb[c]) / rest - kb**2
                _accumulate(sums_corr, cov_c / np.sqrt(np.outer(va_c, vb_c)) - corr)
        se = _jackknife_se(sums, C)
        se_corr = _jackknife_se(sums_corr, C) if correlation else None
    if not np.all(np.isfinite(w)):
        T[:] = np.nan
        se[:] = np.nan
        if correlation:
            corr[:] = np.nan
            se_corr[:] = np.nan
    return T, se, corr, se_corr


def _accumulate(sums, d):
    sums[0] += d
    sums[1] += d**2


def _jackknife_se(sums, C: int):
    """The jackknife se from sum_c d_c and sum_c d_c^2 over C chains (NaN with one chain)."""
    if C < 2:
        return np.full_like(sums[0], np.nan)
    return np.sqrt(np.maximum((C - 1) / C * (sums[1] - sums[0] ** 2 / C), 0.0))


def bayesian_influence(losses, index_a=None, index_b=None, *, weights=None):
    """Bayesian influence functions: the posterior covariance and correlation of per-sample losses.

        BIF_cov(k, l)  = Cov_w(ell_k, ell_l),
        BIF_corr(k, l) = Cov_w(ell_k, ell_l) / sqrt(Var_w(ell_k) Var_w(ell_l)),

    over the (tempered, possibly localized) posterior the draws come from.  Upweighting sample k by
    eps in n beta L_n (its loss counted 1 + eps times) moves the posterior mean of ell_l by
    -beta Cov(ell_k, ell_l) eps to first order (module docstring; :func:`susceptibility` with
    O = ell_l and A = {k}).  Estimates pool every draw (weighted plug-in covariance, divisor the
    number of draws); standard errors are the delete-one-chain jackknife (module docstring).

    Args:
        losses: (C, S, n) per-sample losses ell_k at S draws of each of C chains or independent runs
            on one data set (:func:`per_sample_losses`); S >= 2.
        index_a: the samples of the rows (n_a,), ints in [0, n) (default: all).
        index_b: the samples of the columns (n_b,) (default: all).
        weights: (C,) chain weights >= 0 (normalised here; default equal), e.g. independent SMC runs'
            evidence weights (:func:`slt_relu.posterior.masses.run_weights`).

    Returns:
        An xarray.Dataset with dims ``sample_a``, ``sample_b`` (the sample indices as coordinates) and the
        variables ``cov`` and ``cov_se``, ``corr`` and ``corr_se`` (the jackknife standard errors; NaN with
        one chain).  NaN losses of sample k give NaN in k's row and column; NaN weights give NaN everywhere.
        Memory: besides the draws, at most seven (n_a, n_b) float64 matrices.

    References:
        Kreer et al. 2025, "Bayesian influence functions for Hessian-free data attribution";
        devinterp 2.0 (``devinterp.slt.bif``).
    """
    import xarray as xr

    a = _check_losses(losses)
    C, S, n = a.shape
    ia, ib = _check_index(index_a, n, "index_a"), _check_index(index_b, n, "index_b")
    w = _check_weights(weights, C)
    cov, se, corr, se_corr = _pooled_covariance(lambda c: a[c][:, ia].astype(np.float64),
                                                lambda c: a[c][:, ib].astype(np.float64), C, w, True)
    dims = ("sample_a", "sample_b")
    return xr.Dataset({"cov": (dims, cov), "cov_se": (dims, se), "corr": (dims, corr), "corr_se": (dims, se_corr)},
                      coords={"sample_a": ia, "sample_b": ib},
                      attrs={"chains": C, "draws": S, "samples": n, "se_method": JACKKNIFE})


def susceptibility(observable, losses, groups, n_beta, *, weights=None, observable_names=None):
    """The susceptibility of observables' posterior means to reweighting groups of the data.

        chi_A(O) = d/d eps E_eps[O] |_{eps = 0} = -n beta Cov(O, L_A) = -(n beta / n) sum_{k in A} Cov(O, ell_k),
        p_eps(w) proportional to phi(w) exp(-n beta [L_n(w) + eps L_A(w)]),  L_A = (1/n) sum_{k in A} ell_k.

    Sign and normalisation: chi_A > 0 means counting A's data more (eps > 0) raises E[O]; the
    reweighting adds eps times A's share of the loss and leaves the other samples' weights alone, so
    chi_A grows with the size of A and sum_A chi_A = -n beta Cov(O, L_n) over a partition.  devinterp's
    per-token susceptibility instead moves weight from the whole data to A at fixed total and drops
    the factor n beta: for a group A of the data, chi^dev_A = -Cov(O, Lbar_A - L_n),
    Lbar_A = (1/|A|) sum_{k in A} ell_k, so

        chi^dev_A = [(n / |A|) chi_A - sum_B chi_B] / (n beta)     (B over the whole partition).

    Standard errors: the delete-one-chain jackknife of the pooled estimate (module docstring).

    Args:
        observable: (C, S) or (C, S, P) the observable(s) O at each draw (e.g. 0/1 phase indicators).
        losses: (C, S, n) per-sample losses of every sample of the data set (:func:`per_sample_losses`).
        groups: (n,) each sample's group label (ints or strings; each distinct label is a group A,
            e.g. a cell of a grid over the input box).
        n_beta: n beta of the posterior the draws come from (> 0, finite); n is losses' last axis.
        weights: (C,) chain weights, as in :func:`bayesian_influence`.
        observable_names: P names for the observable coordinate (default 0..P-1).

    Returns:
        An xarray.Dataset over dims ``group`` and ``observable`` (no ``observable`` dim for an observable of
        shape (C, S)) with the variables ``chi`` and ``chi_se``, ``group_size`` (group,) the samples in each
        group; ``observable_mean`` the pooled posterior mean of each observable.  NaN draws of an observable give NaN for it; NaN
        losses of a sample give NaN for its group.

    References:
        Baker et al. 2025, arXiv:2504.18274 (susceptibilities of language models; devinterp 2.0's
        ``susceptibilities``, its appendix C.4); Kreer et al. 2025.
    """
    import xarray as xr

    from ..network import check_number

    a = _check_losses(losses)
    C, S, n = a.shape
    o = np.asarray(observable)
    if o.dtype.kind not in "biuf" or o.ndim not in (2, 3) or o.shape[:2] != (C, S):
        raise ValueError(f"observable: expected real numbers of shape ({C}, {S}) or ({C}, {S}, P) like losses' "
                         f"(chains, draws), got {o.dtype} of shape {o.shape}")
    scalar = o.ndim == 2
    o = o.reshape(C, S, -1).astype(np.float64)
    P = o.shape[2]
    g = np.asarray(groups)
    if g.shape != (n,):
        raise ValueError(f"groups: expected one label per sample, shape ({n},), got {g.shape}")
    check_number(n_beta, "n_beta")
    if np.ndim(n_beta) != 0:
        raise ValueError(f"n_beta: expected a scalar, got shape {np.shape(n_beta)}")
    names = list(range(P)) if observable_names is None else list(observable_names)
    if len(names) != P:
        raise ValueError(f"observable_names: expected {P} names (one per observable), got {len(names)}")
    w = _check_weights(weights, C)
    labels, codes = np.unique(g, return_inverse=True)
    G = len(labels)
    onehot = np.zeros((n, G))
    onehot[np.arange(n), codes] = 1.0
    with np.errstate(invalid="ignore"):
        # sum_{k in A} ell_k per draw; a NaN loss poisons its group only (0 * NaN would spread it)
        sums = np.stack([np.where(np.isnan(a[c]), 0.0, a[c]).astype(np.float64) @ onehot for c in range(C)])
        bad = np.isnan(a).any((0, 1)) @ onehot > 0
        sums[..., bad] = np.nan
    cov, se, _, _ = _pooled_covariance(lambda c: o[c], lambda c: sums[c], C, w, False)
    scale = float(n_beta) / n
    chi, chi_se = -scale * cov.T, scale * se.T                                 # (G, P)
    mean = w @ o.mean(1)
    if scalar:
        data = {"chi": ("group", chi[:, 0]), "chi_se": ("group", chi_se[:, 0]), "observable_mean": ((), mean[0])}
        coords = {"group": labels}
    else:
        dims = ("group", "observable")
        data = {"chi": (dims, chi), "chi_se": (dims, chi_se), "observable_mean": ("observable", mean)}
        coords = {"group": labels, "observable": names}
    ds = xr.Dataset(data, coords=coords, attrs={"n_beta": float(n_beta), "samples": n, "chains": C, "draws": S,
                                                "convention": "chi_A = d/d eps E[O] under n beta (L_n + eps L_A), "
                                                "L_A = (1/n) sum_{k in A} ell_k", "se_method": JACKKNIFE})
    ds["group_size"] = ("group", np.bincount(codes, minlength=G))
    return ds
