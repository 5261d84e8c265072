"""The tempered posterior, one target for every model, prior, sampler and estimator.

    p(w | D_n)  proportional to  phi(w) exp(-n beta L(w; D_n) - (gamma / 2) |w - w*|^2),

L the loss of a model on its data (the two-layer network's L_n of DSLT3/DSLT4,
:class:`~slt_relu.models.GaussianLoss` of any model, any JAX loss), phi the :class:`~slt_relu.Prior`, and the
localization term optional (Lau et al. 2023, "The local learning coefficient"; gamma = 0 without it).
beta = 1 is the Bayes posterior, beta = 1/log n ("wbic") Watanabe's WBIC temperature, which DSLT4
uses.  :class:`TemperedTarget` is its potential on the unconstrained coordinates z (D,) that every sampler
runs on (``slt_relu.sampling``: NUTS, HMC, SGLD, SMC),

    U(z) = n beta L(unravel(w); data) + (gamma / 2) |w - w*|^2 - log phi(w) - log |det dw/dz|,  w = T(z),

T the prior's map onto its support (the identity for normal priors; ``prior.FlatPrior``); with n beta,
gamma and w* a chain's arguments, so that chains at different temperatures or localizations share one
compiled program.  :func:`posterior_model` is the same posterior of a two-layer network as a numpyro model
(its potential equals the target's, tests/test_posterior.py).
"""
from __future__ import annotations

import math
from functools import partial
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._validate import check_count
from ..loss import TwoLayerLoss, check_sigma, empirical_loss_columns
from ..models.base import Model
from ..models.likelihood import GaussianLoss
from ..network import Restriction, from_flat
from .prior import FlatPrior, Prior

__all__ = ["ColumnsLoss", "LOSSES_CHUNK_POINTS", "LossAt", "TemperedTarget", "num_data", "posterior_model", "resolve_beta",
           "tempered_target"]

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


def _free_groups(model: Restriction) -> list[tuple[str, np.ndarray]]:
    """(group, free flat indices) for each group with a free coordinate, in flat order."""
    d, n_in = model.base.width, model.base.n_in
    bounds = {"w": (0, d * n_in), "b": (d * n_in, d * (n_in + 1)), "q": (d * (n_in + 1), d * (n_in + 2)),
              "c": (d * (n_in + 2), d * (n_in + 2) + 1)}
    free = np.flatnonzero(model.free)
    out = []
    for g in ("w", "b", "q", "c"):
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


class TemperedTarget(NamedTuple):
    """The tempered (optionally localized) posterior of a loss, on unconstrained coordinates z (D,) (module
    docstring):

        U(z) = n_beta L(unravel(w); data) + (gamma / 2) |w - center|^2 - log phi(w) - log |det dw/dz|,
        w = T(z).

    A hashable ``potential_gen`` of :func:`slt_relu.sampling.sample`: ``target(data, n_beta, gamma, center)``
    -> U, from one chain's slice of ``args`` (data first: SGLD draws its mini-batches from ``args[0]``);
    n_beta, gamma >= 0 scalars, center (D,) in w; ``args = (data, n_betas)`` leaves gamma and center None (no
    localization).  n_beta = n / log n is WBIC's temperature.

    Attributes:
        loss: L(params, data) -> scalar, e.g. the mean negative log likelihood over the data (a pytree whose
            leaves share a leading axis n); hashable by value (a frozen dataclass such as
            :class:`~slt_relu.models.GaussianLoss`, or one function object reused) so that programs are reused.
        unravel: flat w (D,) -> the params ``loss`` takes: a model's structure (``slt_relu.pytree.Unravel``) or
            a two-layer restriction's (``Restriction.unravel``); its ``segments()`` name the prior's groups.
        prior: the :class:`~slt_relu.posterior.prior.Prior` phi, or None: no prior term (a localized
            posterior).

    References:
        Watanabe 2013, "A widely applicable Bayesian information criterion" (the tempered posterior);
        Lau, Furman, Wang, Murfet, Wei 2023, "The local learning coefficient" (the localization).
    """

    loss: Callable
    unravel: Callable
    prior: Prior | None = None

    def prior_on(self, size: int) -> FlatPrior | None:
        """The prior on the D = size flat coordinates (None without one): its groups from ``unravel``'s
        ``segments()``, or the default law on every coordinate where unravel names none."""
        if self.prior is None:
            return None
        segments = self.unravel.segments() if hasattr(self.unravel, "segments") else [("params", 0, int(size))]
        return self.prior.on(segments)

    @property
    def size(self) -> int:
        """D, the number of coordinates (of an ``unravel`` that knows it)."""
        return int(self.unravel.size)

    def __call__(self, data, n_beta, gamma=None, center=None):
        def potential(z):
            prior = self.prior_on(z.shape[-1])
            w = z if prior is None else prior.constrain(z)
            u = n_beta * self.loss(self.unravel(w), data)
            if gamma is not None:
                u = 0.5 * gamma * jnp.sum((w - center) ** 2) + u
            if prior is not None:
                u = prior.potential(z) + u
            return u
        return potential

    def constrain(self, z):
        """w = T(z): the parameters' flat coordinates of the sampler's z."""
        prior = self.prior_on(jnp.shape(z)[-1])
        return z if prior is None else prior.constrain(z)

    def unconstrain(self, w):
        """z = T^(-1)(w)."""
        prior = self.prior_on(jnp.shape(w)[-1])
        return w if prior is None else prior.unconstrain(w)

    def prior_draw(self, key, dtype=None):
        """One draw of the prior in the unconstrained coordinates z (D,)."""
        dtype = dtype or jnp.zeros(()).dtype
        if self.prior is None:
            raise ValueError("prior: a draw of the prior needs one, got None")
        return self.prior_on(self.size).sample(key, dtype)

    def losses_at(self, draws, data, chunk: int | None = None) -> jax.Array:
        """L(unravel(T(z)); data) at every draw z, ``chunk`` draws at a time in one compiled ``lax.map``.

        Memory: the loss's intermediates for chunk x n data points, never for draws x n (8 chains x
        40,000 steps on n = 10,000 would be 3.2e9 elements an array).

        Args:
            draws: (..., D) the sampler's draws z, e.g. (C, S, D).
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
        return _losses_at(self.loss, self.unravel, self.prior_on(flat.shape[-1]), flat, data, min(chunk, max(B, 1))).reshape(lead)


class LossAt(NamedTuple):
    """The loss of a target's parameters as a chain's observable (``slt_relu.sampling.sgld.run_sgld``'s
    ``observe``): ``LossAt(target)(data, *rest)(z) = L(unravel(T(z)); data)``, data the chain's (all of it, also
    when the sampler's steps use mini-batches)."""

    target: TemperedTarget

    def __call__(self, data, *rest):
        t = self.target
        return lambda z: t.loss(t.unravel(t.constrain(z)), data)


def tempered_target(model, prior: Prior | None = Prior(), sigma: float = 1.0) -> TemperedTarget:
    """The tempered posterior of a model under Gaussian noise, as a target on data (x (n, n_in), y).

        U(z) = n_beta L_n(w; (x, y)) - log phi(w) - log |det dw/dz|.

    Args:
        model: a :class:`~slt_relu.models.Model` (every parameter; L_n its :class:`~slt_relu.models.GaussianLoss`)
            or a two-layer :class:`~slt_relu.network.Restriction` (its free coordinates; the two-layer L_n).
        prior: the prior phi (its groups: the model's), or None (a localized posterior's: no prior term).
        sigma: the noise standard deviation, > 0.

    Returns:
        TemperedTarget, called as ``target((x, y), n_beta[, gamma, center])``.
    """
    sigma = float(check_sigma(sigma))
    if prior is not None and not isinstance(prior, Prior):
        raise TypeError(f"prior: expected a slt_relu.Prior or None, got {type(prior).__name__}")
    if isinstance(model, Restriction):
        target = TemperedTarget(TwoLayerLoss(sigma), model.unravel, prior)
    elif isinstance(model, Model):
        target = TemperedTarget(GaussianLoss(model, sigma), model.structure, prior)
    else:
        raise TypeError(f"model: expected a slt_relu.models.Model (e.g. slt_relu.models.two_layer(d, n_in), "
                        f"from_function(apply, params)) or a two-layer Restriction (e.g. Restriction.full(params)), "
                        f"got {type(model).__name__}")
    target.prior_on(target.size)                     # a prior group the model does not have: its one line now
    return target


class ColumnsLoss(NamedTuple):
    """L_n of a TwoLayer on data (x_cols (n_in, n), y (n,)): :func:`~slt_relu.loss.empirical_loss_columns` at a
    fixed sigma, the fast form when many chains, each with its own data set, are vmapped; hashable."""

    sigma: float

    def __call__(self, params, data):
        x_cols, y = data
        return empirical_loss_columns(params, x_cols, y, self.sigma)


@partial(jax.jit, static_argnums=(0, 1, 2, 5))
def _losses_at(loss: Callable, unravel: Callable, prior, flat, data, chunk: int):
    """loss(unravel(T(z)), data) for each row z of flat (B, D), vmapped over chunks of ``chunk`` rows: (B,)."""
    constrain = (lambda z: z) if prior is None else prior.constrain
    return jax.lax.map(lambda z: loss(unravel(constrain(z)), data), flat, batch_size=chunk)
