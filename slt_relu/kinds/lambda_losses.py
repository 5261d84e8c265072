"""The losses of the ``lambda_curve`` kind's families (``slt_relu.kinds.lambda_curve_kind``), hashable so that jit
treats them as static: the population losses K (:class:`PolynomialLoss`, :class:`ProductLoss`) and a data set's
loss from its sufficient statistics (:class:`RegressionLoss`, with :func:`regression_statistics` drawing them)."""
from __future__ import annotations

from typing import NamedTuple

CHUNK = 4096                 # samples per chunk of a data set (its statistics are sums over chunks)


def layer_product(widths: tuple, w):
    """W_L ... W_1 (H_L, H_0) from flat w = (W_1, ..., W_L), each W_l (H_l, H_(l-1)) row-major; widths (H_0..H_L)."""
    start, prod = 0, None
    for a, b in zip(widths[:-1], widths[1:]):
        W = w[start:start + a * b].reshape(b, a)
        start += a * b
        prod = W if prod is None else W @ prod
    return prod


class PolynomialLoss(NamedTuple):
    """K on flat w for the normal_crossing, sum and regular families; hashable (static in jit)."""

    family: str
    k: tuple
    hessian: tuple = ()

    def __call__(self, w, data):
        import jax.numpy as jnp

        if self.family == "regular":
            return 0.5 * w @ jnp.asarray(self.hessian, w.dtype) @ w
        powers = w ** (2 * jnp.asarray(self.k, w.dtype))
        return jnp.prod(powers) if self.family == "normal_crossing" else jnp.sum(powers)


class ProductLoss(NamedTuple):
    """K = |W_L ... W_1 - C0|_F^2 / 2 on flat w = (W_1, ..., W_L) row-major; widths (H_0, ..., H_L)."""

    widths: tuple
    target: tuple

    def __call__(self, w, data):
        import jax.numpy as jnp

        return 0.5 * jnp.sum((layer_product(self.widths, w) - jnp.asarray(self.target, w.dtype)) ** 2)


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
            powers = w ** jnp.asarray(self.k, w.dtype)
            return jnp.prod(powers).reshape(1, 1) if self.family == "normal_crossing" else powers[:, None]
        return w[None, :] if self.family == "regular" else layer_product(self.widths, w)

    def __call__(self, w, data):
        import jax.numpy as jnp

        S, G, P0 = data
        D = self.prediction(w) - P0
        return 0.5 * jnp.sum((D @ S) * D) - jnp.sum(D * G)


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
