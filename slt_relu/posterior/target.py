"""The tempered Bayesian posterior of a two-layer ReLU network (DSLT3, DSLT4): its numpyro model and
the potential every sampler runs on.

    p(w | D_n)  proportional to  phi(w) exp(-n beta L_n(w)),
    L_n(w) = (1/n) sum_k (y_k - f(x_k, w))^2 / (2 sigma^2) + log(sigma sqrt(2 pi)),

beta = 1 is the Bayes posterior, beta = 1/log n ("wbic") Watanabe's WBIC temperature, which
DSLT4 (Carroll, "Phase transitions in neural networks") uses.  The prior phi is a product over
parameter groups w, b, q, c of N(0, s^2) or uniform on [-a, a] (:class:`Prior`); a
:class:`~slt_relu.network.Restriction` samples only its free coordinates (DSLT3's Examples 3.2
and 3.4).  :func:`posterior_model` is the numpyro model; :func:`target` its potential on flat
unconstrained coordinates (hashable, a static argument of the samplers' programs), the map back to
the parameters, and prior draws.

:class:`TemperedTarget` is the same posterior for any loss L and any prior, optionally localized
(Lau et al. 2023, "The local learning coefficient"),

    U(w) = n beta L(w; D_n) - log phi(w) + (gamma / 2) |w - w*|^2,

with n beta, gamma and w* as a chain's arguments: the learning coefficient's SGLD, beta sweeps and
WBIC (``slt_relu.posterior.llc``) run on it, and :meth:`TemperedTarget.losses_at` evaluates L at
their kept draws in chunks of bounded memory.  The two-layer NUTS/SMC posterior keeps numpyro's
potential (its unconstrained coordinates for uniform priors); on the free coordinates,
``TemperedTarget(RestrictedLoss(model, sigma), unravel, PriorDensity(prior, model))`` computes the
same U (tests/test_posterior.py).
"""
from __future__ import annotations

import math
from functools import lru_cache, partial
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..loss import check_sigma, empirical_loss_columns
from ..network import Restriction, check_count, from_flat

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
    """The prior phi(w) of a two-layer network, independent per coordinate and per parameter group.

        phi(w) = prod over groups g in (w, b, q, c) of prod_i p_g(w_i),
        p_g = N(0, s^2) for ("normal", s), U[-a, a] for ("uniform", a).

    Attributes:
        w: the input weights' (kind, scale).
        b: the biases' (kind, scale).
        q: the output weights' (kind, scale).
        c: the output bias's (kind, scale).

    References:
        DSLT4: the posteriors of the phase transition experiments use N(0, 1) priors.
    """

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
    """The pieces of one posterior family on numpyro's unconstrained z (the sites b, c, q, w by name, each mapped
    to its prior's support by numpyro's bijection): the potential

        U(z) = -log phi(w(z)) - log|det dw/dz| + n_beta L_n(w(z))      (numpyro's potential_energy),

    constrain, the prior's draws, unconstrain and log|det dw/dz|.  Nothing is evaluated here: numpyro's
    initialize_model would run the model and its gradient op by op to find a starting point (hundreds of
    one-operation programs to compile); the samplers draw their own.  One cache entry per family."""
    from jax.flatten_util import ravel_pytree
    from numpyro.distributions.transforms import biject_to
    from numpyro.infer.util import potential_energy

    dtype = jnp.dtype(key.dtype)
    fn = partial(posterior_model, model=key.model, prior=key.prior, sigma=key.sigma)
    groups = _free_groups(key.model)
    order = [g for g, _ in groups]
    transforms = {g: biject_to(key.prior.distribution(g, idx.size).support) for g, idx in groups}
    names = sorted(order)                       # numpyro's (and ravel_pytree's) order of the sites: by name
    size = {g: idx.size for g, idx in groups}

    def unravel(flat):
        return dict(zip(names, jnp.split(flat.astype(dtype), np.cumsum([size[g] for g in names])[:-1].tolist())))

    def potential_fn(x_cols, y, n_beta):
        return lambda flat: potential_energy(fn, (x_cols, y, n_beta), {}, unravel(flat))

    def constrain(flat):
        sites = unravel(flat)
        return jnp.concatenate([jnp.reshape(transforms[g](sites[g]), (-1,)) for g in order])

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

    return _Pieces(potential_fn, constrain, sum(size.values()), prior_draw, unconstrain, log_jacobian)


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
    potential = PosteriorPotential(model, prior, float(check_sigma(sigma)), str(jax.dtypes.canonicalize_dtype(float)))
    pieces = _numpyro_pieces(potential)
    return Target(potential, pieces.constrain, pieces.size, pieces.prior_draw)


# ----------------------------------------------------------------------------------------
# the tempered target of any loss


LOSSES_CHUNK_POINTS = 2 ** 22
"""Loss terms (draws x data points) one chunk of :meth:`TemperedTarget.losses_at` evaluates at most:
its memory is chunk x n elements per intermediate array, whatever the number of draws."""


def num_data(data) -> int:
    """n, the common leading (data) axis of the arrays of a data pytree (ValueError if they differ or n < 1)."""
    sizes = {int(np.shape(a)[0]) for a in jax.tree.leaves(data)}
    if len(sizes) != 1:
        raise ValueError(f"data: expected arrays with one common leading (data) axis, got sizes {sorted(sizes)}")
    n = sizes.pop()
    if n < 1:
        raise ValueError(f"data: expected at least one data point, got a leading axis of {n}")
    return n


class GaussianPrior(NamedTuple):
    """N(0, std^2 I) on flat w (D,), as a log density up to its constant -(D/2) log(2 pi std^2), which no
    sampler needs: log phi(w) = -|w|^2 / (2 std^2) (the beta sweep's and WBIC's prior)."""

    std: float

    def __call__(self, w):
        return -0.5 * jnp.sum((w / self.std) ** 2)


class PriorDensity(NamedTuple):
    """The log density of a :class:`Prior` on a Restriction's free coordinates theta (k,), flat order:

        log phi(theta) = sum over groups g of sum_i log p_g(theta_i),

    p_g = N(0, s^2) (numpyro's ``log_prob`` of :func:`posterior_model`'s sample site) or U[-a, a]
    (-log 2a, -inf off its support).  Hashable by value."""

    prior: Prior
    model: Restriction

    def __call__(self, theta):
        groups = _free_groups(self.model)
        parts = jnp.split(theta, [int(i) for i in np.cumsum([idx.size for _, idx in groups])[:-1]])
        total = 0.0
        for (g, idx), part in zip(groups, parts):
            kind, scale = getattr(self.prior, g)
            if kind == "uniform":
                lp = jnp.where(jnp.all(jnp.abs(part) <= scale), -idx.size * math.log(2 * scale), -jnp.inf)
            else:
                lp = self.prior.distribution(g, idx.size).log_prob(part)
            total = total + lp
        return total


class TemperedTarget(NamedTuple):
    """The tempered (optionally localized) posterior of any loss on flat coordinates w (D,):

        p(w) proportional to phi(w) exp(-n_beta L(unravel(w); data) - (gamma / 2) |w - center|^2),
        U(w) = n_beta L(unravel(w); data) - log phi(w) + (gamma / 2) |w - center|^2.

    A hashable ``potential_gen`` of :func:`slt_relu.sampling.sample`: ``target(data, n_beta, gamma,
    center)`` -> U, from one chain's slice of ``args`` (data first: SGLD draws its mini-batches from
    ``args[0]``); n_beta, gamma >= 0 scalars, center (D,); ``args = (data, n_betas)`` leaves gamma and
    center None: no localization term (the global posterior).  n_beta = n / log n is WBIC's temperature.

    Fields:
        loss: L(params, data) -> scalar, e.g. the mean negative log-likelihood over the data (a pytree
            whose leaves share a leading axis n); any JAX function, hashable (a NamedTuple such as
            ``llc.TwoLayerLoss``, or one function object reused) so that programs are reused.
        unravel: flat w (D,) -> the params ``loss`` takes (``slt_relu.sampling.unravel_fn``).
        log_prior: log phi(w) on flat w (:class:`GaussianPrior`, :class:`PriorDensity`, any hashable
            callable), or None: no prior term (the localized posteriors).

    References:
        Watanabe 2013, "A widely applicable Bayesian information criterion" (the tempered posterior);
        Lau, Furman, Wang, Murfet, Wei 2023, "The local learning coefficient" (the localization).
    """

    loss: Callable
    unravel: Callable
    log_prior: Callable | None = None

    def __call__(self, data, n_beta, gamma=None, center=None):
        def potential(w):
            # the prior and localization terms first, then n_beta L: the order the beta sweep's and SGLD's
            # potentials had, so their chains stay the same to the bit
            u = n_beta * self.loss(self.unravel(w), data)
            if gamma is not None:
                u = 0.5 * gamma * jnp.sum((w - center) ** 2) + u
            if self.log_prior is not None:
                u = -self.log_prior(w) + u
            return u
        return potential

    def losses_at(self, draws, data, chunk: int | None = None) -> jax.Array:
        """L(unravel(w); data) at every flat draw, ``chunk`` draws at a time in one compiled ``lax.map``.

        Memory: the loss's intermediates for chunk x n data points, never for draws x n (8 chains x
        40,000 steps on n = 10,000 would be 3.2e9 elements an array).

        Args:
            draws: (..., D) flat draws, e.g. (C, S, D) from a sampler.
            data: the data pytree (leading axis n).
            chunk: draws per chunk (default max(1, LOSSES_CHUNK_POINTS // n)); the same chunk reuses
                the compiled program.

        Returns:
            (...,) the loss at each draw.
        """
        draws = jnp.asarray(draws)
        lead = draws.shape[:-1]
        B = math.prod(lead)
        chunk = max(1, LOSSES_CHUNK_POINTS // num_data(data)) if chunk is None else check_count(chunk, "chunk")
        flat = draws.reshape(B, draws.shape[-1])
        return _losses_at(self.loss, self.unravel, flat, data, min(chunk, max(B, 1))).reshape(lead)


@partial(jax.jit, static_argnums=(0, 1, 4))
def _losses_at(loss: Callable, unravel: Callable, flat, data, chunk: int):
    """loss(unravel(w), data) for each row w of flat (B, D), vmapped over chunks of ``chunk`` rows: (B,)."""
    return jax.lax.map(lambda w: loss(unravel(w), data), flat, batch_size=chunk)
