"""Symmetries of the toy model of superposition as operations.

f(x; W, b) = ReLU(W^T W x + b) depends on W only through the Gram matrix G = W^T W, so

    rotate(params, R)             W -> R W for R in O(r) (rotations and reflections of the hidden space):
                                  G, hence f(x) for every x, L and L_n, do not change;
    permute_features(params, p)   feature i of the result is feature p[i]: W -> W[:, p], b -> b[p];
                                  f(x[p]) = f(x)[p], so L does not change and L_n does not change when
                                  the data are permuted with it (:func:`permute_inputs`).

The population loss is invariant under both (the input distribution is invariant under feature
permutations); an empirical loss on a fixed data set is invariant under O(r) and equivariant under
permutations.  The tangent of the rotation orbit at w (r = 2), :func:`rotation_generator`, is a null
direction of the Hessian of L and of the Fisher information at every w.

References:
    Chen, Lau, Mendel, Wei, Murfet 2023 (arXiv 2310.06301), Section 2 (the O(r) and permutation
    symmetries of the TMS).
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..models.tms import TMSParams, check_params

__all__ = ["permute_features", "permute_inputs", "reflection", "rotate", "rotation", "rotation_generator"]


def rotation(theta) -> jnp.ndarray:
    """The rotation of the plane by theta, [[cos theta, -sin theta], [sin theta, cos theta]].

    Args:
        theta: the angle (radians).

    Returns:
        (2, 2) the rotation matrix.
    """
    c, s = jnp.cos(theta), jnp.sin(theta)
    return jnp.array([[c, -s], [s, c]])


def reflection(phi) -> jnp.ndarray:
    """The reflection of the plane across the line at angle phi, [[cos 2 phi, sin 2 phi], [sin 2 phi, -cos 2 phi]].

    Args:
        phi: the angle of the mirror line (radians).

    Returns:
        (2, 2) the reflection matrix (determinant -1).
    """
    c, s = jnp.cos(2 * phi), jnp.sin(2 * phi)
    return jnp.array([[c, s], [s, -c]])


def rotate(params: TMSParams, R, *, atol: float | None = None) -> TMSParams:
    """The O(r) action on the hidden space: (W, b) -> (R W, b).

        G = W^T W -> W^T R^T R W = G,  so f(x; R W, b) = f(x; W, b).

    Args:
        params: one ``TMSParams`` (W (r, c)).
        R: (r, r) an orthogonal matrix (rotation or reflection).
        atol: the tolerance of the check |R^T R - I| <= atol (default 100 eps(dtype)).

    Returns:
        TMSParams(R W, b).

    Raises:
        ValueError: R not (r, r) or not orthogonal.
    """
    check_params(params)
    R = jnp.asarray(R, dtype=params.W.dtype)
    r = params.W.shape[0]
    if R.shape != (r, r):
        raise ValueError(f"R: expected an orthogonal ({r}, {r}) matrix, got shape {R.shape}")
    tol = 100 * float(jnp.finfo(R.dtype).eps) if atol is None else atol
    err = np.max(np.abs(np.asarray(R.T @ R) - np.eye(r)))
    if not err <= tol:
        raise ValueError(f"R: expected an orthogonal matrix, |R^T R - I| = {err:.3g} > {tol:.3g}")
    return TMSParams(R @ params.W, params.b)


def _perm(perm, c: int) -> np.ndarray:
    p = np.asarray(perm)
    if p.shape != (c,) or p.dtype.kind not in "iu" or sorted(p.tolist()) != list(range(c)):
        raise ValueError(f"perm: expected a permutation of 0..{c - 1}, got {np.asarray(perm).tolist()}")
    return p


def permute_features(params: TMSParams, perm) -> TMSParams:
    """Relabel the features: feature i of the result is feature perm[i].

        W -> W[:, perm],  b -> b[perm];   f(x[perm]; result) = f(x; params)[perm].

    Args:
        params: one ``TMSParams`` (W (r, c), b (c,)).
        perm: a permutation of 0..c-1.

    Returns:
        ``TMSParams(W[:, perm], b[perm])``.

    Raises:
        ValueError: perm not a permutation of 0..c-1.
    """
    check_params(params)
    p = _perm(perm, params.W.shape[-1])
    return TMSParams(params.W[:, p], params.b[p])


def permute_inputs(x, perm) -> jnp.ndarray:
    """The inputs with their features relabelled as :func:`permute_features` does.

    Args:
        x: (..., c) inputs.
        perm: a permutation of 0..c-1.

    Returns:
        (..., c) x[..., perm].
    """
    x = jnp.asarray(x)
    return x[..., _perm(perm, x.shape[-1])]


def rotation_generator(params: TMSParams) -> jnp.ndarray:
    """The tangent of the rotation orbit, d/dtheta of (R_theta W, b) at theta = 0, in the flat order (r = 2).

        v = (J W, 0),  J = [[0, -1], [1, 0]]:   v[W[0, i]] = -W[1, i],  v[W[1, i]] = W[0, i],  v[b] = 0.

    Args:
        params: one ``TMSParams`` with r = 2.

    Returns:
        (3 c,) v (zero where W = 0).
    """
    check_params(params)
    if params.W.shape[0] != 2:
        raise ValueError(f"params: expected r = 2 hidden dimensions, got W of shape {params.W.shape}")
    W = params.W
    return jnp.concatenate([-W[1], W[0], jnp.zeros_like(params.b)])
