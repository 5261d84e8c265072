"""The Hessian of a loss at a point, its spectrum and its numerical rank, for any model: dense, and matrix-free.

    H(w) = d^2 L(w) / dw dw^T        (D, D),   L any loss of a parameter pytree and data (flat order)

At a true parameter of a regression model the Hessian of the population loss K is the Fisher information
(docs/design.md), so where the two are compared their ranks agree; the Hessian of L_n adds the residuals'
curvature.  A degenerate direction of H is a direction along which L is flat to second order, not
necessarily one along which it is flat (the learning coefficient, not the Hessian's rank, is what the free
energy sees: ``slt_relu.known_lambda``).

Numerical rank (docs/design.md): eigenvalues with |lambda| > rtol max |lambda|, rtol defaulting to
D eps(dtype) (NumPy's rule for the singular values of a symmetric matrix, |lambda|).

Matrix-free (for D too large for the dense (D, D) matrix): every function below sees H only through
Hessian-vector products, forward-over-reverse (``jax.jvp`` of ``jax.grad``, one gradient's cost each):

- :func:`hessian_vector_product`: v (D,) -> H v (D,).
- :func:`top_eigenvalues`: the k largest eigenvalues (and eigenvectors) by Lanczos's method (Lanczos 1950)
  with full reorthogonalisation, as PyHessian's (Yao et al. 2020).
- :func:`trace`: tr H by Hutchinson's estimator, E[v^T H v] over Rademacher v (Hutchinson 1989).
- :func:`spectral_density`: the spectral density (1/D) sum_j delta(t - lambda_j) by stochastic Lanczos
  quadrature (Ubaru, Chen & Saad 2017; Ghorbani, Krishnan & Xiao 2019); :func:`density_on_grid` smooths it.

References: C. Lanczos, J. Res. Natl. Bur. Stand. 45 (1950) 255; M. F. Hutchinson, Commun. Stat. Simul.
Comput. 18 (1989) 1059; S. Ubaru, J. Chen, Y. Saad, SIAM J. Matrix Anal. Appl. 38 (2017) 1075;
B. Ghorbani, S. Krishnan, Y. Xiao, ICML 2019 (arXiv:1901.10159); Z. Yao, A. Gholami, K. Keutzer,
M. Mahoney, PyHessian, IEEE BigData 2020 (arXiv:1912.07145).
"""
from __future__ import annotations

from functools import partial
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from ._validate import check_count, check_finite, check_number
from .pytree import unravel_fn

__all__ = ["density_on_grid", "hessian", "hessian_rank", "hessian_spectrum", "hessian_vector_product",
           "rank_of_symmetric", "spectral_density", "top_eigenvalues", "trace"]


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


# ----------------------------------------------------------------------------------------------------------------
# matrix-free: Hessian-vector products, Lanczos, Hutchinson, stochastic Lanczos quadrature


def _checked(loss_fn, params):
    """(flat (D,), unravel) of params once loss_fn is a function and params finite floating numbers, D >= 1."""
    if not callable(loss_fn):
        raise TypeError(f"loss_fn: expected a function loss_fn(params, data), got {type(loss_fn).__name__}")
    check_finite(params, "params")
    flat, unravel = unravel_fn(params)
    if not jnp.issubdtype(flat.dtype, jnp.floating) or flat.size == 0:
        got = f"{flat.dtype} arrays" if flat.size else "no numbers"
        raise ValueError(f"params: expected a pytree of floating-point arrays (D >= 1 numbers), got {got}")
    return flat, unravel


def _checked_key(key):
    """A typed PRNG key from a single key (typed, or uint32 key data); TypeError naming ``key``."""
    from .sampling import check_keys
    return jax.random.wrap_key_data(check_keys(key, "key", batch_ndim=0))


def _checked_steps(value, name: str, D: int) -> int:
    """value as an int in [1, D]; else ValueError naming it."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or not 1 <= value <= D:
        raise ValueError(f"{name}: expected an integer in [1, {D}] (D, the number of parameters), got {value!r}")
    return int(value)


def _hvp_of(loss_fn, unravel, flat, data):
    """v -> H v at flat, forward-over-reverse (traced inside the caller's jit)."""
    grad = jax.grad(lambda w: loss_fn(unravel(w), data))
    return lambda v: jax.jvp(grad, (flat,), (v.astype(flat.dtype),))[1]


@partial(jax.jit, static_argnums=(0, 1))
def _hvp(loss_fn, unravel, flat, data, v):
    return _hvp_of(loss_fn, unravel, flat, data)(v)


def hessian_vector_product(loss_fn: Callable, params, data) -> Callable[[jax.Array], jax.Array]:
    """The map v -> H v of the Hessian of loss_fn at params, without forming H (forward-over-reverse).

        H v = d/dt grad_w L(w + t v) at t = 0        (``jax.jvp`` of ``jax.grad``: one gradient's cost)

    Args:
        loss_fn: L(params, data) -> scalar, a JAX function (hashable: it is a static argument of the compiled program).
        params: the point, a parameter pytree (D numbers in all).
        data: what loss_fn takes as its data (any pytree; None for a loss without data).

    Returns:
        a function v (D,) -> H v (D,), both in the parameters' flat order (``slt_relu.pytree.unravel_fn``, as
        :func:`hessian`'s rows); jitted, and it may be used under ``jax.jit`` and ``jax.vmap``.
    """
    flat, unravel = _checked(loss_fn, params)
    D = flat.size

    def hvp(v):
        if jnp.shape(v) != (D,):
            raise ValueError(f"v: expected a vector of shape ({D},) (the flat parameters), got shape {jnp.shape(v)}")
        return _hvp(loss_fn, unravel, flat, data, jnp.asarray(v))
    return hvp


def _normalised(v):
    n = jnp.linalg.norm(v)
    return v / jnp.where(n > 0, n, 1)


def _lanczos(matvec, v0, m: int, key):
    """m steps of Lanczos from v0 (unit, (D,)) with full reorthogonalisation (two Gram-Schmidt passes against
    every basis vector so far).  Where the Krylov space closes (beta ~ 0: an invariant subspace found) it
    restarts from a random vector orthogonal to the basis and sets that beta to 0, so that T stays V H V^T and
    m = D gives H's whole spectrum.  Returns alpha (m,), beta (m - 1,), V (m, D) with orthonormal rows."""
    D, dtype = v0.shape[0], v0.dtype
    tol = float(np.sqrt(D) * np.finfo(dtype).eps)

    def orth(V, w):
        w = w - V.T @ (V @ w)
        return w - V.T @ (V @ w)

    def step(j, carry):
        V, alpha, beta, v, v_prev, b_prev, scale = carry
        V = V.at[j].set(v)
        w = matvec(v)
        a = jnp.vdot(v, w)
        w = orth(V, w - a * v - b_prev * v_prev)
        b = jnp.linalg.norm(w)
        scale = jnp.maximum(scale, jnp.abs(a) + b + b_prev)
        closed = b <= tol * scale
        fresh = lambda: _normalised(orth(V, jax.random.normal(jax.random.fold_in(key, j), (D,), dtype)))
        v_next = jax.lax.cond(closed, fresh, lambda: w / jnp.where(closed, 1, b))
        b = jnp.where(closed, 0, b)
        return V, alpha.at[j].set(a), beta.at[j].set(b), v_next, v, b, scale

    zero = jnp.zeros((), dtype)
    init = (jnp.zeros((m, D), dtype), jnp.zeros(m, dtype), jnp.zeros(m, dtype), v0, jnp.zeros_like(v0), zero, zero)
    V, alpha, beta = jax.lax.fori_loop(0, m, step, init)[:3]
    return alpha, beta[:-1], V


def _tridiagonal_eigh(alpha, beta):
    """Eigenvalues (ascending) and eigenvectors (columns) of the tridiagonal T = diag(alpha) + offdiag(beta)."""
    T = jnp.diag(alpha) + jnp.diag(beta, 1) + jnp.diag(beta, -1)
    return jnp.linalg.eigh(T)


@partial(jax.jit, static_argnums=(0, 1, 5, 6, 7))
def _top(loss_fn, unravel, flat, data, key, m, k, vectors):
    start_key, restart_key = jax.random.split(key)
    v0 = _normalised(jax.random.normal(start_key, flat.shape, flat.dtype))
    alpha, beta, V = _lanczos(_hvp_of(loss_fn, unravel, flat, data), v0, m, restart_key)
    theta, S = _tridiagonal_eigh(alpha, beta)
    values = theta[::-1][:k]
    return (values, S[:, ::-1][:, :k].T @ V) if vectors else (values, None)


def top_eigenvalues(loss_fn: Callable, params, data, k: int, key, *, num_iters: int | None = None,
                    return_vectors: bool = False):
    """The k largest eigenvalues of the Hessian of loss_fn at params, by Lanczos's method (Lanczos 1950).

    m = min(D, max(2k + 20, num_iters)) Lanczos steps from a random unit vector v_1, each with one
    Hessian-vector product (:func:`hessian_vector_product`) and full reorthogonalisation, build an orthonormal
    basis V = (v_1, ..., v_m) of the Krylov space and the tridiagonal T = V^T H V (alpha_j on the diagonal,
    beta_j beside it); the eigenvalues of T (Ritz values) approximate H's extreme eigenvalues, the largest first
    and fastest, and the Ritz vectors V s_j (s_j T's eigenvectors) its eigenvectors.  Where the Krylov space is
    invariant (beta_j = 0) the iteration restarts from a random vector orthogonal to V, so that m = D gives
    every eigenvalue of H, multiple ones included, to rounding.  As PyHessian's (Yao et al. 2020).

    Args:
        loss_fn: L(params, data) -> scalar, a JAX function (hashable: a static argument of the compiled program).
        params: the point, a parameter pytree (D numbers in all).
        data: loss_fn's data (any pytree; None for a loss without data).
        k: how many eigenvalues, an integer in [1, D].
        key: a PRNG key (the starting vector and any restart).
        num_iters: the number of Lanczos steps if more than 2k + 20 (at most D are taken); None: 2k + 20.
        return_vectors: also return the Ritz vectors.

    Returns:
        (k,) the eigenvalues, largest (algebraically) first, a NumPy array; with ``return_vectors`` the pair
        (eigenvalues (k,), eigenvectors (k, D)), each row a unit vector in the parameters' flat order.
    """
    flat, unravel = _checked(loss_fn, params)
    D = flat.size
    k = _checked_steps(k, "k", D)
    key = _checked_key(key)
    iters = 0 if num_iters is None else check_count(num_iters, "num_iters")
    m = min(D, max(2 * k + 20, iters))
    values, vectors = _top(loss_fn, unravel, flat, data, key, m, k, bool(return_vectors))
    return (np.asarray(values), np.asarray(vectors)) if return_vectors else np.asarray(values)


@partial(jax.jit, static_argnums=(0, 1, 5))
def _quadratic_forms(loss_fn, unravel, flat, data, keys, chunk):
    hvp = _hvp_of(loss_fn, unravel, flat, data)

    def one(key):
        v = jax.random.rademacher(key, flat.shape, flat.dtype)
        return jnp.vdot(v, hvp(v))
    return jax.lax.map(one, keys, batch_size=chunk)


def trace(loss_fn: Callable, params, data, key, num_samples: int = 100) -> tuple[float, float]:
    """Hutchinson's estimate of the trace of the Hessian of loss_fn at params (Hutchinson 1989).

        tr H = E[v^T H v],  v_i = +-1 independently (Rademacher);   estimate = (1/N) sum_s v_s^T H v_s,
        standard error = sd_s(v_s^T H v_s) / sqrt(N)

    Var(v^T H v) = 2 sum_(i != j) H_ij^2, the least among probes of independent zero-mean unit-variance entries
    (Hutchinson 1989): for a diagonal H the estimate is exact.  The N Hessian-vector products run vmapped, 32 at a time.

    Args:
        loss_fn: L(params, data) -> scalar, a JAX function (hashable).
        params: the point, a parameter pytree (D numbers in all).
        data: loss_fn's data.
        key: a PRNG key (the probes).
        num_samples: N, the number of probes, >= 2.

    Returns:
        (estimate, standard_error), floats.
    """
    flat, unravel = _checked(loss_fn, params)
    key = _checked_key(key)
    n = check_count(num_samples, "num_samples", minimum=2)
    q = np.asarray(_quadratic_forms(loss_fn, unravel, flat, data, jax.random.split(key, n), min(n, 32)))
    return float(np.mean(q)), float(np.std(q, ddof=1) / np.sqrt(n))


@partial(jax.jit, static_argnums=(0, 1, 5))
def _slq(loss_fn, unravel, flat, data, keys, m):
    hvp = _hvp_of(loss_fn, unravel, flat, data)

    def one(key):
        start_key, restart_key = jax.random.split(key)
        v0 = jax.random.rademacher(start_key, flat.shape, flat.dtype) / np.sqrt(flat.size)
        theta, S = _tridiagonal_eigh(*_lanczos(hvp, v0, m, restart_key)[:2])
        return theta, S[0] ** 2
    return jax.lax.map(one, keys)                 # one probe at a time: one (m, D) basis in memory


def spectral_density(loss_fn: Callable, params, data, key, num_probes: int = 10, num_steps: int = 30):
    """The spectral density of the Hessian of loss_fn at params by stochastic Lanczos quadrature.

        phi(t) = (1/D) sum_j delta(t - lambda_j)  ~  (1/P) sum_p sum_j w_pj delta(t - theta_pj)

    For each probe v_p = z_p / sqrt(D), z_p Rademacher, m = num_steps Lanczos steps (as in
    :func:`top_eigenvalues`) from v_p give T_p; its eigenvalues theta_pj are the nodes and the squared first
    components of its unit eigenvectors, w_pj = (s_pj)_1^2, the weights (summing to 1) of the m-point Gauss
    quadrature of the spectral measure of v_p: v_p^T f(H) v_p = sum_j w_pj f(theta_pj) for every polynomial
    f of degree < 2m, and E[v_p^T f(H) v_p] = tr f(H) / D.  So D (1/P) sum_pj w_pj theta_pj^q estimates
    tr(H^q) for q < 2m.  Ubaru, Chen & Saad 2017; Ghorbani, Krishnan & Xiao 2019; PyHessian (Yao et al.
    2020).  A restart (the Krylov space closed before m steps: H has fewer distinct eigenvalues, as seen from
    v_p) adds nodes of weight 0.

    Args:
        loss_fn: L(params, data) -> scalar, a JAX function (hashable).
        params: the point, a parameter pytree (D numbers in all).
        data: loss_fn's data.
        key: a PRNG key (the probes).
        num_probes: P, the number of probes, >= 1.
        num_steps: m, Lanczos steps per probe, an integer in [1, D].

    Returns:
        tuple: the nodes and the weights, two NumPy arrays of shape (P, m): each probe's nodes (ascending) and
        weights.
    """
    flat, unravel = _checked(loss_fn, params)
    key = _checked_key(key)
    P = check_count(num_probes, "num_probes")
    m = _checked_steps(num_steps, "num_steps", flat.size)
    nodes, weights = _slq(loss_fn, unravel, flat, data, jax.random.split(key, P), m)
    return np.asarray(nodes), np.asarray(weights)


def density_on_grid(nodes, weights, grid, sigma: float) -> np.ndarray:
    """The spectral density of :func:`spectral_density`'s quadrature, smoothed by a Gaussian, on a grid.

        phi_sigma(t) = (1/P) sum_p sum_j w_pj N(t; theta_pj, sigma^2)

    a probability density in t (it integrates to 1 when the grid covers the nodes by a few sigma).

    Args:
        nodes: (P, m) theta_pj, or (m,) for one probe.
        weights: w_pj, of nodes' shape.
        grid: (G,) the points t.
        sigma: the smoothing standard deviation, > 0.

    Returns:
        (G,) phi_sigma on the grid, a NumPy array.
    """
    nodes, weights, grid = (np.asarray(a, dtype=float) for a in (nodes, weights, grid))
    nodes, weights = np.atleast_2d(nodes), np.atleast_2d(weights)
    if nodes.ndim != 2 or nodes.size == 0 or not np.all(np.isfinite(nodes)):
        raise ValueError(f"nodes: expected a non-empty (P, m) array of finite numbers, got shape {nodes.shape}")
    if weights.shape != nodes.shape or not np.all(np.isfinite(weights)):
        raise ValueError(f"weights: expected finite numbers of nodes' shape {nodes.shape}, got shape {weights.shape}")
    if grid.ndim != 1 or not np.all(np.isfinite(grid)):
        raise ValueError(f"grid: expected a 1-D array of finite numbers, got shape {grid.shape}")
    sigma = float(check_number(sigma, "sigma", what="smoothing width"))
    z = (grid[:, None, None] - nodes[None]) / sigma
    kernel = np.exp(-0.5 * z ** 2) / (sigma * np.sqrt(2 * np.pi))
    return np.sum(weights[None] * kernel, axis=(1, 2)) / nodes.shape[0]
