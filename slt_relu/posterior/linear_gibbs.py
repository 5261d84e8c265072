"""The tempered posterior of a deep linear network by exact blocked Gibbs sampling, and its estimand curve.

A deep linear network y = W_L ... W_1 x (widths H_0, ..., H_L; reduced-rank regression is L = 2) under
the prior N(0, sigma^2 I) on every weight, with the loss of a data set's sufficient statistics
(``slt_relu.known_lambda.losses.RegressionLoss``: S = X^T X / n, G = E^T X / n, the truth P0),

    L(W) = tr(D S D^T) / 2 - tr(D G^T),    D = W_L ... W_1 - P0

(the population loss K = |D|_F^2 / 2 is S = I, G = 0), is quadratic in each layer given the others.  With
A = W_L ... W_(l+1) and B = W_(l-1) ... W_1 (identities where empty),

    L = <W_l, N W_l M> / 2 - <W_l, R> + const,   N = A^T A,  M = B S B^T,  R = A^T (P0 S + G) B^T,

so the conditional of W_l under p_t(W) proportional to phi(W) exp(-t L(W)) is Gaussian with precision
t (M kron N) + I / sigma^2.  In the eigenbases N = U diag(a) U^T and M = V diag(b) V^T it is diagonal:
W~ = U^T W_l V has independent entries of precision q_ij = t a_i b_j + 1 / sigma^2 and mean
t (U^T R V)_ij / q_ij.  A sweep draws W_1, ..., W_L in turn from their exact conditionals (blocked
Gibbs, as in Bayesian matrix factorisation: Salakhutdinov and Mnih 2008), at a cost of two symmetric
eigendecompositions of at most max(H) x max(H) per layer: no step size, no gradient, no rejection, so
networks of 10^4 to 10^5 parameters sample on a CPU where a gradient sampler's trajectories grow with
the posterior's conditioning (measured: ``docs/experiments/known_lambda_large.md``).

:func:`linear_gibbs_curve` runs R chains through G log-spaced inverse temperatures over the window's
last ``decades`` decades up to t_max, in increasing order (each temperature's chain starts from the
previous one's state, the first from a prior draw): ``burn_in`` sweeps, then the mean of L over
``sweeps`` sweeps.  Run r of the curve is chain r, so the runs' spread at each t is the standard error
of t E_t[L], read by ``fit_learning_coefficient(curve, "tempered_loss")`` as NUTS's estimand curve is
(``slt_relu.posterior.estimand_curve``); a data case's chain r uses run r's data set.  t is at most
MAX_T = 1e14: in a flat direction (a_i b_j = 0) the mean's numerator is t times a rounding error of about
eps |A| |P0|, which past that t moves the chain (docs/experiments/known_lambda_suite.md).
"""
from __future__ import annotations

import math

import numpy as np

from .learning_coefficient import TemperedCurve

__all__ = ["gibbs_sweep", "layer_conditional", "linear_gibbs_curve", "linear_loss"]

MAX_WIDTH = 256              # each conditional's eigendecompositions are of at most MAX_WIDTH x MAX_WIDTH
MAX_T = 1e14                 # a conditional's mean is t times a product whose rounding error in a flat direction is
                             # about eps |A| |P0|: past t = 1e14 (float64's eps = 2.2e-16) rounding sets it


def _partial_products(Ws, lo: int, hi: int, eye):
    """W_(hi-1) ... W_lo, ``eye`` (the identity of width H_lo) where empty."""
    out = eye
    for W in Ws[lo:hi]:
        out = W @ out
    return out


def layer_conditional(Ws, l: int, t, stats, prior_std: float):
    """The Gaussian conditional of layer l (0-based: W_(l+1) in the module docstring) given the others, in the
    eigenbases of N and M: (U (H_(l+1), H_(l+1)), V (H_l, H_l), mean~ (H_(l+1), H_l), precision~ (H_(l+1), H_l)),
    so that W_l = U (mean~ + noise / sqrt(precision~)) V^T with standard normal noise.

    Args:
        Ws: the layers' matrices, W_l (H_(l+1), H_l).
        l: the layer drawn.
        t: the inverse temperature, >= 0.
        stats: (S (H_0, H_0), G (H_L, H_0), P0 (H_L, H_0)).
        prior_std: sigma.
    """
    import jax.numpy as jnp

    S, G, P0 = stats
    L = len(Ws)
    A = _partial_products(Ws, l + 1, L, jnp.eye(Ws[l].shape[0], dtype=S.dtype))
    B = _partial_products(Ws, 0, l, jnp.eye(S.shape[0], dtype=S.dtype))
    a, U = jnp.linalg.eigh(A.T @ A)
    b, V = jnp.linalg.eigh(B @ S @ B.T)
    precision = t * jnp.clip(a, 0)[:, None] * jnp.clip(b, 0)[None, :] + 1.0 / prior_std ** 2
    mean = t * (U.T @ (A.T @ (P0 @ S + G) @ B.T) @ V) / precision
    return U, V, mean, precision


def linear_loss(Ws, stats):
    """L(W) = tr(D S D^T) / 2 - tr(D G^T), D = W_L ... W_1 - P0 (module docstring)."""
    import jax.numpy as jnp

    S, G, P0 = stats
    D = _partial_products(Ws, 0, len(Ws), jnp.eye(S.shape[0], dtype=S.dtype)) - P0
    return 0.5 * jnp.sum((D @ S) * D) - jnp.sum(D * G)


def gibbs_sweep(key, Ws, t, stats, prior_std: float):
    """One sweep: W_1, ..., W_L in turn from their exact conditionals (:func:`layer_conditional`)."""
    import jax
    import jax.numpy as jnp

    Ws = list(Ws)
    for l, k in enumerate(jax.random.split(key, len(Ws))):
        U, V, mean, precision = layer_conditional(Ws, l, t, stats, prior_std)
        Ws[l] = U @ (mean + jax.random.normal(k, mean.shape, mean.dtype) / jnp.sqrt(precision)) @ V.T
    return tuple(Ws)


def linear_gibbs_curve(key, widths, t_max: float, *, decades: float = 3.0, temperatures: int = 8, chains: int = 8,
                       burn_in: int = 200, sweeps: int = 200, prior_std: float = 1.0, target=None,
                       run_data=None) -> TemperedCurve:
    """t E_t[L] of a deep linear network by exact blocked Gibbs sampling at ``temperatures`` log-spaced t over the
    last ``decades`` decades up to t_max, ``chains`` chains (module docstring).

    Args:
        key: a PRNG key.
        widths: (H_0, ..., H_L), L >= 1 layers, each width in 1 .. MAX_WIDTH.
        t_max: the largest inverse temperature, in (1, MAX_T = 1e14].
        decades: the window's width, 0 < decades < log10(t_max) (every t > 1).
        temperatures: G >= 2.
        chains: R >= 2 (the curve's runs).
        burn_in: sweeps at each temperature before the kept ones, >= 0.
        sweeps: kept sweeps at each temperature, >= 1.
        prior_std: sigma > 0.
        target: P0 (H_L, H_0) for the population loss K = |W_L ... W_1 - P0|_F^2 / 2 (default zero), or
        run_data: (S (R, H_0, H_0), G (R, H_L, H_0), P0 (R, H_L, H_0)), chain r's data set's statistics
            (``slt_relu.known_lambda.losses.regression_statistics``); not with ``target``.

    Returns:
        :class:`TemperedCurve` with ``t`` (R, G), ``mean_loss`` (R, G) each chain's mean L over its kept
        sweeps, ``free_energy`` and ``prior_mean_loss`` NaN, ``grad_evals`` 0 (no gradients), no particles.
    """
    import jax
    import jax.numpy as jnp

    from ..network import check_count, check_finite, check_number

    if (isinstance(widths, (str, bytes)) or not hasattr(widths, "__len__") or len(widths) < 2
            or not all(isinstance(h, (int, np.integer)) and not isinstance(h, bool) and 1 <= h <= MAX_WIDTH
                       for h in widths)):
        raise ValueError(f"widths: expected (H_0, ..., H_L), L >= 1, integers in 1 .. {MAX_WIDTH}, got {widths!r}")
    widths = tuple(int(h) for h in widths)
    t_max = float(check_number(t_max, "t_max"))
    if t_max > MAX_T:
        raise ValueError(f"t_max: expected at most {MAX_T:g} (beyond it float64's rounding, times t, sets the "
                         f"conditionals' means in the flat directions), got {t_max:g}")
    top = math.log10(max(t_max, 1.0))
    if isinstance(decades, bool) or not isinstance(decades, (int, float)) or not 0 < decades < top:
        raise ValueError(f"decades: expected a number in (0, log10(t_max) = {top:.3g}) "
                         f"(every temperature above 1), got {decades!r}")
    temperatures = check_count(temperatures, "temperatures", 2)
    chains = check_count(chains, "chains", 2)
    sweeps = check_count(sweeps, "sweeps")
    if isinstance(burn_in, bool) or not isinstance(burn_in, (int, np.integer)) or burn_in < 0:
        raise ValueError(f"burn_in: expected a non-negative integer, got {burn_in!r}")
    prior_std = float(check_number(prior_std, "prior_std"))
    dtype = jnp.zeros(()).dtype
    a, b = widths[0], widths[-1]
    if run_data is not None:
        if target is not None:
            raise ValueError("target, run_data: expected one of them (run_data holds each data set's P0), got both")
        S, G, P0 = (jnp.asarray(x, dtype) for x in run_data)
        if S.shape != (chains, a, a) or G.shape != (chains, b, a) or P0.shape != (chains, b, a):
            raise ValueError(f"run_data: expected S ({chains}, {a}, {a}), G and P0 ({chains}, {b}, {a}) (one data set "
                             f"per chain), got {S.shape}, {G.shape}, {P0.shape}")
    else:
        P0 = jnp.zeros((b, a), dtype) if target is None else jnp.asarray(target, dtype)
        if P0.shape != (b, a):
            raise ValueError(f"target: expected shape ({b}, {a}) (H_L, H_0), got {P0.shape}")
        S, G, P0 = (jnp.broadcast_to(x, (chains,) + x.shape) for x in (jnp.eye(a, dtype=dtype), jnp.zeros_like(P0), P0))
    for name, x in zip(("S", "G", "P0"), (S, G, P0)):
        check_finite(x, name)
    t = np.logspace(math.log10(t_max) - decades, math.log10(t_max), temperatures)

    def chain(k, stats):
        k0, k1 = jax.random.split(k)
        Ws = tuple(prior_std * jax.random.normal(kl, (h1, h0), dtype)
                   for kl, h0, h1 in zip(jax.random.split(k0, len(widths) - 1), widths[:-1], widths[1:]))

        def at_temperature(Ws, tk):
            tg, kg = tk

            def step(W, ks):
                W = gibbs_sweep(ks, W, tg, stats, prior_std)
                return W, linear_loss(W, stats)

            k_burn, k_kept = jax.random.split(kg)
            Ws, _ = jax.lax.scan(step, Ws, jax.random.split(k_burn, max(burn_in, 1))[:burn_in])
            Ws, kept = jax.lax.scan(step, Ws, jax.random.split(k_kept, sweeps))
            return Ws, jnp.mean(kept)

        return jax.lax.scan(at_temperature, Ws, (jnp.asarray(t, dtype), jax.random.split(k1, temperatures)))[1]

    # the chains one after another (lax.map): vmapped, XLA's CPU runtime (jax 0.10.2) deadlocked on widths of 50
    # with 3 or 8 chains, and a batch of small eigendecompositions gains little on a CPU
    run_chains = jax.jit(lambda keys, data: jax.lax.map(lambda a: chain(*a), (keys, data)))
    mean_loss = np.asarray(run_chains(jax.random.split(key, chains), (S, G, P0)), np.float64)
    nan = np.full(mean_loss.shape, np.nan)
    return TemperedCurve(np.broadcast_to(t, mean_loss.shape).copy(), nan, mean_loss, np.full(chains, np.nan), 0)
