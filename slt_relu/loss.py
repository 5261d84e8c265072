"""The population loss K(w), the empirical loss L_n(w), data sets, and 2-D loss slices.

Regression with Gaussian noise of standard deviation sigma (docs/design.md):

    K(w)   = E_{x~q}[(f(x, w) - f0(x))^2] / (2 sigma^2)                (KL divergence)
    L_n(w) = (1/n) sum_k [(y_k - f(x_k, w))^2 / (2 sigma^2) + log(sigma sqrt(2 pi))]

with y_k = f0(x_k) + sigma * eps_k.  DSLT3 Example 3.4: with q uniform on
[-sqrt6, sqrt6] and sigma^2 = 1/2, K(w1, w2) is the post's four-case formula.
"""
from __future__ import annotations

from functools import partial
from typing import Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .fused import two_layer_nll
from .inputs import check_inputs, expectation_rule
from .models.base import check_model
from .models.likelihood import GaussianLoss, check_regression_data
from .network import (TwoLayer, check_count, check_finite, check_number, check_params, coordinate_index,
                      forward, from_flat, to_flat)

__all__ = ["TwoLayerLoss", "check_data", "check_sigma", "coordinate_slice", "empirical_loss", "empirical_loss_columns",
           "gaussian_nll", "loss_slice", "map_params", "population_loss", "population_losses", "sample_dataset",
           "two_layer_loss"]


def check_sigma(sigma):
    """sigma unless it is a concrete number that is not positive and finite (ValueError naming
    it); traced values (inside jit / vmap) pass unchecked."""
    return check_number(sigma, "sigma", what="noise standard deviation")


def check_data(x, y, n_in: int, like: str) -> tuple[jax.Array, jax.Array]:
    """A data set (x, y) as arrays, after checking x: (n, n_in) with n >= 1, y: (n,), both finite
    (ValueError naming them; ``like`` says whose n_in it is, e.g. "the model's parameters")."""
    x, y = jnp.asarray(x), jnp.asarray(y)
    if x.ndim != 2 or x.shape[1] != n_in:
        raise ValueError(f"x: expected shape (n, n_in) with n_in = {n_in} like {like}, got {x.shape}")
    if y.shape != x.shape[:1]:
        raise ValueError(f"y: expected shape ({x.shape[0]},) like x's rows, got {y.shape}")
    if x.shape[0] < 1:
        raise ValueError(f"x: expected at least one data point (n >= 1), got shape {x.shape}")
    check_finite(x, "x")
    check_finite(y, "y")
    return x, y


def population_loss(params: TwoLayer, truth: TwoLayer, inputs, sigma=1.0) -> jax.Array:
    """The population loss K(w), the KL divergence from the truth's model.

        K(w) = E_q[(f(x, w) - f0(x))^2] / (2 sigma^2)

    Jitted; vmap over a batch of params with ``jax.vmap(population_loss, (0, None, None, None))``.

    Args:
        params: TwoLayer w (any width).
        truth: TwoLayer f0 (any width, the same n_in as params).
        inputs: the input distribution q: UniformBox, Gaussian or Quadrature (see
            ``slt_relu.inputs`` for how exact each is).
        sigma: the noise standard deviation, > 0.

    Returns:
        () K(w), a scalar.
    """
    check_params(params)
    check_inputs(inputs, params.n_in)
    check_sigma(sigma)
    return _population_loss_jit(params, truth, inputs, sigma)


def _population_loss(params: TwoLayer, truth: TwoLayer, inputs, sigma=1.0) -> jax.Array:
    """Unjitted K(w) (see population_loss)."""
    check_params(params)
    check_params(truth)
    if truth.n_in != params.n_in:
        raise ValueError(f"truth: expected n_in = {params.n_in} like params, got {truth.n_in}")
    rule = expectation_rule(inputs, params, truth)
    if rule.n_in != params.n_in:
        raise ValueError(f"inputs: expected n_in = {params.n_in} like params, got {rule.n_in}")
    diff = forward(params, rule.points) - forward(truth, rule.points)
    return jnp.sum(rule.weights * diff**2) / (2.0 * sigma**2)


_population_loss_jit = jax.jit(_population_loss)
_population_loss_batch = jax.jit(jax.vmap(_population_loss, (0, None, None, None)))


def population_losses(params: TwoLayer, truth: TwoLayer, inputs, sigma=1.0) -> jax.Array:
    """K(w) of a batch of parameters: params with leading axis B (leaves (B, ...)) -> (B,);
    one compiled program per batch shape (vmapped :func:`population_loss`)."""
    check_params(truth)
    check_sigma(sigma)
    if jnp.ndim(params.c) != 1:
        raise ValueError(f"params: expected a batch with one leading axis (c of shape (B,)), got c of shape "
                         f"{jnp.shape(params.c)}")
    check_params(jax.tree.map(lambda a: a[0], params))
    check_inputs(inputs, params.w.shape[-1])
    return _population_loss_batch(params, truth, inputs, sigma)


def gaussian_nll(resid: jax.Array, sigma) -> jax.Array:
    """The mean Gaussian negative log likelihood of residuals y - f: (n,) -> scalar,

        mean_k resid_k^2 / (2 sigma^2) + log(sigma sqrt(2 pi)),

    the one place L_n's formula is written (rows, columns, posterior, grid, LLC all use it)."""
    if jnp.size(resid) == 0:
        raise ValueError(f"resid: expected at least one residual, got shape {jnp.shape(resid)}")
    return jnp.mean(resid**2) / (2.0 * sigma**2) + jnp.log(sigma * jnp.sqrt(2.0 * jnp.pi))


def empirical_loss(params, x: jax.Array, y: jax.Array, sigma=1.0, *, model=None) -> jax.Array:
    """The empirical loss L_n(w), the mean negative log likelihood of Gaussian regression.

        L_n(w) = mean_k (y_k - f(x_k, w))^2 / (2 sigma^2) + log(sigma sqrt(2 pi))

    (summed over the outputs of a model with several.)  Jitted; vmap over params for a batch.

    Args:
        params: TwoLayer w, or the parameters of ``model``.
        x: (n, n_in) inputs.
        y: (n,) outputs ((n, n_out) for a model with several).
        sigma: the noise standard deviation, > 0.
        model: any :class:`~slt_relu.models.Model` (its :class:`~slt_relu.models.GaussianLoss`), or None for a
            TwoLayer.

    Returns:
        () L_n(w), a scalar.
    """
    if model is not None:
        check_model(model)
        x, y = check_regression_data(model, model.structure.check(params), x, y)
        return GaussianLoss(model, float(check_sigma(sigma)))(params, (x, y))
    check_params(params)
    x, y = jnp.asarray(x), jnp.asarray(y)
    if x.ndim != 2 or y.shape != x.shape[:1]:
        raise ValueError(f"x, y: expected shapes (n, n_in) and (n,), got {x.shape} and {y.shape}")
    if x.shape[1] != params.n_in:
        raise ValueError(f"x: expected n_in = {params.n_in} columns like params, got shape {x.shape}")
    if x.shape[0] < 1:
        raise ValueError(f"x: expected at least one data point (n >= 1), got shape {x.shape}")
    check_sigma(sigma)
    return _empirical_loss(params, x, y, sigma)


@jax.jit
def _empirical_loss(params, x, y, sigma):
    return gaussian_nll(y - forward(params, x), sigma)


def empirical_loss_columns(params: TwoLayer, x_cols: jax.Array, y: jax.Array, sigma=1.0) -> jax.Array:
    """L_n(w) with the inputs as columns, x_cols: (n_in, n), y: (n,): the same number as
    :func:`empirical_loss`, with its gradient fused (:func:`slt_relu.fused.two_layer_nll`: one pass over
    the data, the fast form inside the samplers).  Not jitted: it is meant to be traced inside samplers'
    programs."""
    if jnp.ndim(x_cols) != 2 or jnp.shape(x_cols)[1] < 1 or jnp.shape(y) != jnp.shape(x_cols)[1:]:
        raise ValueError(f"x_cols, y: expected shapes (n_in, n) with n >= 1 and (n,), got {jnp.shape(x_cols)} and "
                         f"{jnp.shape(y)}")
    return two_layer_nll(params, x_cols, y, check_sigma(sigma))


class TwoLayerLoss(NamedTuple):
    """:func:`two_layer_loss` at a fixed sigma, hashable by value (a static jit argument)."""

    sigma: float

    def __call__(self, params, data):
        return two_layer_loss(params, data, self.sigma)


def two_layer_loss(params, data, sigma: float = 1.0):
    """L_n of a TwoLayer on data = (x (n, n_in), y (n,)), as loss_fn for :func:`~slt_relu.posterior.llc.estimate_llc`:
    mean (y - f(x))^2 / (2 sigma^2) + log(sigma sqrt(2 pi)), by :func:`slt_relu.fused.two_layer_nll` (the fast
    form when chains are vmapped)."""
    x, y = data
    return empirical_loss_columns(params, x.T, y, sigma)


def sample_dataset(key: jax.Array, truth: TwoLayer, inputs, n: int, sigma: float = 1.0):
    """Draw a data set from the truth's model.

        x ~ q,  y = f0(x) + sigma * eps,  eps ~ N(0, 1)

    Args:
        key: a PRNG key.
        truth: TwoLayer f0.
        inputs: the input distribution q (UniformBox, Gaussian).
        n: the number of data points, >= 1.
        sigma: the noise standard deviation, >= 0 (0 gives noiseless outputs).

    Returns:
        (x, y): x (n, n_in), y (n,), in the truth's dtype.
    """
    check_params(truth)
    check_inputs(inputs, truth.n_in)
    n = check_count(n, "n")
    check_number(sigma, "sigma", what="noise standard deviation", nonnegative=True)
    key_x, key_eps = jax.random.split(key)
    x = inputs.sample(key_x, n, dtype=truth.w.dtype)
    y = forward(truth, x) + sigma * jax.random.normal(key_eps, (n,), truth.w.dtype)
    return x, y


@partial(jax.jit, static_argnums=(0, 2, 3, 4))
def map_params(fn: Callable[..., jax.Array], flat_batch: jax.Array, width: int, n_in: int,
               chunk: int = 256, args: tuple = ()) -> jax.Array:
    """Apply ``fn(params, *args)`` to each flat parameter in flat_batch: (B, D), vmapped in chunks
    of ``chunk`` inside one compiled ``lax.map`` (bounded memory for big batches).  Compiled once
    per (fn, width, n_in, chunk) and the shapes of ``args`` by ``jax.jit``: fn is a static
    argument, so pass a module-level function (e.g. ``population_loss``) with its data in
    ``args`` rather than a new lambda per call, which compiles again."""
    return jax.lax.map(lambda flat: fn(from_flat(flat, width, n_in), *args), flat_batch, batch_size=chunk)


def loss_slice(fn: Callable[..., jax.Array], center: TwoLayer, u, v, s, t,
               chunk: int = 256, args: tuple = ()) -> jax.Array:
    """fn on the plane center + s_i u + t_j v, as one batched call.

    fn: (TwoLayer, *args) -> scalar, e.g. ``population_loss`` with ``args=(truth, inputs,
    sigma)`` (compiled once for all calls with equal shapes) or a lambda of one argument
    (compiled again for each new lambda); u, v: (D,) directions; s: (S,), t: (T,) offsets.
    Returns (S, T).
    """
    c = to_flat(check_params(center))
    u, v = jnp.asarray(u, c.dtype), jnp.asarray(v, c.dtype)
    s, t = jnp.asarray(s, c.dtype), jnp.asarray(t, c.dtype)
    for name, vec in (("u", u), ("v", v)):
        if vec.shape != c.shape:
            raise ValueError(f"{name}: expected shape {c.shape} (one entry per parameter), got {vec.shape}")
    grid = c + s[:, None, None] * u + t[None, :, None] * v
    out = map_params(fn, grid.reshape(-1, c.shape[0]), center.width, center.n_in, chunk, tuple(args))
    return out.reshape(s.shape[0], t.shape[0])


def coordinate_slice(fn: Callable[..., jax.Array], base: TwoLayer, axes: Sequence[str],
                     xs, ys, chunk: int = 256, args: tuple = ()) -> jax.Array:
    """A loss over two named coordinates of a two-layer network, the others fixed at ``base``.

        out[s, t] = fn(w, *args),  w = base with coordinate axes[0] = xs[s] and axes[1] = ys[t]

    Args:
        fn: (TwoLayer, ``*args``) -> scalar, e.g. ``population_loss`` with ``args=(truth, inputs, sigma)`` (compiled
            once for all calls with equal shapes) or a function of one argument.
        base: the TwoLayer the other coordinates are taken from.
        axes: two coordinate names, e.g. ``("w[0,0]", "q[0]")`` (``w[i,k]``, ``b[i]``, ``q[i]``, ``c``).
        xs: (S,) values of the first coordinate.
        ys: (T,) values of the second.
        chunk: parameters evaluated together (memory; speed only).
        args: fn's other arguments.

    Returns:
        (S, T) fn on the grid.
    """
    if len(axes) != 2:
        raise ValueError(f"axes: expected two coordinate names, got {list(axes)}")
    i, j = (coordinate_index(a, base.width, base.n_in) for a in axes)
    if i == j:
        raise ValueError(f"axes: expected two different coordinates, got {list(axes)}")
    D = to_flat(base).shape[0]
    center = from_flat(to_flat(base).at[np.array([i, j])].set(0.0), base.width, base.n_in)
    return loss_slice(fn, center, jnp.eye(D)[i], jnp.eye(D)[j], xs, ys, chunk, args)
