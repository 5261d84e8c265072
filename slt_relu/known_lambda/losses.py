"""The losses of the families whose learning coefficient is known (``slt_relu.known_lambda.values``), hashable so
that jit treats them as static: the population losses K (:class:`PolynomialLoss`, :class:`ProductLoss`), a data
set's loss from its sufficient statistics (:class:`RegressionLoss`, with :func:`regression_statistics` drawing
them) and the normal crossing's per-sample regression loss (:class:`MonomialLoss`).  A family with its sizes gives
its exact (lambda, m) and parameter count (:func:`family_lambda`) and its loss K with the regression that draws
its data sets (:func:`family_loss`).

    family            K(w)                                   (lambda, m)
    normal_crossing   prod_i w_i^(2 k_i)                     values.normal_crossing(k, "product")
    sum               sum_i w_i^(2 k_i)                      values.normal_crossing(k, "sum")
    regular           w^T H w / 2, H = A A^T / d + I         values.regular(d)
    reduced_rank      |B A - C0|_F^2 / 2, C0 of rank r       values.reduced_rank
    deep_linear       |W_L ... W_1 - C0|_F^2 / 2             values.deep_linear
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import values

__all__ = ["MonomialLoss", "PolynomialLoss", "ProductLoss", "RegressionLoss", "coordinate_powers", "family_lambda",
           "family_loss", "layer_product", "regression_statistics"]

CHUNK = 4096                 # samples per chunk of a data set (its statistics are sums over chunks)
FAMILIES = ("normal_crossing", "sum", "regular", "reduced_rank", "deep_linear")


def layer_product(widths: tuple, w):
    """W_L ... W_1 (H_L, H_0) from flat w = (W_1, ..., W_L), each W_l (H_l, H_(l-1)) row-major; widths (H_0..H_L)."""
    start, prod = 0, None
    for a, b in zip(widths[:-1], widths[1:]):
        W = w[start:start + a * b].reshape(b, a)
        start += a * b
        prod = W if prod is None else W @ prod
    return prod


def coordinate_powers(w, k: tuple, factor: int = 1):
    """(w_i^(factor k_i)) over the coordinates with k_i != 0 (k a static tuple): a coordinate with k_i = 0 does not
    enter (w^0 = 1, and a float power's derivative of it is NaN at w = 0, where SGLD's chains start)."""
    import jax.numpy as jnp

    if 0 in k:
        used = np.flatnonzero(np.asarray(k))
        w, k = w[used], tuple(k[i] for i in used)
    return w ** (factor * jnp.asarray(k, w.dtype)) if factor != 1 else w ** jnp.asarray(k, w.dtype)


class PolynomialLoss(NamedTuple):
    """K on flat w for the normal_crossing, sum and regular families; hashable (static in jit)."""

    family: str
    k: tuple
    hessian: tuple = ()

    def __call__(self, w, data):
        import jax.numpy as jnp

        if self.family == "regular":
            return 0.5 * w @ jnp.asarray(self.hessian, w.dtype) @ w
        powers = coordinate_powers(w, self.k, 2)
        return jnp.prod(powers) if self.family == "normal_crossing" else jnp.sum(powers)

    def true_point(self):
        """The origin (D,), the deepest point of the true set {K = 0} (for the crossings, where every branch meets)."""
        return np.zeros(len(self.hessian) if self.family == "regular" else len(self.k))


class ProductLoss(NamedTuple):
    """K = |W_L ... W_1 - C0|_F^2 / 2 on flat w = (W_1, ..., W_L) row-major; widths (H_0, ..., H_L)."""

    widths: tuple
    target: tuple

    def __call__(self, w, data):
        import jax.numpy as jnp

        return 0.5 * jnp.sum((layer_product(self.widths, w) - jnp.asarray(self.target, w.dtype)) ** 2)

    def true_point(self):
        """A balanced factorization of C0 = U_r S_r V_r^T (rank r) with every other entry zero, flat (D,): W_1's first
        r rows S_r^(1/L) V_r^T, each middle layer's leading r x r block S_r^(1/L), W_L's first r columns
        U_r S_r^(1/L).  Its product is C0 (K = 0), and it is the true set's deepest point (the rank-r part only,
        every redundant row and column zero), where the local lambda is the global one."""
        C0 = np.asarray(self.target, np.float64)
        U, S, Vt = np.linalg.svd(C0)
        r = int(np.sum(S > S[0] * 1e-12)) if S.size and S[0] > 0 else 0
        if r > min(self.widths):
            raise ValueError(f"target: expected a rank at most the smallest width {min(self.widths)}, got rank {r}")
        L = len(self.widths) - 1
        root = np.diag(S[:r] ** (1.0 / L))
        layers = []
        for l, (a, b) in enumerate(zip(self.widths[:-1], self.widths[1:])):
            W = np.zeros((b, a))
            if L == 1:
                W = C0
            elif l == 0:
                W[:r] = root @ Vt[:r]
            elif l == L - 1:
                W[:, :r] = U[:, :r] @ root
            else:
                W[:r, :r] = root
            layers.append(W.ravel())
        return np.concatenate(layers)


class RegressionLoss(NamedTuple):
    """A data set's loss for a family's regression y = P(w) x + e, e ~ N(0, I) (unit noise), from the data's
    sufficient statistics: data = (S, G, P0) with S = X^T X / n (a, a), G = E^T X / n (b, a) (the noise e_i = y_i -
    P0 x_i against the inputs), P0 = P(w0) (b, a).  With D = P(w) - P0,

        L_n(w) - L_n(w0) = (1 / 2n) sum_i (|y_i - P(w) x_i|^2 - |e_i|^2) = tr(D S D^T) / 2 - tr(D G^T),

    exact for any n at a cost independent of n, and without the cancellation of L_n(w) - L_n(w0) near w0.  Its
    population limit (S = Sigma, G = 0) is K = tr(D Sigma D^T) / 2.  P(w) by family: normal_crossing
    prod_i w_i^(k_i) (1 x 1; K = prod_i w_i^(2 k_i) / 2), sum (w_i^(k_i))_i (d x 1; K = sum_i w_i^(2 k_i) / 2),
    regular w^T (1 x d, Sigma = the case's H; K = w^T H w / 2), reduced_rank and deep_linear the product
    W_L ... W_1 (H_L x H_0, Sigma = I; K = |P - P0|_F^2 / 2): the population cases' K, halved for the crossings and
    sums (lambda and m unchanged)."""

    family: str
    k: tuple = ()
    widths: tuple = ()

    def prediction(self, w):
        """P(w) (b, a) on flat w."""
        import jax.numpy as jnp

        if self.family in ("normal_crossing", "sum"):
            powers = coordinate_powers(w, self.k)
            return jnp.prod(powers).reshape(1, 1) if self.family == "normal_crossing" else powers[:, None]
        return w[None, :] if self.family == "regular" else layer_product(self.widths, w)

    def __call__(self, w, data):
        import jax.numpy as jnp

        S, G, P0 = data
        D = self.prediction(w) - P0
        return 0.5 * jnp.sum((D @ S) * D) - jnp.sum(D * G)


class MonomialLoss(NamedTuple):
    """L(w; (x, y)) = mean_i (y_i - P(w) x_i)^2 + log(pi) / 2 with P(w) = prod_i w_i^(k_i): the negative log
    likelihood per sample of the normal crossing's regression y = P(w) x + e (``RegressionLoss``'s family
    normal_crossing) at noise variance sigma^2 = 1/2, on the raw data x, y (n,).  Its population limit at
    x ~ U[-sqrt 3, sqrt 3] and P(w0) = theta0 is (P(w) - theta0)^2 + const, so lambda = 1 / (2 max_i k_i) at
    w* = 0 (theta0 = 0).  ``gaussian_nll`` at sigma = sqrt(1/2) in closed form: through sqrt, 2 sigma^2 rounds to
    1 + 2e-16, which moves a chain's last bits."""

    k: tuple

    def __call__(self, w, data):
        import jax.numpy as jnp

        x, y = data
        return jnp.mean((y - jnp.prod(coordinate_powers(w, self.k)) * x) ** 2) + 0.5 * jnp.log(jnp.pi)


def regression_statistics(key, truth, cov_factor, n: int, runs: int):
    """Each run's data set of n samples of y = P0 x + e (x = C z, z and e standard normal) as the statistics
    :class:`RegressionLoss` reads: S = X^T X / n (runs, a, a), G = E^T X / n (runs, b, a), P0 (runs, b, a), summed
    over chunks of CHUNK samples (memory independent of n), one run after another.

    Args:
        key: a PRNG key.
        truth: P0 (b, a).
        cov_factor: C (a, a), the inputs' covariance C C^T.
        n: samples per data set.
        runs: data sets (one per run).
    """
    import jax
    import jax.numpy as jnp

    from ..network import check_count

    n, runs = check_count(n, "n"), check_count(runs, "runs")
    P0 = jnp.asarray(truth, jnp.zeros(()).dtype)
    C = jnp.asarray(cov_factor, P0.dtype)
    if P0.ndim != 2 or C.shape != (P0.shape[1],) * 2:
        raise ValueError(f"truth, cov_factor: expected shapes (b, a) and (a, a), got {P0.shape} and {C.shape}")
    b, a = P0.shape
    chunk = min(n, CHUNK)

    def one(k):
        def add(acc, i):
            kx, ke = jax.random.split(jax.random.fold_in(k, i))
            keep = (i * chunk + jnp.arange(chunk) < n)[:, None].astype(P0.dtype)   # the last chunk's excess rows
            x = (jax.random.normal(kx, (chunk, a), P0.dtype) @ C.T) * keep
            e = jax.random.normal(ke, (chunk, b), P0.dtype) * keep
            return (acc[0] + x.T @ x, acc[1] + e.T @ x), None

        zero = (jnp.zeros((a, a), P0.dtype), jnp.zeros((b, a), P0.dtype))
        (S, G), _ = jax.lax.scan(add, zero, jnp.arange(-(-n // chunk)))
        return S / n, G / n

    S, G = jax.jit(lambda keys: jax.lax.map(one, keys))(jax.random.split(key, runs))
    return S, G, jnp.broadcast_to(P0, (runs, b, a))


def family_lambda(family: str, *, k=None, num_params=None, input_dim=None, hidden=None, output_dim=None, widths=None,
                  true_rank: int = 0):
    """The exact (lambda, m) of a family (module docstring) with its sizes, its parameter count D and, for
    reduced_rank and deep_linear, its layer widths (H_0, ..., H_L) (None for the others).

    Args:
        family: one of FAMILIES.
        k: normal_crossing, sum: the half-exponents k_i.
        num_params: regular: d.
        input_dim, hidden, output_dim: reduced_rank's widths (input_dim also deep_linear's H_0).
        widths: deep_linear: the hidden widths, then the output width.
        true_rank: reduced_rank, deep_linear: the rank r of the true map.

    Returns:
        (lambda (Fraction), m, D, layer widths or None); ValueError naming a missing or bad argument.
    """
    given = {"k": k, "num_params": num_params, "input_dim": input_dim, "hidden": hidden, "output_dim": output_dim,
             "widths": widths}

    def need(*names):
        for name in names:
            if given[name] is None:
                raise ValueError(f"{name}: expected a value for family {family!r}")

    if family in ("normal_crossing", "sum"):
        need("k")
        lam, m = values.normal_crossing(k, "product" if family == "normal_crossing" else "sum")
        return lam, m, len(k), None
    if family == "regular":
        need("num_params")
        lam, m = values.regular(num_params)
        return lam, m, num_params, None
    if family == "reduced_rank":
        need("input_dim", "hidden", "output_dim")
        layers = (input_dim, hidden, output_dim)
        lam, m = values.reduced_rank(*layers, true_rank=true_rank)
    elif family == "deep_linear":
        need("input_dim", "widths")
        layers = (input_dim,) + tuple(widths)
        lam, m = values.deep_linear(input_dim, widths, true_rank)
    else:
        raise ValueError(f"family: expected one of {FAMILIES}, got {family!r}")
    return lam, m, sum(a * b for a, b in zip(layers[:-1], layers[1:])), layers


def family_loss(family: str, key, num_params: int, layers=None, k=(), true_rank: int = 0):
    """A family's population loss K and the regression whose data sets have it as their limit
    (:class:`RegressionLoss`, :func:`regression_statistics`): the truths' factors are standard normal, drawn from
    ``key`` (regular: H = A A^T / d + I with A a d x d standard normal matrix; reduced_rank, deep_linear: C0 = L R
    with L (H_L, r), R (r, H_0)).

    Args:
        family: one of FAMILIES.
        key: a PRNG key.
        num_params: D (:func:`family_lambda`).
        layers: the layer widths of reduced_rank and deep_linear (:func:`family_lambda`), else None.
        k: normal_crossing, sum: the half-exponents.
        true_rank: r of reduced_rank and deep_linear.

    Returns:
        (K, regression): the loss and its regression y = P(w0) x + e, x = C z, as regression = (P0 (b, a), C (a, a)).
    """
    import jax

    if family not in FAMILIES:
        raise ValueError(f"family: expected one of {FAMILIES}, got {family!r}")
    if family == "regular":
        D = num_params
        A = np.asarray(jax.random.normal(key, (D, D)), np.float64)
        H = A @ A.T / D + np.eye(D)
        return PolynomialLoss("regular", (), tuple(map(tuple, H))), (np.zeros((1, D)), np.linalg.cholesky(H))
    if layers is None:
        b = 1 if family == "normal_crossing" else len(k)
        return PolynomialLoss(family, tuple(k)), (np.zeros((b, 1)), np.ones((1, 1)))
    k1, k2 = jax.random.split(key)
    left = np.asarray(jax.random.normal(k1, (layers[-1], true_rank)), np.float64)
    right = np.asarray(jax.random.normal(k2, (true_rank, layers[0])), np.float64)
    return ProductLoss(tuple(layers), tuple(map(tuple, left @ right))), (left @ right, np.eye(layers[0]))
