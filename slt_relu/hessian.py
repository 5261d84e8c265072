"""The Hessian of a loss at a point, its spectrum and its numerical rank, for any model (dense).

    H(w) = d^2 L(w) / dw dw^T        (D, D),   L any loss of a parameter pytree and data (flat order)

At a true parameter of a regression model the Hessian of the population loss K is the Fisher information
(docs/design.md), so where the two are compared their ranks agree; the Hessian of L_n adds the residuals'
curvature.  A degenerate direction of H is a direction along which L is flat to second order, not
necessarily one along which it is flat (the learning coefficient, not the Hessian's rank, is what the free
energy sees: ``slt_relu.known_lambda``).

Numerical rank (docs/design.md): eigenvalues with |lambda| > rtol max |lambda|, rtol defaulting to
D eps(dtype) (NumPy's rule for the singular values of a symmetric matrix, |lambda|).
"""
from __future__ import annotations

from functools import partial
from typing import Callable

import jax
import numpy as np

from ._validate import check_finite
from .pytree import unravel_fn

__all__ = ["hessian", "hessian_rank", "hessian_spectrum", "rank_of_symmetric"]


def hessian(loss_fn: Callable, params, data) -> jax.Array:
    """The Hessian of loss_fn(params, data) in the parameters' flat order (``slt_relu.pytree``).

    Args:
        loss_fn: L(params, data) -> scalar, a JAX function (e.g. ``slt_relu.models.GaussianLoss(model, sigma)``).
        params: the point, a parameter pytree (D numbers in all).
        data: what loss_fn takes as its data (any pytree; None for a loss without data).

    Returns:
        (D, D) H, symmetric.
    """
    if not callable(loss_fn):
        raise TypeError(f"loss_fn: expected a function loss_fn(params, data), got {type(loss_fn).__name__}")
    check_finite(params, "params")
    flat, unravel = unravel_fn(params)
    return _hessian(loss_fn, unravel, flat, data)


@partial(jax.jit, static_argnums=(0, 1))
def _hessian(loss_fn, unravel, flat, data):
    H = jax.hessian(lambda w: loss_fn(unravel(w), data))(flat)
    return 0.5 * (H + H.T)


def hessian_spectrum(loss_fn: Callable, params, data) -> np.ndarray:
    """The eigenvalues of the Hessian of loss_fn at params (:func:`hessian`), descending.

    Args:
        loss_fn: L(params, data) -> scalar.
        params: the point, a parameter pytree.
        data: loss_fn's data.

    Returns:
        (D,) the eigenvalues, a NumPy array.
    """
    return np.linalg.eigvalsh(np.asarray(hessian(loss_fn, params, data)))[::-1]


def rank_of_symmetric(spectrum, rtol: float | None = None) -> int:
    """#{|lambda_j| > rtol max |lambda|} of a symmetric matrix's eigenvalues (D,), rtol default D eps(dtype)."""
    spectrum = np.asarray(spectrum)
    rtol = spectrum.size * float(np.finfo(spectrum.dtype).eps) if rtol is None else float(rtol)
    top = np.max(np.abs(spectrum)) if spectrum.size else 0.0
    return int(np.sum(np.abs(spectrum) > rtol * top)) if top > 0 else 0


def hessian_rank(loss_fn: Callable, params, data, rtol: float | None = None) -> int:
    """The numerical rank of the Hessian of loss_fn at params (module docstring).

        rank = #{|lambda_j| > rtol max |lambda|}

    Args:
        loss_fn: L(params, data) -> scalar.
        params: the point, a parameter pytree.
        data: loss_fn's data.
        rtol: the relative tolerance; defaults to D eps(dtype).

    Returns:
        the rank, an int.
    """
    return rank_of_symmetric(hessian_spectrum(loss_fn, params, data), rtol)
