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

from .._validate import check_count, check_finite, check_number
from ..models.likelihood import check_regression_data
from ..network import Restriction, TwoLayer
from ..sampling import Draws, HMCSettings, NUTSSettings, SMCSettings, check_keys, sample
from .prior import Prior
from .target import ColumnsLoss, TemperedTarget, tempered_target

__all__ = ["PosteriorSamples", "SMCPosterior", "draw_datasets", "sample_posterior", "smc_posterior"]


class PosteriorSamples(NamedTuple):
    """Samples of C chains, S kept draws each.

    Attributes:
        params: the model's parameters with leading axes (C, S) on every leaf (a TwoLayer for a two-layer
            :class:`~slt_relu.network.Restriction`).
        loss: (C, S) L_n(w) on the chain's own data set.
        dataset: (C,) data set index of each chain.
        n_beta: (C,) each chain's n beta.
        draws: the sampler's :class:`~slt_relu.sampling.Draws` (unconstrained draws and the
            sampler's statistics).
    """

    params: object
    loss: np.ndarray
    dataset: np.ndarray
    n_beta: np.ndarray
    draws: Draws


def draw_datasets(keys, truth: TwoLayer, inputs, n: int, sigma: float = 1.0):
    """One data set per key: x (K, n, n_in) ~ q(x), y = f0(x) + sigma eps (K, n).

    Args:
        keys: (K, 2) PRNG keys, one per data set.
        truth: the true TwoLayer f0.
        inputs: the input distribution q(x) (UniformBox, Gaussian).
        n: data points per set, >= 1.
        sigma: the noise standard deviation, >= 0.

    Returns:
        (x (K, n, n_in), y (K, n)).
    """
    n = check_count(n, "n")
    check_number(sigma, "sigma", what="noise standard deviation", nonnegative=True)
    return _draw_datasets(check_keys(keys), truth, inputs, n, float(sigma))


@partial(jax.jit, static_argnums=(2, 3, 4))
def _draw_datasets(keys, truth, inputs, n, sigma):
    from ..loss import sample_dataset

    return jax.vmap(lambda k: sample_dataset(k, truth, inputs, n, sigma))(keys)


@partial(jax.jit, static_argnums=(1, 2, 3, 4, 5))
def _starting_points(keys, target: TemperedTarget, size: int, num_particles, dtype, init_radius):
    """Each chain's start (C, k), uniform on [-init_radius, init_radius]^k, or SMC's num_particles draws of the
    prior (C, N, k), and each chain's key for the run (C, 2); one program (op by op, each op would compile)."""
    k_init, k_run = jnp.swapaxes(jax.vmap(jax.random.split)(keys), 0, 1)
    if num_particles is None:
        z0 = jax.vmap(lambda k: jax.random.uniform(k, (size,), dtype, -init_radius, init_radius))(k_init)
    else:
        draw = lambda k: target.prior_draw(k, dtype)
        z0 = jax.vmap(lambda k: jax.vmap(draw)(jax.random.split(k, num_particles)))(k_init)
    return z0, k_run


@partial(jax.jit, static_argnums=(0,))
def _draw_params(target: TemperedTarget, z):
    """The draws z (C, S, D) as the model's parameters, leaves (C, S, ...)."""
    return jax.vmap(jax.vmap(lambda zi: target.unravel(target.constrain(zi))))(z)


@partial(jax.jit, static_argnums=(0,))
def _chain_losses(target: TemperedTarget, z, data):
    """L of every draw on its chain's data: z (C, S, D), data leaves (C, ...) -> (C, S)."""
    def per_chain(zc, dc):
        return jax.lax.map(lambda zi: target.loss(target.unravel(target.constrain(zi)), dc), zc, batch_size=64)
    return jax.vmap(per_chain)(z, data)


def _posterior_setup(model, prior, sigma, x, y):
    """(the target, each data set's data with a leading axis K) of a model and K data sets, checked."""
    if not isinstance(prior, Prior):
        raise TypeError(f"prior: expected a slt_relu.Prior, got {type(prior).__name__}")
    target = tempered_target(model, prior, sigma)
    x, y = jnp.asarray(x), jnp.asarray(y)
    if isinstance(model, Restriction):
        n_in = model.base.n_in
        if x.ndim == 3 and x.shape[2] != n_in:
            raise ValueError(f"x: expected n_in = {n_in} like the model's parameters, got x of shape {x.shape}")
        if x.ndim != 3 or y.shape != x.shape[:2]:
            raise ValueError(f"x, y: expected shapes (K, n, {n_in}) and (K, n), got {x.shape} and {y.shape}")
        target = target._replace(loss=ColumnsLoss(float(sigma)))      # the columns' form, fast with many chains
        data = (jnp.swapaxes(x, 1, 2), y)
    else:
        if x.ndim < 2 or y.ndim < 2 or y.shape[:2] != x.shape[:2]:
            raise ValueError(f"x, y: expected K data sets, shapes (K, n, ...) and (K, n) or (K, n, n_out), got "
                             f"{x.shape} and {y.shape}")
        if x.shape[0] and x.shape[1]:
            check_regression_data(model, model.unravel(jnp.zeros(model.num_params, x.dtype)), x[0], y[0], "x[0]",
                                  "y[0]")
        data = (x, y)
    if y.shape[0] < 1 or y.shape[1] < 1:
        raise ValueError(f"x: expected at least one data set of at least one point (K, n >= 1), got shape {x.shape}")
    check_finite(x, "x")
    check_finite(y, "y")
    return target, data


def sample_posterior(keys, x, y, n_beta, *, model, prior: Prior = Prior(), sigma: float = 1.0,
                     settings=None, chains_per_dataset: int = 1, init_radius: float = 2.0, devices=None,
                     progress=None) -> PosteriorSamples:
    """Sample p(w | D_n) for K data sets, ``chains_per_dataset`` chains each, in one program.

        p(w | D_n) proportional to phi(w) exp(-n_beta L_n(w))

    on the tempered target of the model (:class:`~slt_relu.posterior.target.TemperedTarget`).  MCMC chains
    start uniformly in [-init_radius, init_radius] in the unconstrained coordinates (numpyro's
    ``init_to_uniform``).

    Args:
        keys: (K * chains_per_dataset, 2), one PRNG key per chain (chain c samples data set
            c // chains_per_dataset).
        x: (K, n, n_in), finite, K, n >= 1.
        y: (K, n) (or (K, n, n_out) for a model with several outputs), finite.
        n_beta: (K,) or a scalar, positive and finite (n * beta of each data set).
        model: a :class:`~slt_relu.models.Model` (every parameter sampled; L_n its
            :class:`~slt_relu.models.GaussianLoss`) or a two-layer :class:`~slt_relu.network.Restriction` (its
            free coordinates sampled, the others at its base).
        prior: the :class:`~slt_relu.posterior.prior.Prior` phi(w) (its groups: the model's parameter groups).
        sigma: the noise standard deviation of L_n, > 0.
        settings: a sampler's settings (:class:`~slt_relu.sampling.NUTSSettings` by default,
            :class:`~slt_relu.sampling.HMCSettings`, or :class:`~slt_relu.sampling.SMCSettings`:
            then each "chain" is an SMC run whose draws are its particles, started from the prior);
            ``symmetry_moves`` (a Restriction only) are :class:`~slt_relu.moves.OrientationFlip`.
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
    target, data = _posterior_setup(model, prior, sigma, x, y)
    K = data[1].shape[0]
    chains_per_dataset = check_count(chains_per_dataset, "chains_per_dataset")
    check_number(init_radius, "init_radius")
    C = K * chains_per_dataset
    keys = check_keys(keys)
    if keys.shape[0] != C:
        raise ValueError(f"keys: expected {C} keys (data sets x chains_per_dataset), got shape {keys.shape}")
    check_number(n_beta, "n_beta")
    if np.ndim(n_beta) > 1 or np.size(n_beta) not in (1, K):
        raise ValueError(f"n_beta: expected a scalar or shape ({K},) (one per data set), got shape {np.shape(n_beta)}")
    dtype = jnp.result_type(data[1].dtype, float)
    n_beta = jnp.broadcast_to(jnp.asarray(n_beta, dtype), (K,))
    dataset = np.repeat(np.arange(K), chains_per_dataset)
    chain_data = jax.tree.map(lambda a: a[dataset], data)
    n_beta_chain = n_beta[dataset]
    symmetry_moves = getattr(settings, "symmetry_moves", False)
    if symmetry_moves and not isinstance(model, Restriction):
        raise ValueError("settings.symmetry_moves: the orientation flip is a move of two-layer posteriors (a "
                         f"Restriction), not of {model.name!r}")
    N = settings.num_particles if isinstance(settings, SMCSettings) else None      # SMC: particles from the prior
    z0, k_run = _starting_points(keys, target, target.size, N, dtype, float(init_radius))
    moves = OrientationFlip(target) if symmetry_moves else None
    out = sample(k_run, target, z0, (chain_data, n_beta_chain), settings, moves=moves, devices=devices,
                 progress=progress)
    z = jnp.asarray(out.z)
    loss = _chain_losses(target, z, chain_data)
    params = jax.tree.map(np.asarray, _draw_params(target, z))
    return PosteriorSamples(params, np.asarray(loss), dataset, np.asarray(n_beta_chain), out)


class SMCPosterior(NamedTuple):
    """K tempered SMC runs (one per data set given), N particles each, equally weighted.

        log Z = log int phi(w) exp(-n_beta L_n(w)) dw

    (L_n with its log(sigma sqrt(2 pi)) term; docs/design.md.)

    Attributes:
        params: the model's parameters with leading axes (K, N) (a TwoLayer for a Restriction).
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

    params: object
    loss: np.ndarray
    log_evidence: np.ndarray
    schedule: np.ndarray
    ess: np.ndarray
    accept_prob: np.ndarray
    num_stages: np.ndarray
    draws: Draws
    n_beta: np.ndarray


def smc_posterior(keys, x, y, n_beta, *, model, prior: Prior = Prior(), sigma: float = 1.0,
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
        model: a :class:`~slt_relu.models.Model` or a two-layer Restriction (as :func:`sample_posterior`).
        prior: the :class:`~slt_relu.posterior.prior.Prior` phi(w).
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
    info = ps.draws.info
    return SMCPosterior(ps.params, ps.loss, ps.draws.log_evidence, info.lambda_, info.ess, info.accept_prob,
                        info.num_stages, ps.draws, ps.n_beta)


# ----------------------------------------------------------------------------------------
# exact posteriors of one- and two-parameter models
