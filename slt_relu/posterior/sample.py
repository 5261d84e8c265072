"""Sampling a tempered posterior: many chains at once, each with its own data set (DSLT4's trials) or
several chains per data set, through :func:`slt_relu.sampling.sample` (vmapped, sharded over devices;
NUTS, HMC or SMC by the settings given), and the draws mapped back to parameters with L_n at each.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..loss import empirical_loss_columns
from ..network import Restriction, TwoLayer, check_count, check_finite, check_number, from_flat
from ..sampling import Draws, HMCSettings, NUTSSettings, SMCSettings, check_keys, sample
from .target import Prior, target

class PosteriorSamples(NamedTuple):
    """Samples of C chains, S kept draws each.

    Attributes:
        params: TwoLayer whose leaves carry leading axes (C, S).
        loss: (C, S) L_n(w) on the chain's own data set.
        dataset: (C,) data set index of each chain.
        n_beta: (C,) each chain's n beta.
        draws: the sampler's :class:`~slt_relu.sampling.Draws` (unconstrained draws and the
            sampler's statistics).
    """

    params: TwoLayer
    loss: np.ndarray
    dataset: np.ndarray
    n_beta: np.ndarray
    draws: Draws


def draw_datasets(keys, truth: TwoLayer, inputs, n: int, sigma: float = 1.0):
    """One data set per key: x (K, n, n_in) ~ q(x), y = f0(x) + sigma eps (K, n)."""
    n = check_count(n, "n")
    check_number(sigma, "sigma", what="noise standard deviation", nonnegative=True)
    return _draw_datasets(check_keys(keys), truth, inputs, n, float(sigma))


@partial(jax.jit, static_argnums=(2, 3, 4))
def _draw_datasets(keys, truth, inputs, n, sigma):
    from ..loss import sample_dataset

    return jax.vmap(lambda k: sample_dataset(k, truth, inputs, n, sigma))(keys)


@partial(jax.jit, static_argnums=(1, 2, 3, 4))
def _starting_points(keys, prior_draw, size: int, num_particles, dtype, init_radius):
    """Each chain's start (C, k), uniform on [-init_radius, init_radius]^k, or SMC's num_particles draws of the
    prior (C, N, k), and each chain's key for the run (C, 2); one program (op by op, each op would compile)."""
    k_init, k_run = jnp.swapaxes(jax.vmap(jax.random.split)(keys), 0, 1)
    if num_particles is None:
        z0 = jax.vmap(lambda k: jax.random.uniform(k, (size,), dtype, -init_radius, init_radius))(k_init)
    else:
        z0 = jax.vmap(lambda k: jax.vmap(prior_draw)(jax.random.split(k, num_particles)))(k_init)
    return z0, k_run


@partial(jax.jit, static_argnums=(0, 1, 2))
def _constrained_flat(constrain, model: Restriction, dtype, z):
    """The draws z (C, S, k) as full flat parameters (C, S, D) of the data's dtype."""
    return jax.vmap(jax.vmap(lambda zi: model.embed_flat(constrain(zi).astype(dtype))))(z)


@partial(jax.jit, static_argnums=(1, 2))
def _as_params(flat, width: int, n_in: int) -> TwoLayer:
    return jax.vmap(jax.vmap(lambda f: from_flat(f, width, n_in)))(flat)


@partial(jax.jit, static_argnums=(3, 4, 5))
def _losses(flat, x_cols, y, width: int, n_in: int, sigma: float):
    """L_n of every draw on its chain's data: flat (C, S, D), x_cols (C, n_in, n), y (C, n) -> (C, S)."""
    def per_chain(thetas, xc, yc):
        return jax.lax.map(lambda th: empirical_loss_columns(from_flat(th, width, n_in), xc, yc, sigma), thetas,
                           batch_size=64)
    return jax.vmap(per_chain)(flat, x_cols, y)


def sample_posterior(keys, x, y, n_beta, *, model: Restriction, prior: Prior = Prior(), sigma: float = 1.0,
                     settings=None, chains_per_dataset: int = 1, init_radius: float = 2.0, devices=None,
                     progress=None) -> PosteriorSamples:
    """Sample p(w | D_n) for K data sets, ``chains_per_dataset`` chains each, in one program.

        p(w | D_n) proportional to phi(w) exp(-n_beta L_n(w))

    MCMC chains start uniformly in [-init_radius, init_radius] in unconstrained coordinates
    (numpyro's ``init_to_uniform``).

    Args:
        keys: (K * chains_per_dataset, 2), one PRNG key per chain (chain c samples data set
            c // chains_per_dataset).
        x: (K, n, n_in), finite, K, n >= 1.
        y: (K, n), finite.
        n_beta: (K,) or a scalar, positive and finite (n * beta of each data set).
        model: Restriction, the model: its free coordinates are sampled, the others stay at its base.
        prior: Prior phi(w) of the free coordinates.
        sigma: the noise standard deviation of L_n, > 0.
        settings: a sampler's settings (:class:`~slt_relu.sampling.NUTSSettings` by default,
            :class:`~slt_relu.sampling.HMCSettings`, or :class:`~slt_relu.sampling.SMCSettings`:
            then each "chain" is an SMC run whose draws are its particles, started from the prior);
            any sampler's ``symmetry_moves`` are :class:`~slt_relu.moves.OrientationFlip`.
        chains_per_dataset: chains per data set, >= 1.
        init_radius: > 0, the half width of the MCMC chains' initial box.
        devices: see :func:`slt_relu.sampling.sample`.
        progress: see :func:`slt_relu.sampling.sample`.

    Returns:
        PosteriorSamples: params (C, S, ...), loss (C, S), dataset (C,), n_beta (C,), draws, with
        C = K * chains_per_dataset.

    References:
        DSLT4 (one data set per trial).
    """
    from ..moves import OrientationFlip

    settings = NUTSSettings() if settings is None else settings
    if type(settings) not in (NUTSSettings, HMCSettings, SMCSettings):
        raise TypeError(f"settings: expected NUTSSettings, HMCSettings or SMCSettings, got {type(settings).__name__}")
    tg = target(model, prior, sigma)
    x = jnp.asarray(x)
    y = jnp.asarray(y)
    if x.ndim == 3 and x.shape[2] != model.base.n_in:
        raise ValueError(f"x: expected n_in = {model.base.n_in} like the model's parameters, got x of shape {x.shape}")
    if x.ndim != 3 or y.shape != x.shape[:2]:
        raise ValueError(f"x, y: expected shapes (K, n, {model.base.n_in}) and (K, n), got {x.shape} and {y.shape}")
    K, n = y.shape
    if K < 1 or n < 1:
        raise ValueError(f"x: expected at least one data set of at least one point (K, n >= 1), got shape {x.shape}")
    check_finite(x, "x")
    check_finite(y, "y")
    chains_per_dataset = check_count(chains_per_dataset, "chains_per_dataset")
    check_number(init_radius, "init_radius")
    C = K * chains_per_dataset
    keys = check_keys(keys)
    if keys.shape[0] != C:
        raise ValueError(f"keys: expected {C} keys (data sets x chains_per_dataset), got shape {keys.shape}")
    check_number(n_beta, "n_beta")
    if np.ndim(n_beta) > 1 or np.size(n_beta) not in (1, K):
        raise ValueError(f"n_beta: expected a scalar or shape ({K},) (one per data set), got shape {np.shape(n_beta)}")
    n_beta = jnp.broadcast_to(jnp.asarray(n_beta, x.dtype), (K,))
    dataset = np.repeat(np.arange(K), chains_per_dataset)
    x_cols = jnp.swapaxes(x, 1, 2)[dataset]
    yc = y[dataset]
    n_beta_chain = n_beta[dataset]
    N = settings.num_particles if isinstance(settings, SMCSettings) else None      # SMC: particles from the prior
    z0, k_run = _starting_points(keys, tg.prior_draw, tg.size, N, x.dtype, init_radius)
    moves = OrientationFlip(tg.potential) if getattr(settings, "symmetry_moves", False) else None
    out = sample(k_run, tg.potential, z0, (x_cols, yc, n_beta_chain), settings, moves=moves, devices=devices,
                 progress=progress)
    flat = _constrained_flat(tg.constrain, model, x.dtype, jnp.asarray(out.z))          # (C, S, D)
    width, n_in = model.base.width, model.base.n_in
    loss = _losses(flat, x_cols, yc, width, n_in, float(sigma))
    params = jax.tree.map(np.asarray, _as_params(flat, width, n_in))
    return PosteriorSamples(params, np.asarray(loss), dataset, np.asarray(n_beta_chain), out)


class SMCPosterior(NamedTuple):
    """K tempered SMC runs (one per data set given), N particles each, equally weighted.

        log Z = log int phi(w) exp(-n_beta L_n(w)) dw

    (L_n with its log(sigma sqrt(2 pi)) term; docs/design.md.)

    Attributes:
        params: TwoLayer with leading axes (K, N).
        loss: (K, N) L_n of each particle on its run's data.
        log_evidence: (K,) log Z.
        schedule: (K, M) the tempering lambda after each stage (M = settings.max_stages; stages
            beyond num_stages are 0).
        ess: (K, M) the incremental weights' ESS fraction at each stage.
        accept_prob: (K, M) the moves' mean acceptance at each stage.
        num_stages: (K,).
        draws: the sampler's :class:`~slt_relu.sampling.Draws`.
        n_beta: (K,) each run's n beta.
    """

    params: TwoLayer
    loss: np.ndarray
    log_evidence: np.ndarray
    schedule: np.ndarray
    ess: np.ndarray
    accept_prob: np.ndarray
    num_stages: np.ndarray
    draws: Draws
    n_beta: np.ndarray


def smc_posterior(keys, x, y, n_beta, *, model: Restriction, prior: Prior = Prior(), sigma: float = 1.0,
                  settings=None, devices=None) -> SMCPosterior:
    """Adaptive tempered SMC (``slt_relu.sampling.smc``) of the tempered posterior, one run per key.

        p(w | D_n) proportional to phi(w) exp(-n_beta L_n(w))

    Run k is on data set k; particles start from the prior.

    Args:
        keys: (K, 2), one PRNG key per run.
        x: (K, n, n_in) (pass one data set several times for independent runs on it: their spread
            is the Monte Carlo error).
        y: (K, n).
        n_beta: (K,) or a scalar.
        model: Restriction, the model: its free coordinates are sampled, the others stay at its base.
        prior: Prior phi(w) of the free coordinates.
        sigma: the noise standard deviation of L_n, > 0.
        settings: :class:`~slt_relu.sampling.SMCSettings` (default ``SMCSettings()``).
        devices: see :func:`slt_relu.sampling.sample`.

    Returns:
        SMCPosterior: params (K, N, ...), log_evidence (K,), the tempering schedule and its
        diagnostics.

    References:
        Del Moral, Doucet & Jasra 2006; Jasra et al. 2011 (the adaptive schedule).
    """

    settings = SMCSettings() if settings is None else settings
    if not isinstance(settings, SMCSettings):
        raise TypeError(f"settings: expected SMCSettings, got {type(settings).__name__}")
    ps = sample_posterior(keys, x, y, n_beta, model=model, prior=prior, sigma=sigma, settings=settings,
                          devices=devices)
    st = ps.draws.stats
    return SMCPosterior(ps.params, ps.loss, ps.draws.log_evidence, st["lambda"], st["ess"], st["accept_prob"],
                        st["num_stages"], ps.draws, ps.n_beta)


# ----------------------------------------------------------------------------------------
# exact posteriors of one- and two-parameter models
