"""The Fisher information of the toy model of superposition, exactly.

    F(w) = E_x[J(x)^T J(x)],   J(x) = d f(x; w) / d w   (c, D),  D = (r + 1) c,

for f(x; W, b) = ReLU(W^T W x + b) and x = mu e_i (i uniform over the c features, mu ~ U[0, 1]).
With G = W^T W the output j at mu e_i is ReLU(mu G_ji + b_j), whose gradient is
1(mu G_ji + b_j > 0) (mu dG_ji/dw + db_j/dw), so

    F = (1/c) sum_i sum_j int_{lo_ji}^{hi_ji} (mu g_ji + e_j)(mu g_ji + e_j)^T dmu,
    g_ji = dG_ji / dw (D,),  e_j = db_j / dw (D,),

[lo_ji, hi_ji] the interval of [0, 1] where mu G_ji + b_j > 0 (``model.active_interval``).  The
integrand is a polynomial of degree 2 in mu on that interval, so the two-point Gauss-Legendre rule on
it is exact: F = A^T A with A (2 c^2, D) the rows sqrt(w_q / c) (mu_q g_ji + e_j).  At a point where a
pre-activation vanishes on a whole interval (G_ji = b_j = 0) the ReLU's derivative there is taken as
0 (the convention 1(z > 0)).

This is the Fisher information of the regression model x ~ N(f(x; w), sigma^2 I) with sigma = 1;
the loss L = E ||x - f||^2 corresponds to sigma^2 = 1/2, whose Fisher information is 2 F (the same
rank).  Rank (docs/design.md): eigenvalues s_k^2 of F (s_k the singular values of A) above
rtol * s_max^2, rtol = D eps(dtype) unless given.

References:
    Chen, Lau, Mendel, Wei, Murfet 2023 (arXiv 2310.06301); Watanabe 2009 (the Fisher information of
    a regression model).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..fisher import default_rtol
from ..models.tms import TMSParams, active_interval, check_params, from_flat, to_flat

__all__ = ["fisher_information", "fisher_rank", "fisher_spectrum", "weighted_jacobian"]

_GL2 = 1.0 / np.sqrt(3.0)          # the two-point Gauss-Legendre nodes on [-1, 1] are -+ 1/sqrt(3), weights 1


@jax.jit
def weighted_jacobian(params: TMSParams) -> jax.Array:
    """A (2 c^2, D) with F = A^T A exactly (module docstring): rows sqrt(w_q / c) (mu_q g_ji + e_j)
    at the two Gauss-Legendre nodes of each active interval [lo_ji, hi_ji]."""
    W, b = params
    r, c = W.shape
    flat = to_flat(params)
    gram = lambda w: (lambda p: p.W.T @ p.W)(from_flat(w, c, r))
    dG = jax.jacfwd(gram)(flat)                                     # (c, c, D): dG[j, i] = g_ji
    db = jnp.concatenate([jnp.zeros((c, r * c), flat.dtype), jnp.eye(c, dtype=flat.dtype)], 1)   # (c, D)
    G = W.T @ W
    lo, hi = active_interval(G, b[:, None])                         # (c, c) [j, i]
    mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo)
    nodes = jnp.stack([mid - half * _GL2, mid + half * _GL2])       # (2, c, c)
    weight = jnp.sqrt(half / c)                                     # weights half each, the 1/c of the mean
    rows = weight[None, :, :, None] * (nodes[..., None] * dG[None] + db[None, :, None, :])   # (2, c, c, D)
    return rows.reshape(-1, flat.shape[0])


def fisher_information(params: TMSParams) -> jax.Array:
    """The exact Fisher information of the TMS (module docstring).

        F(w) = E_x[J(x)^T J(x)] = (1/c) sum_i sum_j int_{lo_ji}^{hi_ji} (mu g_ji + e_j)(mu g_ji + e_j)^T dmu

    Args:
        params: one ``TMSParams`` (W (r, c), b (c,)).

    Returns:
        (D, D) F in the flat order (W row-major, then b), D = (r + 1) c.
    """
    A = weighted_jacobian(check_params(params))
    return A.T @ A


def fisher_spectrum(params: TMSParams) -> np.ndarray:
    """The eigenvalues of F(w), descending, as the squared singular values of A (module docstring).

    Args:
        params: one ``TMSParams``.

    Returns:
        (D,) float64 NumPy eigenvalues.
    """
    A = np.asarray(weighted_jacobian(check_params(params)), np.float64)
    s = np.linalg.svd(A, compute_uv=False)
    return np.concatenate([s ** 2, np.zeros(A.shape[1] - s.size)])


def fisher_rank(params: TMSParams, rtol: float | None = None) -> int:
    """The numerical rank of F(w): eigenvalues above rtol * (largest eigenvalue).

    Args:
        params: one ``TMSParams``.
        rtol: the relative threshold (default D eps(dtype), NumPy's rule; docs/design.md).

    Returns:
        rank(F), an int in [0, D].
    """
    check_params(params)
    D = int(np.size(params.W) + np.size(params.b))
    rtol = default_rtol(D, params.W.dtype) if rtol is None else float(rtol)
    if not rtol >= 0:
        raise ValueError(f"rtol: expected a number >= 0, got {rtol!r}")
    ev = fisher_spectrum(params)
    return int(np.sum(ev > rtol * ev[0])) if ev[0] > 0 else 0
