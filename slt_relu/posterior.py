"""Tempered Bayesian posteriors of two-layer ReLU networks with numpyro (DSLT3, DSLT4).

    p(w | D_n)  proportional to  phi(w) exp(-n beta L_n(w)),
    L_n(w) = (1/n) sum_k (y_k - f(x_k, w))^2 / (2 sigma^2) + log(sigma sqrt(2 pi)),

beta = 1 is the Bayes posterior, beta = 1/log n ("wbic") Watanabe's WBIC temperature, which
DSLT4 (Carroll, "Phase transitions in neural networks") uses.  The prior phi is a product over
parameter groups w, b, q, c of N(0, s^2) or uniform on [-a, a] (:class:`Prior`); a
:class:`~slt_relu.network.Restriction` samples only its free coordinates (DSLT3's Examples 3.2
and 3.4).

:func:`posterior_model` is the numpyro model; :func:`sample_posterior` runs many chains of it
at once, each chain with its own data set (DSLT4's trials) or several chains per data set,
through :func:`slt_relu.sampling.sample` (vmapped, sharded over devices; any sampler whose
settings it is given).  :func:`grid_posterior` is the exact posterior of a model with one or
two free parameters, by quadrature on a grid, to check samplers against.  Phase masses and
their analysis are in ``slt_relu.analysis``.
"""
from __future__ import annotations

import math
from functools import lru_cache, partial
from typing import Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .loss import check_sigma, empirical_loss_columns
from .network import Restriction, TwoLayer, check_count, check_finite, check_number, from_flat
from .sampling import Draws, HMCSettings, NUTSSettings, SMCSettings, check_keys, sample

GROUPS = ("w", "b", "q", "c")
PRIOR_KINDS = ("normal", "uniform")


def resolve_beta(beta, n: int) -> float:
    """beta as a number: "wbic" -> 1 / log n (Watanabe); a positive number stays."""
    if isinstance(beta, str):
        if beta != "wbic":
            raise ValueError(f"beta: expected a positive number or 'wbic', got {beta!r}")
        if n < 2:
            raise ValueError(f"n: 'wbic' needs n >= 2 (beta = 1/log n), got {n}")
        return 1.0 / math.log(n)
    if isinstance(beta, bool) or not (isinstance(beta, (int, float)) and beta > 0 and math.isfinite(beta)):
        raise ValueError(f"beta: expected a positive number or 'wbic', got {beta!r}")
    return float(beta)


class Prior(NamedTuple):
    """phi(w): per parameter group, ("normal", s) for N(0, s^2) or ("uniform", a) for U[-a, a]."""

    w: tuple = ("normal", 1.0)
    b: tuple = ("normal", 1.0)
    q: tuple = ("normal", 1.0)
    c: tuple = ("normal", 1.0)

    def check(self) -> "Prior":
        for g in GROUPS:
            spec = getattr(self, g)
            if not (isinstance(spec, tuple) and len(spec) == 2 and spec[0] in PRIOR_KINDS
                    and isinstance(spec[1], (int, float)) and math.isfinite(spec[1]) and spec[1] > 0):
                raise ValueError(f"prior.{g}: expected (kind, scale) with kind in {PRIOR_KINDS} and a finite "
                                 f"scale > 0, got {spec!r}")
        return self

    def distribution(self, group: str, size: int):
        import numpyro.distributions as dist

        kind, scale = getattr(self, group)
        base = dist.Normal(0.0, scale) if kind == "normal" else dist.Uniform(-scale, scale)
        return base.expand([size]).to_event(1)


def _free_groups(model: Restriction) -> list[tuple[str, np.ndarray]]:
    """(group, free flat indices) for each group with a free coordinate, in flat order."""
    d, n_in = model.base.width, model.base.n_in
    bounds = {"w": (0, d * n_in), "b": (d * n_in, d * (n_in + 1)), "q": (d * (n_in + 1), d * (n_in + 2)),
              "c": (d * (n_in + 2), d * (n_in + 2) + 1)}
    free = np.flatnonzero(model.free)
    out = []
    for g in GROUPS:
        lo, hi = bounds[g]
        idx = free[(free >= lo) & (free < hi)]
        if idx.size:
            out.append((g, idx))
    return out


def posterior_model(x_cols, y, n_beta, *, model: Restriction, prior: Prior = Prior(), sigma: float = 1.0):
    """The numpyro model of p(w | D_n) proportional to phi(w) exp(-n_beta L_n(w)).

    x_cols: (n_in, n) inputs as columns; y: (n,); n_beta: n * beta.  Sample sites "w", "b",
    "q", "c" hold the free coordinates of each group (flat order), the rest stay at
    ``model.base``; the tempered likelihood is the factor "tempered_likelihood".
    """
    import numpyro

    pieces = [numpyro.sample(g, prior.distribution(g, idx.size)) for g, idx in _free_groups(model)]
    params = from_flat(model.embed_flat(jnp.concatenate(pieces).astype(x_cols.dtype)), model.base.width,
                       model.base.n_in)
    numpyro.factor("tempered_likelihood", -n_beta * empirical_loss_columns(params, x_cols, y, sigma))


class Target(NamedTuple):
    """The pieces of one posterior family (one model, prior, sigma; any data): ``potential``, a
    hashable potential_gen(x_cols, y, n_beta) -> U(z) on flat unconstrained z (k,) for
    :func:`slt_relu.sampling.sample`; ``constrain(z)`` -> the free coordinates (k,); size k;
    ``prior_draw(key)`` -> z (k,) distributed as the prior (SMC's starting particles)."""

    potential: Callable
    constrain: Callable
    size: int
    prior_draw: Callable


class PosteriorPotential(NamedTuple):
    """U(z) = -log phi(constrain(z)) - log|det J| + n_beta L_n, numpyro's potential of
    :func:`posterior_model`, from a chain's (x_cols, y, n_beta); hashable by value."""

    model: Restriction
    prior: Prior
    sigma: float
    dtype: str

    def __call__(self, x_cols, y, n_beta):
        return _numpyro_pieces(self).potential_fn(x_cols, y, n_beta)


@lru_cache(maxsize=32)
def _numpyro_pieces(key: PosteriorPotential):
    """numpyro's initialize_model for the family (traced once per family; bounded cache of values)."""
    from jax.flatten_util import ravel_pytree
    from numpyro.infer.util import initialize_model

    dtype = jnp.dtype(key.dtype)
    fn = partial(posterior_model, model=key.model, prior=key.prior, sigma=key.sigma)
    dummy = (jnp.zeros((key.model.base.n_in, 2), dtype), jnp.zeros(2, dtype), jnp.asarray(1.0, dtype))
    info = initialize_model(jax.random.PRNGKey(0), fn, model_args=dummy, dynamic_args=True)
    z, unravel = ravel_pytree(info.param_info.z)
    order = [g for g, _ in _free_groups(key.model)]
    post = info.postprocess_fn(*dummy)

    def potential_fn(x_cols, y, n_beta):
        U = info.potential_fn(x_cols, y, n_beta)
        return lambda flat: U(unravel(flat))

    def constrain(flat):
        values = post(unravel(flat))
        return jnp.concatenate([jnp.reshape(values[g], (-1,)) for g in order])

    from numpyro.distributions.transforms import biject_to

    groups = _free_groups(key.model)
    transforms = {g: biject_to(key.prior.distribution(g, idx.size).support) for g, idx in groups}

    def prior_draw(rng_key):
        """One draw of phi in the unconstrained coordinates (numpyro's bijection of each site)."""
        keys = jax.random.split(rng_key, len(order))
        draws = {}
        for k, (g, idx) in zip(keys, groups):
            draws[g] = transforms[g].inv(key.prior.distribution(g, idx.size).sample(k).astype(dtype))
        return ravel_pytree(draws)[0]

    def unconstrain(free):
        """The inverse of constrain: free coordinates (k,) in flat order -> z (k,) (NaN off the support)."""
        sizes = np.cumsum([idx.size for _, idx in groups])[:-1]
        parts = dict(zip(order, jnp.split(free, sizes)))
        return ravel_pytree({g: transforms[g].inv(parts[g]) for g in order})[0]

    def log_jacobian(flat):
        """log |det d constrain / dz| at z (0 for normal priors, whose z are the parameters)."""
        sites = unravel(flat)
        return sum(jnp.sum(transforms[g].log_abs_det_jacobian(sites[g], transforms[g](sites[g]))) for g in order)

    return _Pieces(potential_fn, constrain, int(z.size), prior_draw, unconstrain, log_jacobian)


class _Pieces(NamedTuple):
    potential_fn: Callable
    constrain: Callable
    size: int
    prior_draw: Callable
    unconstrain: Callable
    log_jacobian: Callable


def target(model: Restriction, prior: Prior = Prior(), sigma: float = 1.0) -> Target:
    """The potential and constraining map of :func:`posterior_model` for ``model``."""
    prior.check()
    potential = PosteriorPotential(model, prior, float(check_sigma(sigma)), str(jnp.zeros(()).dtype))
    pieces = _numpyro_pieces(potential)
    return Target(potential, pieces.constrain, pieces.size, pieces.prior_draw)


class PosteriorSamples(NamedTuple):
    """Samples of C chains, S kept draws each.

    params: TwoLayer whose leaves carry leading axes (C, S); loss: (C, S) L_n(w) on the chain's
    own data set; dataset: (C,) data set index of each chain; n_beta: (C,); draws: the sampler's
    :class:`~slt_relu.sampling.Draws` (unconstrained draws and the sampler's statistics).
    """

    params: TwoLayer
    loss: np.ndarray
    dataset: np.ndarray
    n_beta: np.ndarray
    draws: Draws


def draw_datasets(keys, truth: TwoLayer, inputs, n: int, sigma: float = 1.0):
    """One data set per key: x (K, n, n_in) ~ q(x), y = f0(x) + sigma eps (K, n)."""
    from .loss import sample_dataset

    return jax.vmap(lambda k: sample_dataset(k, truth, inputs, n, sigma))(check_keys(keys))


@partial(jax.jit, static_argnums=0)
def _constrain_all(constrain, z):
    return jax.vmap(jax.vmap(constrain))(z)


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

    keys: (K * chains_per_dataset, 2), one PRNG key per chain (chain c samples data set
    c // chains_per_dataset); x: (K, n, n_in), y: (K, n), finite, K, n >= 1; n_beta: (K,) or a
    scalar, positive and finite (n * beta of each data set).  settings: a sampler's settings
    (:class:`~slt_relu.sampling.NUTSSettings` by default, :class:`~slt_relu.sampling.HMCSettings`, or
    :class:`~slt_relu.sampling.SMCSettings`: then each "chain" is an SMC run whose draws are its particles,
    started from the prior); any sampler's ``symmetry_moves`` are :class:`~slt_relu.moves.OrientationFlip`.  MCMC chains start uniformly in
    [-init_radius, init_radius] in unconstrained coordinates (numpyro's ``init_to_uniform``).
    devices, progress: see :func:`slt_relu.sampling.sample`.  Returns :class:`PosteriorSamples`.
    """
    from .moves import OrientationFlip

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
    nb = n_beta[dataset]
    k_init, k_run = jnp.swapaxes(jax.vmap(jax.random.split)(keys), 0, 1)
    if isinstance(settings, SMCSettings):                           # particles from the prior
        N = settings.num_particles
        z0 = jax.vmap(lambda k: jax.vmap(tg.prior_draw)(jax.random.split(k, N)))(k_init)
    else:
        z0 = jax.vmap(lambda k: jax.random.uniform(k, (tg.size,), x.dtype, -init_radius, init_radius))(k_init)
    moves = OrientationFlip(tg.potential) if getattr(settings, "symmetry_moves", False) else None
    out = sample(k_run, tg.potential, z0, (x_cols, yc, nb), settings, moves=moves, devices=devices, progress=progress)
    free_vals = _constrain_all(tg.constrain, jnp.asarray(out.z))
    flat = jax.vmap(jax.vmap(model.embed_flat))(free_vals.astype(x.dtype))          # (C, S, D)
    width, n_in = model.base.width, model.base.n_in
    loss = _losses(flat, x_cols, yc, width, n_in, float(sigma))
    params = jax.tree.map(np.asarray, jax.vmap(jax.vmap(lambda f: from_flat(f, width, n_in)))(flat))
    return PosteriorSamples(params, np.asarray(loss), dataset, np.asarray(nb), out)


class SMCPosterior(NamedTuple):
    """K tempered SMC runs (one per data set given), N particles each, equally weighted.

    params: TwoLayer with leading axes (K, N); loss: (K, N) L_n of each particle on its run's data;
    log_evidence: (K,) log Z = log int phi(w) exp(-n_beta L_n(w)) dw (L_n with its
    log(sigma sqrt(2 pi)) term; docs/design.md); schedule: (K, M) the tempering lambda after each stage
    (M = settings.max_stages; stages beyond num_stages are 0); ess, accept_prob: (K, M) the
    incremental weights' ESS fraction and the moves' mean acceptance at each stage; num_stages:
    (K,); draws: the sampler's :class:`~slt_relu.sampling.Draws`; n_beta: (K,) each run's n beta."""

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
    """Adaptive tempered SMC (``slt_relu.sampling.smc``) of p(w | D_n) proportional to phi(w) exp(-n_beta L_n(w)):
    one run per key, run k on data set k.

    keys: (K, 2); x: (K, n, n_in), y: (K, n) (pass one data set several times for independent runs
    on it: their spread is the Monte Carlo error); n_beta: (K,) or a scalar; settings:
    :class:`~slt_relu.sampling.SMCSettings` (default ``SMCSettings()``).  Particles start from the prior.
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


class GridPosterior(NamedTuple):
    """p(theta | D_n) on a grid over the k = 1 or 2 free coordinates.

    axes: k arrays of grid values; names: the coordinates; log_density: unnormalised log
    phi(theta) - n_beta L_n(theta), shape (R,) or (R, R) (axis 0 is the first coordinate);
    density: normalised so that sum(density) * cell = 1; cell: the grid cell's length / area;
    edge_mass: the mass in the outermost grid cells (a check that the ranges hold the posterior).
    """

    axes: tuple
    names: list
    log_density: np.ndarray
    density: np.ndarray
    cell: float
    edge_mass: float

    def points(self) -> np.ndarray:
        """The grid points, shape (R, k) or (R, R, k)."""
        if len(self.axes) == 1:
            return self.axes[0][:, None]
        return np.stack(np.meshgrid(*self.axes, indexing="ij"), -1)

    def mass(self, mask) -> float:
        """Posterior mass of a region given as a boolean mask on the grid."""
        return float(np.sum(self.density[np.asarray(mask, bool)]) * self.cell)


@partial(jax.jit, static_argnums=(3, 4, 5))
def _grid_losses(flat, x, y, width: int, n_in: int, sigma: float):
    """L_n at every flat parameter (B, D) on one data set x (n, n_in), y (n,) -> (B,): the
    posterior model's own L_n (:func:`~slt_relu.loss.empirical_loss_columns`)."""
    x_cols = x.T
    return jax.lax.map(lambda th: empirical_loss_columns(from_flat(th, width, n_in), x_cols, y, sigma), flat,
                       batch_size=256)


def grid_posterior(x, y, n_beta: float, *, model: Restriction, prior: Prior = Prior(), sigma: float = 1.0,
                   ranges: Sequence, resolution: int = 401) -> GridPosterior:
    """The exact tempered posterior of a model with k = 1 or 2 free coordinates on a grid.

    x: (n, n_in), y: (n,) one data set; ranges: k pairs (low, high); resolution points per
    axis.  log p = log phi(theta) - n_beta L_n(theta), normalised by the midpoint rule over
    the grid (the integrand is smooth between ReLU kinks; halving the spacing changes phase
    masses by far less than the sampler's error, tests/test_posterior.py).
    """
    k = model.num_free
    if k not in (1, 2):
        raise ValueError(f"model: grid posteriors need 1 or 2 free coordinates, got {k} ({model.free_names})")
    if len(ranges) != k or any(len(r) != 2 or not (np.all(np.isfinite(r)) and r[0] < r[1]) for r in ranges):
        raise ValueError(f"ranges: expected {k} pairs (low, high) of finite numbers with low < high, got {ranges!r}")
    resolution = check_count(resolution, "resolution", minimum=3)
    check_number(n_beta, "n_beta")
    prior.check()
    check_sigma(sigma)
    x, y = jnp.asarray(x), jnp.asarray(y)
    if x.ndim != 2 or x.shape[1] != model.base.n_in:
        raise ValueError(f"x: expected shape (n, n_in) with n_in = {model.base.n_in} like the model's parameters, "
                         f"got {x.shape}")
    if y.shape != x.shape[:1]:
        raise ValueError(f"y: expected shape ({x.shape[0]},) like x's rows, got {y.shape}")
    if x.shape[0] < 1:
        raise ValueError(f"x: expected at least one data point (n >= 1), got shape {x.shape}")
    check_finite(x, "x")
    check_finite(y, "y")
    axes = tuple(lo + (np.arange(resolution) + 0.5) * (hi - lo) / resolution for lo, hi in ranges)  # cell midpoints
    pts = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, k)
    flat = jax.vmap(model.embed_flat)(jnp.asarray(pts, x.dtype))                        # (B, D)
    loss = np.asarray(_grid_losses(flat, x, y, model.base.width, model.base.n_in, float(sigma)), np.float64)
    logp = -float(n_beta) * loss
    for (g, idx) in _free_groups(model):
        cols = [int(np.flatnonzero(np.flatnonzero(model.free) == i)[0]) for i in idx]
        kind, scale = getattr(prior, g)
        v = pts[:, cols]
        if kind == "normal":
            logp += np.sum(-0.5 * (v / scale) ** 2 - np.log(scale * np.sqrt(2 * np.pi)), axis=1)
        else:
            logp += np.where(np.all(np.abs(v) <= scale, axis=1), -len(cols) * np.log(2 * scale), -np.inf)
    shape = (resolution,) * k
    logp = logp.reshape(shape)
    cell = float(np.prod([a[1] - a[0] for a in axes]))
    dens = np.exp(logp - logp.max())
    dens /= dens.sum() * cell
    edge = np.ones(shape, bool)
    edge[(slice(1, -1),) * k] = False
    return GridPosterior(axes, model.free_names, logp, dens, cell, float(dens[edge].sum() * cell))

