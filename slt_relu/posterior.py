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
through :func:`slt_relu.nuts.run_chains` (vmapped, sharded over devices, NUTS chains
desynchronised).  :func:`phase_masses` turns per-sample phase labels into masses with
standard errors; :func:`grid_posterior` is the exact posterior of a model with one or two free
parameters, by quadrature on a grid, to check the sampler against.
"""
from __future__ import annotations

import math
from functools import lru_cache, partial
from typing import Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .network import Restriction, TwoLayer, forward_columns, from_flat, num_params, to_flat
from .nuts import ChainSamples, SamplerSettings, run_chains

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
                    and isinstance(spec[1], (int, float)) and spec[1] > 0):
                raise ValueError(f"prior.{g}: expected (kind, scale) with kind in {PRIOR_KINDS} and scale > 0, "
                                 f"got {spec!r}")
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
    flat = to_flat(model.base).astype(x_cols.dtype).at[np.flatnonzero(model.free)].set(jnp.concatenate(pieces))
    params = from_flat(flat, model.base.width, model.base.n_in)
    resid = y - forward_columns(params, x_cols)
    loss = jnp.mean(resid**2) / (2.0 * sigma**2) + jnp.log(sigma * jnp.sqrt(2.0 * jnp.pi))
    numpyro.factor("tempered_likelihood", -n_beta * loss)


class _TargetKey(NamedTuple):
    width: int
    n_in: int
    base: tuple
    free: tuple
    prior: Prior
    sigma: float
    dtype: str


class Target(NamedTuple):
    """The compiled pieces of one posterior family (one model, prior, sigma; any data):
    potential_gen(x_cols, y, n_beta) -> U(z) on flat unconstrained z (k,); constrain(z) -> the
    free coordinates (k,); size k."""

    potential_gen: Callable
    constrain: Callable
    size: int


@lru_cache(maxsize=32)
def _target(key: _TargetKey) -> Target:
    from jax.flatten_util import ravel_pytree
    from numpyro.infer.util import initialize_model

    dtype = jnp.dtype(key.dtype)
    base = from_flat(jnp.asarray(key.base, dtype), key.width, key.n_in)
    restriction = Restriction(base, np.asarray(key.free, bool))
    fn = partial(posterior_model, model=restriction, prior=key.prior, sigma=key.sigma)
    dummy = (jnp.zeros((key.n_in, 2), dtype), jnp.zeros(2, dtype), jnp.asarray(1.0, dtype))
    info = initialize_model(jax.random.PRNGKey(0), fn, model_args=dummy, dynamic_args=True)
    z, unravel = ravel_pytree(info.param_info.z)
    order = [g for g, _ in _free_groups(restriction)]
    post = info.postprocess_fn(*dummy)

    def potential_gen(x_cols, y, n_beta):
        U = info.potential_fn(x_cols, y, n_beta)
        return lambda flat: U(unravel(flat))

    def constrain(flat):
        values = post(unravel(flat))
        return jnp.concatenate([jnp.reshape(values[g], (-1,)) for g in order])

    return Target(potential_gen, constrain, int(z.size))


def target(model: Restriction, prior: Prior = Prior(), sigma: float = 1.0) -> Target:
    """The (cached) potential and constraining map of :func:`posterior_model` for ``model``."""
    prior.check()
    free = np.asarray(model.free, bool)
    base = np.where(free, 0.0, np.asarray(to_flat(model.base), np.float64))     # free coordinates do not matter
    key = _TargetKey(model.base.width, model.base.n_in, tuple(base.tolist()), tuple(free.tolist()), prior,
                     float(sigma), str(jnp.zeros(()).dtype))
    return _target(key)


class PosteriorSamples(NamedTuple):
    """Samples of C chains, S kept draws each.

    params: TwoLayer whose leaves carry leading axes (C, S); loss: (C, S) L_n(w) on the chain's
    own data set; dataset: (C,) data set index of each chain; n_beta: (C,); chains: the
    sampler's ChainSamples (unconstrained draws, step counts, acceptance, divergences).
    """

    params: TwoLayer
    loss: np.ndarray
    dataset: np.ndarray
    n_beta: np.ndarray
    chains: ChainSamples


def draw_datasets(keys, truth: TwoLayer, inputs, n: int, sigma: float = 1.0):
    """One data set per key: x (K, n, n_in) ~ q(x), y = f0(x) + sigma eps (K, n)."""
    from .loss import sample_dataset

    return jax.vmap(lambda k: sample_dataset(k, truth, inputs, n, sigma))(jnp.asarray(keys))


def _empirical_losses(params_flat, x_cols, y, width, n_in, sigma):
    """L_n at every draw: params_flat (C, S, D), x_cols (C, n_in, n), y (C, n) -> (C, S)."""
    def per_chain(thetas, xc, yc):
        def one(th):
            r = yc - forward_columns(from_flat(th, width, n_in), xc)
            return jnp.mean(r**2) / (2.0 * sigma**2) + jnp.log(sigma * jnp.sqrt(2.0 * jnp.pi))
        return jax.lax.map(one, thetas, batch_size=64)
    return np.asarray(jax.jit(jax.vmap(per_chain))(params_flat, x_cols, y))


def sample_posterior(keys, x, y, n_beta, *, model: Restriction, prior: Prior = Prior(), sigma: float = 1.0,
                     settings: SamplerSettings = SamplerSettings(), chains_per_dataset: int = 1,
                     init_radius: float = 2.0, devices=None, slots: int | None = None, progress=None,
                     ticks_per_call: int = 2000) -> PosteriorSamples:
    """Sample p(w | D_n) for K data sets, ``chains_per_dataset`` chains each, in one program.

    keys: (K * chains_per_dataset, 2), one PRNG key per chain (chain c samples data set
    c // chains_per_dataset); x: (K, n, n_in), y: (K, n), n_beta: (K,) or a scalar (n * beta of
    each data set).  Chains start uniformly in [-init_radius, init_radius] in unconstrained
    coordinates (numpyro's ``init_to_uniform``).  devices, slots, progress, ticks_per_call: see
    :func:`slt_relu.nuts.run_chains`.  Returns :class:`PosteriorSamples`.
    """
    tg = target(model, prior, sigma)
    x = jnp.asarray(x)
    y = jnp.asarray(y)
    if x.ndim != 3 or x.shape[2] != model.base.n_in or y.shape != x.shape[:2]:
        raise ValueError(f"x, y: expected shapes (K, n, {model.base.n_in}) and (K, n), got {x.shape} and {y.shape}")
    K, n = y.shape
    if not (isinstance(chains_per_dataset, int) and chains_per_dataset >= 1):
        raise ValueError(f"chains_per_dataset: expected a positive integer, got {chains_per_dataset!r}")
    C = K * chains_per_dataset
    keys = jnp.asarray(keys)
    if keys.shape[0] != C:
        raise ValueError(f"keys: expected {C} keys (data sets x chains_per_dataset), got shape {keys.shape}")
    n_beta = jnp.broadcast_to(jnp.asarray(n_beta, x.dtype), (K,))
    dataset = np.repeat(np.arange(K), chains_per_dataset)
    x_cols = jnp.swapaxes(x, 1, 2)[dataset]
    yc = y[dataset]
    nb = n_beta[dataset]
    k_init, k_run = jnp.swapaxes(jax.vmap(jax.random.split)(keys), 0, 1)
    z0 = jax.vmap(lambda k: jax.random.uniform(k, (tg.size,), x.dtype, -init_radius, init_radius))(k_init)
    out = run_chains(k_run, tg.potential_gen, z0, (x_cols, yc, nb), settings, devices=devices, slots=slots,
                     progress=progress, ticks_per_call=ticks_per_call)
    free_vals = jax.jit(jax.vmap(jax.vmap(tg.constrain)))(jnp.asarray(out.z))
    base = to_flat(model.base).astype(x.dtype)
    flat = jnp.broadcast_to(base, free_vals.shape[:2] + base.shape).at[..., np.flatnonzero(model.free)].set(free_vals)
    width, n_in = model.base.width, model.base.n_in
    loss = _empirical_losses(flat, x_cols, yc, width, n_in, sigma)
    params = jax.tree.map(np.asarray, jax.vmap(jax.vmap(lambda f: from_flat(f, width, n_in)))(flat))
    return PosteriorSamples(params, loss, dataset, np.asarray(nb), out)


# ----------------------------------------------------------------------------------------
# phase masses, trials, crossovers


class PhaseMasses(NamedTuple):
    """Posterior mass of each phase.

    names: the P phase names; mass: (P,) the mean over data sets of each data set's mass (each
    data set's chains pooled); se: (P,) standard error of that mean across data sets
    (std / sqrt(K), DSLT4's error bars across trials; NaN with one data set); mcse: (P,) Monte
    Carlo standard error within data sets, sqrt(p (1 - p) / ESS) of the phase indicator,
    combined over data sets; per_dataset: (K, P); per_chain: (C, P).
    """

    names: tuple
    mass: np.ndarray
    se: np.ndarray
    mcse: np.ndarray
    per_dataset: np.ndarray
    per_chain: np.ndarray

    def as_dict(self) -> dict:
        return {name: float(m) for name, m in zip(self.names, self.mass)}


def phase_masses(labels, names: Sequence | None = None, dataset=None) -> PhaseMasses:
    """Masses of the phases in labels: (C, S) per-draw phase labels (ints indexing ``names``,
    or hashable labels such as strings or PhaseLabels, then names default to the sorted
    distinct labels).  dataset: (C,) data set of each chain (default: each chain its own)."""
    from .diagnostics import ess

    labels = np.asarray(labels, dtype=object if names is None else None)
    if labels.ndim != 2:
        raise ValueError(f"labels: expected shape (chains, draws), got {labels.shape}")
    C, S = labels.shape
    if names is None:
        names = sorted({v for v in labels.reshape(-1)}, key=str)
        codes = np.vectorize({v: k for k, v in enumerate(names)}.get, otypes=[int])(labels)
    else:
        if not np.issubdtype(labels.dtype, np.integer):
            raise ValueError(f"labels: with names given, expected integer codes, got dtype {labels.dtype}")
        codes = labels
        if codes.size and (codes.min() < 0 or codes.max() >= len(names)):
            raise ValueError(f"labels: expected codes in [0, {len(names)}), got {codes.min()}..{codes.max()}")
    dataset = np.arange(C) if dataset is None else np.asarray(dataset)
    if dataset.shape != (C,):
        raise ValueError(f"dataset: expected shape ({C},), got {dataset.shape}")
    P = len(names)
    onehot = codes[..., None] == np.arange(P)
    per_chain = onehot.mean(1)
    groups = np.unique(dataset)
    per_dataset = np.array([per_chain[dataset == g].mean(0) for g in groups])
    K = len(groups)
    mass = per_dataset.mean(0)
    se = per_dataset.std(0, ddof=1) / np.sqrt(K) if K > 1 else np.full(P, np.nan)
    var = np.zeros(P)
    for gi, g in enumerate(groups):
        ind = onehot[dataset == g]
        for p in range(P):
            m = per_dataset[gi, p]
            if 0 < m < 1 and S >= 4:
                var[p] += m * (1 - m) / ess(ind[..., p].astype(float))
    mcse = np.sqrt(var) / K
    return PhaseMasses(tuple(str(nm) for nm in names), mass, se, mcse, per_dataset, per_chain)


def trial_filter(mean_loss, z: float = 1.5) -> np.ndarray:
    """DSLT4's trial filter: keep trials whose mean L_n has |z-score| <= z across trials.

    mean_loss: (T,) each trial's posterior mean of L_n.  z-scores use the population standard
    deviation (numpy's and scipy's default); with T trials no |z| can exceed sqrt(T - 1), which
    one trial far from all the others reaches: with 4 trials (bound 1.73) the filter at 1.5
    removes only such a lone outlier, with 3 (bound 1.41) none.  Returns a (T,) bool mask of the
    trials kept.
    """
    v = np.asarray(mean_loss, np.float64)
    sd = v.std()
    if v.size < 2 or sd == 0:
        return np.ones(v.shape, bool)
    return np.abs(v - v.mean()) / sd <= z


def crossover(xs, a, b) -> float:
    """The first x where a(x) - b(x) changes sign, by linear interpolation (NaN if never)."""
    xs, diff = np.asarray(xs, np.float64), np.asarray(a, np.float64) - np.asarray(b, np.float64)
    for i in range(len(xs) - 1):
        if diff[i] == 0:
            return float(xs[i])
        if diff[i] * diff[i + 1] < 0:
            return float(xs[i] + (xs[i + 1] - xs[i]) * diff[i] / (diff[i] - diff[i + 1]))
    return float(xs[-1]) if len(diff) and diff[-1] == 0 else float("nan")


def crossover_bootstrap(xs, trials_a, trials_b, rng: np.random.Generator, n_boot: int = 2000):
    """Crossover of two phase masses with a bootstrap standard error over trials.

    trials_a, trials_b: per x, the per-trial masses of the two phases (lists of arrays, same
    trials for a and b).  Each bootstrap replicate resamples the trials of every x with
    replacement.  Returns (crossover of the means, std of the replicates, fraction of replicates
    with a crossover)."""
    xs = np.asarray(xs, np.float64)
    ta = [np.asarray(t, np.float64) for t in trials_a]
    tb = [np.asarray(t, np.float64) for t in trials_b]
    point = crossover(xs, [t.mean() for t in ta], [t.mean() for t in tb])
    reps = []
    for _ in range(n_boot):
        idx = [rng.integers(0, len(t), len(t)) for t in ta]
        reps.append(crossover(xs, [t[i].mean() for t, i in zip(ta, idx)], [t[i].mean() for t, i in zip(tb, idx)]))
    reps = np.asarray(reps)
    ok = np.isfinite(reps)
    se = float(reps[ok].std(ddof=1)) if ok.sum() > 1 else float("nan")
    return point, se, float(ok.mean())


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


def grid_posterior(x, y, n_beta: float, *, model: Restriction, prior: Prior = Prior(), sigma: float = 1.0,
                   ranges: Sequence, resolution: int = 401) -> GridPosterior:
    """The exact tempered posterior of a model with k = 1 or 2 free coordinates on a grid.

    x: (n, n_in), y: (n,) one data set; ranges: k pairs (low, high); resolution points per
    axis.  log p = log phi(theta) - n_beta L_n(theta), normalised by the midpoint rule over
    the grid (the integrand is smooth between ReLU kinks; halving the spacing changes phase
    masses by far less than the sampler's error, tests/test_posterior.py).
    """
    from .loss import empirical_loss, map_params

    k = model.num_free
    if k not in (1, 2):
        raise ValueError(f"model: grid posteriors need 1 or 2 free coordinates, got {k} ({model.free_names})")
    if len(ranges) != k or any(len(r) != 2 or not r[0] < r[1] for r in ranges):
        raise ValueError(f"ranges: expected {k} pairs (low, high) with low < high, got {ranges!r}")
    if not (isinstance(resolution, int) and resolution >= 3):
        raise ValueError(f"resolution: expected an integer >= 3, got {resolution!r}")
    prior.check()
    x, y = jnp.asarray(x), jnp.asarray(y)
    axes = tuple(lo + (np.arange(resolution) + 0.5) * (hi - lo) / resolution for lo, hi in ranges)  # cell midpoints
    pts = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, k)
    base = to_flat(model.base).astype(x.dtype)
    flat = jnp.broadcast_to(base, (pts.shape[0], base.shape[0])).at[:, np.flatnonzero(model.free)].set(
        jnp.asarray(pts, x.dtype))
    loss = np.asarray(map_params(lambda p: empirical_loss(p, x, y, sigma), flat, model.base.width, model.base.n_in),
                      np.float64)
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

