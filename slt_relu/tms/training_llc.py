"""The local learning coefficient along training of the toy model of superposition, at the checkpoints of
``slt_relu.tms.training.train_trajectories``.

The learning coefficient along training (:func:`llc_along_training`): at every checkpoint w*, the SGLD
estimate of ``slt_relu.posterior.llc.estimate_llc`` on the localized tempered posterior of L_n,

    p(w) proportional to exp(-n beta L_n(w) - (gamma / 2) |w - w*|^2),
    lambda_hat(w*) = n beta (E_p[L_n(w)] - L_n(w*)),    n beta = n / log n,

with C chains per checkpoint and its standard error over them (std / sqrt(C)).  n beta = n / log n is the
inverse temperature of Lau et al. 2023 (devinterp's default, batch_size / log batch_size, is the same rule
for mini-batch SGLD); the chains use full-batch gradients of the exact L_n.  The checkpoints of one n are
estimated in chunks whose chains' copies of the data and kept draws stay below ``LLC_CHUNK_ELEMENTS`` elements,
one compiled program per n.  A checkpoint that is not a local minimum of L_n (early in training) has no local
learning coefficient; its estimate says how fast L_n falls nearby and may be negative.

References:
    Chen, Lau, Mendel, Wei, Murfet 2023, "Dynamical versus Bayesian phase transitions in a toy model of
    superposition", arXiv 2310.06301 (the LLC along training); Lau, Furman, Wang, Murfet, Wei 2023, "The local
    learning coefficient" (the estimator).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from ..models.tms import check_positive
from .sorted_loss import SortedInputs, sorted_empirical_loss, sorted_inputs

__all__ = ["LLC_CHUNK_ELEMENTS", "llc_along_training", "llc_at_checkpoints", "quadratic_llc",
           "quadratic_llc_at_checkpoint"]

LLC_CHUNK_ELEMENTS = 2 ** 23
"""The elements one SGLD program of :func:`llc_along_training` holds at most in its chains' copies of the data
(the sorted inputs) and, separately, in their kept draws: 64 MB each in float64 (one checkpoint's chains at
least)."""



def quadratic_llc(hessian_eigenvalues, n_beta: float, localization: float, step_size: float = 0.0) -> float:
    """The expected SGLD estimate lambda_hat at a minimum where L is quadratic, L = L* + (1/2) v^T H v:

        E[lambda_hat] = sum_i (1/2) a_i / ((a_i + gamma) (1 - eps (a_i + gamma) / 4)),   a_i = n beta h_i,

    each eigen-direction of H an Ornstein-Uhlenbeck process under SGLD's Euler step (stationary variance
    1 / (k (1 - eps k / 4)) at curvature k = a_i + gamma); flat directions (h_i = 0) contribute 0.  With gamma
    = eps = 0 it is half the rank of H, the Morse-Bott minimum's lambda; the difference is the estimator's bias
    from the localization and the step (Lau et al. 2023; ``slt_relu.posterior.llc``).

    Args:
        hessian_eigenvalues: (D,) eigenvalues h_i of the Hessian of L at the minimum (negative rounding clipped).
        n_beta: n beta > 0.
        localization: gamma >= 0.
        step_size: eps >= 0 (0: the continuous-time limit).

    Returns:
        E[lambda_hat] as a float.
    """
    try:
        h = np.asarray(hessian_eigenvalues, np.float64).reshape(-1)
    except (TypeError, ValueError):
        h = np.asarray([np.nan])
    if h.size == 0 or not np.all(np.isfinite(h)):
        raise ValueError(f"hessian_eigenvalues: expected a non-empty array of finite numbers, got {hessian_eigenvalues!r}")
    h = np.clip(h, 0.0, None)
    nb = check_positive(n_beta, "n_beta")
    gamma = check_positive(localization, "localization", allow_zero=True)
    eps = check_positive(step_size, "step_size", allow_zero=True)
    a = nb * h
    k = a + gamma
    if np.any(eps * k >= 4):
        raise ValueError(f"step_size: SGLD is unstable at eps (a + gamma) >= 4; got eps = {eps:g}, largest curvature "
                         f"{k.max():.3g}")
    keep = a > 0
    return float(np.sum(0.5 * a[keep] / (k[keep] * (1 - eps * k[keep] / 4))))


def llc_at_checkpoints(keys, centers, data: SortedInputs, settings):
    """estimate_llc at many centers of one data set in one SGLD program (``slt_relu.posterior.llc_curve.llc_at_checkpoints``,
    the code path of every model): (estimate (B,), se (B,), accept (B,)).

    For center b, the C = ``settings.num_chains`` chains have the keys ``jax.random.split(keys[b], C)`` and the
    arguments ``estimate_llc(keys[b], sorted_empirical_loss, centers[b], data, settings)`` gives them, so each
    estimate is that function's (tests/test_tms_training.py).

    Args:
        keys: (B,) PRNG keys (raw key data).
        centers: (B, D) flat parameters w*.
        data: one data set's :class:`~slt_relu.tms.sorted_loss.SortedInputs`.
        settings: ``slt_relu.posterior.llc.LLCSettings`` with n_beta set and batch_size None.

    Returns:
        three (B,) numpy arrays, lambda_hat (the chains' mean), its standard error std / sqrt(C) (NaN for C = 1)
        and the chains' mean MALA acceptance.
    """
    from ..posterior.llc_curve import llc_at_checkpoints as at_checkpoints

    curve = at_checkpoints(keys, sorted_empirical_loss, jnp.asarray(centers), data, settings)
    return curve.estimate, curve.se, curve.accept_prob


def llc_along_training(key, ds, settings=None, *, progress: Callable | None = None):
    """The local learning coefficient at every checkpoint of :func:`~slt_relu.tms.training.train_trajectories`' Dataset (module docstring).

        lambda_hat(w*) = n beta (E[L_n(w)] - L_n(w*)),  p(w) proportional to exp(-n beta L_n(w) - (gamma/2) |w - w*|^2),

    n beta = n / log n at each n, by SGLD with full-batch gradients of the exact L_n (:func:`llc_at_checkpoints`).

    Args:
        key: a PRNG key; the checkpoint (n index i, run r, checkpoint k) uses
            ``fold_in(fold_in(key, i), r K + k)``.
        ds: the Dataset of :func:`~slt_relu.tms.training.train_trajectories` (W, b, inputs; dims n, run, checkpoint).
        settings: ``slt_relu.posterior.llc.LLCSettings`` (num_chains, num_steps, num_burnin, thin, step_size,
            localization; n_beta and batch_size must be None); default LLCSettings().
        progress: called as progress(done, total) after each chunk of checkpoints.

    Returns:
        ds with ``llc``, ``llc_se``, ``llc_accept`` (n, run, checkpoint) and ``n_beta`` (n), attrs ``llc_*`` the
        settings.

    References:
        Lau et al. 2023 ("The local learning coefficient"); Chen et al. 2023 (the LLC along training).
    """
    from ..posterior.llc import LLCSettings
    from ..sampling import check_keys

    settings = LLCSettings() if settings is None else settings
    if not isinstance(settings, LLCSettings):
        raise ValueError(f"settings: expected LLCSettings, got {type(settings).__name__}")
    if settings.n_beta is not None or settings.batch_size is not None:
        raise ValueError("settings: expected n_beta = None (n / log n at each n) and batch_size = None (full batch)")
    _check_dataset(ds)
    key = jax.random.wrap_key_data(check_keys(key, batch_ndim=0))
    ns = [int(v) for v in ds["n"].values]
    if ns[0] < 2:
        raise ValueError(f"ds: n / log n needs every n >= 2, got n = {ns[0]}")
    N, R, K = ds.sizes["n"], ds.sizes["run"], ds.sizes["checkpoint"]
    W = ds["W"].transpose("n", "run", "checkpoint", "hidden", "feature").values
    b = ds["b"].transpose("n", "run", "checkpoint", "feature").values
    flat = np.concatenate([W.reshape(N, R * K, -1), b.reshape(N, R * K, -1)], axis=-1)
    x = ds["inputs"].values
    est, se, acc = (np.full((N, R * K), np.nan) for _ in range(3))
    C = settings.num_chains
    done, total = 0, N * R * K
    for i, n in enumerate(ns):
        data = sorted_inputs(x[:n])
        per_chain = sum(int(np.prod(a.shape)) for a in jax.tree.leaves(data))
        kept = len(range(settings.num_burnin, settings.num_steps, settings.thin)) * flat.shape[-1]
        chunk = max(1, min(R * K, LLC_CHUNK_ELEMENTS // (max(per_chain, kept) * C)))
        s = settings.replace(n_beta=n / math.log(n))
        k_n = jax.random.fold_in(key, i)
        keys = jax.vmap(lambda j: jax.random.key_data(jax.random.fold_in(k_n, j)))(jnp.arange(R * K))
        for lo in range(0, R * K, chunk):
            idx = np.minimum(np.arange(lo, lo + chunk), R * K - 1)        # the last chunk padded: one program
            e, s_e, a = llc_at_checkpoints(keys[idx], jnp.asarray(flat[i, idx]), data, s)
            m = min(chunk, R * K - lo)
            est[i, lo:lo + m], se[i, lo:lo + m], acc[i, lo:lo + m] = e[:m], s_e[:m], a[:m]
            done += m
            if progress is not None:
                progress(done, total)
    nrk = ("n", "run", "checkpoint")
    out = ds.assign(
        llc=(nrk, est.reshape(N, R, K), {"long_name": "lambda_hat = n beta (E[L_n] - L_n(w*)), SGLD at the checkpoint"}),
        llc_se=(nrk, se.reshape(N, R, K), {"long_name": "standard error of lambda_hat over the chains"}),
        llc_accept=(nrk, acc.reshape(N, R, K), {"long_name": "mean MALA acceptance of the SGLD proposals"}),
        n_beta=("n", np.asarray([n / math.log(n) for n in ns]), {"long_name": "n beta = n / log n"}))
    out.attrs.update({f"llc_{k}": v for k, v in dataclasses.asdict(settings).items()
                      if k in ("num_chains", "num_steps", "num_burnin", "thin", "step_size", "localization")})
    return out


def _check_dataset(ds):
    """ValueError naming ``ds`` unless it is a Dataset of :func:`~slt_relu.tms.training.train_trajectories` (W, b, inputs; n, run, checkpoint)."""
    import xarray as xr

    if not isinstance(ds, xr.Dataset) or any(v not in ds for v in ("W", "b", "inputs")) or \
            any(d not in ds.dims for d in ("n", "run", "checkpoint")):
        raise ValueError("ds: expected the xarray Dataset of train_trajectories (W, b, inputs; dims n, run, checkpoint)")


def _flat_at(ds, checkpoint: int) -> np.ndarray:
    """(N, R, 3 c) flat parameters (W row-major, then b) at one checkpoint of the Dataset."""
    W = ds["W"].isel(checkpoint=checkpoint).transpose("n", "run", "hidden", "feature").values
    b = ds["b"].isel(checkpoint=checkpoint).transpose("n", "run", "feature").values
    N, R = b.shape[:2]
    return np.concatenate([W.reshape(N, R, -1), b], axis=-1)


@jax.jit
def _hessian_eigenvalues(flat, data):
    """(B, D) eigenvalues of the Hessian of L_n (``sorted_empirical_loss``) at flat (B, D)."""
    return jax.vmap(lambda w: jnp.linalg.eigvalsh(jax.hessian(sorted_empirical_loss)(w, data)))(flat)


def quadratic_llc_at_checkpoint(ds, localization: float, step_size: float = 0.0, *, checkpoint: int = -1):
    """The SGLD estimate's expectation if L_n were its quadratic expansion at each run's checkpoint (final by default):
    :func:`quadratic_llc` of the eigenvalues of the Hessian of L_n there, with n beta = n / log n.

    Beside :func:`llc_along_training`'s estimates at a minimum of L_n it separates the estimator's bias from the
    localization gamma and the step eps (both in this number) from what is not quadratic (the singular directions,
    the kinks of the ReLU): lambda_hat - this.  At a point that is not a minimum (a negative eigenvalue) the
    expansion has no stationary distribution; the negative eigenvalues are clipped to 0 (a lower bound there).

    Args:
        ds: the Dataset of :func:`~slt_relu.tms.training.train_trajectories`.
        localization: gamma >= 0; step_size: eps >= 0 (as the SGLD estimates').
        checkpoint: the checkpoint's index along ``checkpoint`` (default the last).

    Returns:
        (N, R) numpy array over (n, run).
    """
    _check_dataset(ds)
    K = ds.sizes["checkpoint"]
    if isinstance(checkpoint, bool) or not isinstance(checkpoint, (int, np.integer)) or not -K <= checkpoint < K:
        raise ValueError(f"checkpoint: expected an index in [-{K}, {K - 1}], got {checkpoint!r}")
    ns = [int(v) for v in ds["n"].values]
    if ns[0] < 2:
        raise ValueError(f"ds: n / log n needs every n >= 2, got n = {ns[0]}")
    flat, x = _flat_at(ds, int(checkpoint)), ds["inputs"].values
    out = np.full(flat.shape[:2], np.nan)
    for i, n in enumerate(ns):
        eig = np.asarray(_hessian_eigenvalues(jnp.asarray(flat[i]), sorted_inputs(x[:n])))
        out[i] = [quadratic_llc(e, n / math.log(n), localization, step_size) for e in eig]
    return out
