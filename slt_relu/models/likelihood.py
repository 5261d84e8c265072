"""The Gaussian regression likelihood of any model: the empirical loss L_n(w) and its per-sample terms.

    ell_k(w) = |y_k - f(x_k; w)|^2 / (2 sigma^2) + n_out log(sigma sqrt(2 pi)),
    L_n(w)   = (1/n) sum_k ell_k(w),

the mean negative log likelihood of y = f(x; w) + sigma eps, eps ~ N(0, I_n_out) (docs/design.md; for one
output it is the two-layer network's L_n).  :class:`GaussianLoss` is the loss ``loss(params, data)`` that
the toolkit's generic functions take, data = (x (n, n_in), y (n,) or (n, n_out)): the tempered target
(``slt_relu.posterior``), ``estimate_llc``, the Hessian.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from .._validate import check_finite, check_number
from ..fused import two_layer_nll
from ..network import TwoLayer, forward
from .base import Model, check_model

__all__ = ["GaussianLoss", "check_regression_data", "gaussian_loss"]


def _outputs(model: Model, params, x, y):
    """f(x; params) shaped like y (an (n, 1) output against y (n,) is read as (n,))."""
    f = model.apply(params, x)
    if f.shape != y.shape and f.size == y.size:
        f = f.reshape(y.shape)
    return f


@dataclasses.dataclass(frozen=True)
class GaussianLoss:
    """L_n(w) of a model under Gaussian noise of standard deviation sigma (module docstring); a loss
    ``loss(params, data)`` with data = (x (n, n_in), y (n,) or (n, n_out)), hashable and compared by value, and a
    function ``jax.jit`` takes as it is (``jax.jit(loss)``).

    Attributes:
        model: the :class:`~slt_relu.models.Model`.
        sigma: the noise standard deviation, > 0.
    """

    model: Model
    sigma: float = 1.0

    def __call__(self, params, data) -> jax.Array:
        """L_n(w) = (1/n) sum_k ell_k(w), a scalar (the two-layer network's with its gradient fused,
        :func:`slt_relu.fused.two_layer_nll`)."""
        x, y = data
        if (self.model.apply is forward and isinstance(params, TwoLayer) and jnp.ndim(y) == 1 and jnp.ndim(x) == 2
                and jnp.shape(x)[1] == params.w.shape[-1]):
            return two_layer_nll(params, x.T, y, self.sigma)
        return jnp.mean(self.per_sample(params, data))

    def per_sample(self, params, data) -> jax.Array:
        """ell_k(w) for every data point, (n,)."""
        x, y = data
        resid = y - _outputs(self.model, params, x, y)
        sq = resid ** 2 if resid.ndim == 1 else jnp.sum(resid.reshape(resid.shape[0], -1) ** 2, axis=-1)
        outputs = 1 if resid.ndim == 1 else int(np.prod(resid.shape[1:]))
        return sq / (2.0 * self.sigma ** 2) + outputs * jnp.log(self.sigma * jnp.sqrt(2.0 * jnp.pi))


def gaussian_loss(model: Model, sigma: float = 1.0) -> GaussianLoss:
    """The :class:`GaussianLoss` of a model, its arguments checked."""
    check_model(model)
    return GaussianLoss(model, float(check_number(sigma, "sigma", what="noise standard deviation")))


def check_regression_data(model: Model, params, x, y, name_x: str = "x", name_y: str = "y"):
    """(x, y) as arrays if they are a data set the model takes at params: x (n, ...) with n >= 1 that
    ``model.apply`` accepts, y (n,) or (n, n_out) matching its outputs, both finite; else ValueError naming
    them."""
    x, y = jnp.asarray(x), jnp.asarray(y)
    if x.ndim < 1 or x.shape[0] < 1:
        raise ValueError(f"{name_x}: expected a batch of inputs (n, n_in) with n >= 1, got shape {x.shape}")
    if y.ndim < 1 or y.shape[0] != x.shape[0]:
        raise ValueError(f"{name_y}: expected one output per input ({x.shape[0]} rows like {name_x}), got shape "
                         f"{y.shape}")
    try:
        out = jax.eval_shape(model.apply, params, x[:1])
    except Exception as err:                       # the model's own error, in one line
        raise ValueError(f"{name_x}: the model {model.name!r} does not take inputs of shape {x.shape[1:]} "
                         f"({str(err).splitlines()[0][:160]})") from None
    if int(np.prod(out.shape)) != int(np.prod(y.shape[1:], dtype=int)):
        raise ValueError(f"{name_y}: expected outputs like the model's, {out.shape[1:] or '(n,)'} per input, got "
                         f"shape {y.shape}")
    check_finite(x, name_x)
    check_finite(y, name_y)
    return x, y
