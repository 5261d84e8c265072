"""Fisher information, its rank, and the accounting of its null directions (DSLT3 Appendix 1).

    I(w) = E_x[grad_w f(x, w) grad_w f(x, w)^T] / sigma^2                       (D, D)

equal to the Hessian of K at true parameters.  Empirical version: the same with the
empirical rule ``Quadrature.from_samples(x)``.

Scaling generator of node i (DSLT3 Appendix 1): the flat vector v_i with w_i in node
i's w slots, b_i in its b slot, -q_i in its q slot.  grad_w f . v_i = 0 wherever f is
differentiable, so every v_i is a null direction of I(w).  Null directions beyond the
span of the generators ("excess") come from degenerate nodes (q_i = 0 or w_i = 0),
nodes sharing an activation boundary, and nodes inactive (or linear) on a bounded box.

Numerical rank (docs/design.md): eigenvalues of I above rtol * lambda_max with rtol
defaulting to D * eps(dtype).  Eigenvalues are computed as the squared singular
values of A = sqrt(weights) J / sigma (J: (N, D) per-point gradients), which is I = A^T A
without the rounding of forming I.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .inputs import Quadrature, check_inputs, expectation_rule
from .loss import check_sigma
from .models.base import check_model
from .network import TwoLayer, check_finite, check_params, num_params, scaling_generators

__all__ = ["NullAccounting", "default_rtol", "empirical_fisher_information", "feature_jacobian", "fisher_information",
           "fisher_null_space", "fisher_rank", "fisher_spectrum", "null_accounting", "rank_bound", "rank_from_spectrum",
           "weighted_jacobian"]


def feature_jacobian(params: TwoLayer, x: jax.Array) -> jax.Array:
    """grad_w f(x, w) in the flat order, in closed form (DSLT3 Appendix 1); x: (n_in,) -> (D,).

    d f / d w_ik = q_i x_k 1(a_i > 0),  d f / d b_i = q_i 1(a_i > 0),
    d f / d q_i = relu(a_i),  d f / d c = 1,  with a_i = <w_i, x> + b_i.
    """
    a = params.w @ x + params.b
    on = (a > 0).astype(a.dtype)
    return jnp.concatenate([
        ((params.q * on)[:, None] * x[None, :]).reshape(-1),
        params.q * on,
        jax.nn.relu(a),
        jnp.ones((1,), a.dtype),
    ])


def _free_index(free, D):
    """The free coordinates as a static tuple of indices (None: all)."""
    if free is None:
        return None
    free = np.asarray(free)
    if free.dtype != bool or free.shape != (D,):
        raise ValueError(f"free: expected a boolean mask of shape ({D},), got {free.dtype} {free.shape}")
    return tuple(int(i) for i in np.flatnonzero(free))


@partial(jax.jit, static_argnames=("free_idx",))
def _weighted_jacobian(params, inputs, sigma, free_idx):
    rule = expectation_rule(inputs, params)
    J = jax.vmap(feature_jacobian, (None, 0))(params, rule.points)
    if free_idx is not None:
        J = J[:, np.array(free_idx, dtype=int)]
    return jnp.sqrt(jnp.maximum(rule.weights, 0.0))[:, None] * J / sigma


def weighted_jacobian(params, inputs, sigma=1.0, free=None, *, model=None) -> jax.Array:
    """A = sqrt(weights) J / sigma, (N, D) (or (N, k) on the free coordinates), so that I = A^T A.

    J[k] = grad_w f(x_k, w) at the rule's points x_k (the empirical rule gives the empirical Fisher); a model
    with several outputs has a row per point and output.

    Args:
        params: a TwoLayer (``model`` None: J in closed form), or the parameters of ``model``.
        inputs: UniformBox, Gaussian or Quadrature for a TwoLayer; with ``model``, a Quadrature or the data's
            inputs x (n, ...) (the empirical Fisher, weights 1/n).
        sigma: the noise standard deviation, > 0.
        free: optional numpy bool (D,): the restricted model's free coordinates (k of them).
        model: a :class:`~slt_relu.models.Model` (J by forward-mode autodiff of its forward pass), or None.
    """
    check_sigma(sigma)
    if model is None:
        check_finite(check_params(params))
        check_inputs(inputs, params.n_in)
        return _weighted_jacobian(params, inputs, sigma, _free_index(free, num_params(params.width, params.n_in)))
    check_model(model)
    check_finite(model.structure.check(params))
    if isinstance(inputs, Quadrature):
        points, weights = inputs.points, inputs.weights
    else:
        points = jnp.asarray(check_finite(inputs, "inputs"))
        if points.ndim < 1 or points.shape[0] < 1:
            raise ValueError(f"inputs: expected a Quadrature or the inputs x (n, ...) with n >= 1, got shape "
                             f"{points.shape}")
        weights = jnp.full(points.shape[0], 1.0 / points.shape[0], points.dtype)
    return _model_jacobian(model, params, points, weights, sigma, _free_index(free, model.num_params))


@partial(jax.jit, static_argnames=("model", "free_idx"))
def _model_jacobian(model, params, points, weights, sigma, free_idx):
    flat = model.ravel(params)
    J = jax.jacfwd(lambda w: model.apply(model.unravel(w), points).reshape(points.shape[0], -1))(flat)   # (N, O, D)
    J = (jnp.sqrt(jnp.maximum(weights, 0.0))[:, None, None] * J / sigma).reshape(-1, flat.size)
    return J if free_idx is None else J[:, np.array(free_idx, dtype=int)]


def fisher_information(params, inputs, sigma=1.0, free=None, *, model=None) -> jax.Array:
    """The Fisher information matrix of the regression model.

        I(w) = E_q[grad f grad f^T] / sigma^2

    Args:
        params: TwoLayer w (D parameters), or the parameters of ``model``.
        inputs: UniformBox, Gaussian, or Quadrature (an empirical rule gives the empirical Fisher).
        sigma: the noise standard deviation, > 0.
        free: optional numpy bool (D,): the restricted model's free coordinates (k of them).
        model: any :class:`~slt_relu.models.Model` whose parameters params are; inputs then a Quadrature or
            the inputs x (n, ...) (:func:`weighted_jacobian`).

    Returns:
        (D, D) I(w); with ``free``, the (k, k) block of the restricted model.

    References:
        DSLT3 Appendix 1.
    """
    A = weighted_jacobian(params, inputs, sigma, free, model=model)
    return A.T @ A


def empirical_fisher_information(params, x: jax.Array, sigma=1.0, free=None, *, model=None) -> jax.Array:
    """I_n(w) = (1/n) sum_k grad f(x_k) grad f(x_k)^T / sigma^2; x: (n, n_in) -> (D, D)."""
    if model is not None:
        return fisher_information(params, x, sigma, free, model=model)
    return fisher_information(params, Quadrature.from_samples(x), sigma, free)


def default_rtol(D: int, dtype) -> float:
    """NumPy's rule: max(shape) * eps(dtype)."""
    return D * float(jnp.finfo(dtype).eps)


def fisher_spectrum(params, inputs, sigma=1.0, free=None, *, model=None) -> jax.Array:
    """The eigenvalues of I(w), descending.

    Computed as the squared singular values of A = sqrt(weights) J / sigma (module docstring).

    Args:
        params: TwoLayer w (D parameters), or the parameters of ``model``.
        inputs: UniformBox, Gaussian, or Quadrature (with ``model``: a Quadrature or the inputs x (n, ...)).
        sigma: the noise standard deviation, > 0.
        free: optional numpy bool (D,): the restricted model's free coordinates (k of them).
        model: a :class:`~slt_relu.models.Model` (any network), or None for a TwoLayer.

    Returns:
        (D,) eigenvalues (or (k,) with ``free``).
    """
    return _singular_values(weighted_jacobian(params, inputs, sigma, free, model=model)) ** 2


def rank_from_spectrum(spectrum: jax.Array, rtol=None) -> jax.Array:
    """#{lambda_j > rtol * lambda_max}; spectrum: (..., D) -> (...) int."""
    rtol = default_rtol(spectrum.shape[-1], spectrum.dtype) if rtol is None else rtol
    top = jnp.max(spectrum, axis=-1, keepdims=True)
    return jnp.sum(spectrum > rtol * top, axis=-1) * (top[..., 0] > 0)


def fisher_rank(params, inputs, sigma=1.0, rtol=None, free=None, *, model=None) -> jax.Array:
    """The numerical rank of I(w): the eigenvalues above rtol * lambda_max.

        rank = #{lambda_j > rtol * lambda_max}

    Args:
        params: TwoLayer w (D parameters), or the parameters of ``model``.
        inputs: UniformBox, Gaussian, or Quadrature (with ``model``: a Quadrature or the inputs x (n, ...)).
        sigma: the noise standard deviation, > 0.
        rtol: the relative tolerance; defaults to D * eps(dtype).
        free: optional numpy bool (D,): the restricted model's free coordinates (k of them).
        model: a :class:`~slt_relu.models.Model` (any network), or None for a TwoLayer.

    Returns:
        () the rank, an int array (jit/vmap friendly).
    """
    return rank_from_spectrum(fisher_spectrum(params, inputs, sigma, free, model=model), rtol)


class NullAccounting(NamedTuple):
    """Where every null direction of I(w) comes from.

        excess = nullity - generator_rank,  nullity = D - rank

    Attributes:
        num_params: D (or k free coordinates).
        rank: rank of I.
        nullity: D - rank.
        generator_rank: dim of the span of the scaling generators (those inside the free
            coordinates).
        excess: nullity - generator_rank (degenerate nodes, shared boundaries, nodes inactive or
            linear on a bounded box).
        generator_residuals: (d,) |I v_i| per node, NaN for a generator that leaves the free
            coordinates.
        spectrum: eigenvalues of I, descending.
        null_basis: (D, nullity) orthonormal.
        excess_basis: (D, excess) orthonormal basis of the null space orthogonal to the generators.

    References:
        DSLT3 Appendix 1.
    """

    num_params: int
    rank: int
    nullity: int
    generator_rank: int
    excess: int
    generator_residuals: np.ndarray
    spectrum: np.ndarray
    null_basis: np.ndarray
    excess_basis: np.ndarray


def _triangular_factor(A):
    """R of A = QR for a tall A (N, k) (zero-padded to k rows if N < k): same singular values and
    right singular vectors as A, without an (N, N) factor."""
    if A.shape[0] < A.shape[1]:
        A = jnp.concatenate([A, jnp.zeros((A.shape[1] - A.shape[0], A.shape[1]), A.dtype)])
    return jnp.linalg.qr(A, mode="r")


def _singular_values(A):
    return jnp.linalg.svd(_triangular_factor(A), compute_uv=False)


@jax.jit
def _svd_values_vectors(A):
    _, s, vt = jnp.linalg.svd(_triangular_factor(A))
    return s, vt


def null_accounting(params, inputs, sigma=1.0, rtol=None, free=None, *, model=None) -> NullAccounting:
    """Null directions of I(w) split into the span of the scaling generators and the excess.

    With ``free``, the accounting of the restricted model: a generator counts only if its orbit
    stays in the restricted space (zero on every fixed coordinate).

    Args:
        params: one TwoLayer w (D parameters), or the parameters of ``model``.
        inputs: UniformBox, Gaussian, or Quadrature (with ``model``: a Quadrature or the inputs x (n, ...)).
        sigma: the noise standard deviation, > 0.
        rtol: the relative tolerance of the rank; defaults to D * eps(dtype).
        free: optional numpy bool (D,): the restricted model's free coordinates (k of them).
        model: a :class:`~slt_relu.models.Model` (any network), or None for a TwoLayer.

    Returns:
        NullAccounting: the rank, nullity, generator rank, excess and their bases.

    References:
        DSLT3 Appendix 1.
    """
    A = weighted_jacobian(params, inputs, sigma, free, model=model)
    if not np.all(np.isfinite(np.asarray(A))):
        raise ValueError("params: expected parameters at which the Fisher information is finite, got a Jacobian with "
                         "inf or NaN (a weight so large that its products overflow)")
    k = A.shape[1]
    s, vt = _svd_values_vectors(A)
    spectrum = np.asarray(s) ** 2
    rtol = default_rtol(k, spectrum.dtype) if rtol is None else rtol
    rank = int(rank_from_spectrum(jnp.asarray(spectrum), rtol))
    null_basis = np.asarray(vt).T[:, rank:]

    G = np.asarray(scaling_generators(params) if model is None else model.scaling_generators(params))
    idx = _free_index(free, G.shape[1])
    idx = None if idx is None else np.array(idx, dtype=int)
    inside = np.ones(G.shape[0], dtype=bool)
    if idx is not None:
        fixed = np.setdiff1d(np.arange(G.shape[1]), idx)
        norms = np.linalg.norm(G, axis=1)
        inside = np.linalg.norm(G[:, fixed], axis=1) <= 1e3 * np.finfo(G.dtype).eps * np.maximum(norms, 1e-300)
        G = G[:, idx]
    I = np.asarray(A.T @ A)
    residuals = np.where(inside, np.linalg.norm(G @ I, axis=1), np.nan)
    G_in = G[inside]
    if G_in.size:
        gu, gs, _ = np.linalg.svd(G_in.T, full_matrices=False)
        g_rank = int(np.sum(gs > default_rtol(k, G.dtype) * gs.max())) if gs.max() > 0 else 0
        gen_basis = gu[:, :g_rank]
    else:
        g_rank, gen_basis = 0, np.zeros((k, 0))
    nullity = k - rank
    projected = null_basis - gen_basis @ (gen_basis.T @ null_basis)
    if projected.size:
        pu, ps, _ = np.linalg.svd(projected, full_matrices=False)
        excess_basis = pu[:, ps > 0.5]
    else:
        excess_basis = np.zeros((k, 0))
    return NullAccounting(
        num_params=k, rank=rank, nullity=nullity, generator_rank=g_rank, excess=nullity - g_rank,
        generator_residuals=residuals, spectrum=spectrum, null_basis=null_basis, excess_basis=excess_basis,
    )


def fisher_null_space(params, inputs, sigma=1.0, rtol=None, free=None, *, model=None) -> np.ndarray:
    """Orthonormal basis of the null space of I(w), (D, D - rank) (or (k, k - rank) with ``free``)."""
    return null_accounting(params, inputs, sigma, rtol, free, model=model).null_basis


def rank_bound(width: int, n_in: int) -> int:
    """D - d: the rank of I(w) at generic parameters (one null direction per scaling orbit)."""
    return num_params(width, n_in) - width
