"""The toy model of superposition's empirical loss L_n from sorted inputs, exactly, in O(c^2 log n).

With one active feature per input, L_n only needs, per
feature i, its magnitudes mu sorted, and the prefix sums S_p of mu^p (p = 0, 1, 2): output j on the
inputs of feature i is ReLU(mu G_ji + b_j), active on the mu beyond the kink -b_j / G_ji (below it
for G_ji < 0; all or none for G_ji = 0), a contiguous run of the sorted mu found by binary search, so

    n L_n = sum_i sum_j [ t^2 S_2(all) + ((t - a)^2 - t^2) S_2(A) - 2 (t - a) b S_1(A) + b^2 S_0(A) ],
    a = G_ji,  b = b_j,  t = delta_ij,  A = the active run of feature i's magnitudes,

exactly (to rounding), in O(c^2 log n) per evaluation instead of O(n c^2): at n = 5000 a gradient
costs about 13 us instead of about 740 us (vmapped over 256 parameters on a 2-core CPU shared with other
work; :func:`sorted_empirical_loss`; tests/test_tms_transition.py checks it against
``slt_relu.models.tms.empirical_loss``).  The run indices are integers, so the
gradient is that of the piece selected at w, which is the gradient of L_n wherever no kink falls on a
data point (everywhere but a null set; the integrand is continuous at the kink).

References:
    Chen, Lau, Mendel, Wei, Murfet 2023, arXiv 2310.06301 (the model and its inputs).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..network import check_count
from ..models.tms import R_HIDDEN

__all__ = ["SortedInputs", "sorted_empirical_loss", "sorted_empirical_losses", "sorted_inputs"]


class SortedInputs(NamedTuple):
    """A TMS data set as its magnitudes sorted per feature (module docstring), a pytree.

    Attributes:
        mu: (c, n) feature i's magnitudes in increasing order in row i, padded with +inf.
        prefix: (c, n + 1, 3) prefix sums of mu^0, mu^1, mu^2 along each row (constant past the count).
        count: (c,) the inputs of each feature (int).
    """

    mu: jax.Array
    prefix: jax.Array
    count: jax.Array


def sorted_inputs(x, size: int | None = None) -> SortedInputs:
    """The :class:`SortedInputs` of inputs x (n, c) with at most one nonzero entry per row (x = mu e_i).

    Args:
        x: (n, c) inputs (``slt_relu.tms.sample_inputs``).
        size: the rows' length, >= n (default n): padding to a common size lets data sets of different n
            share one compiled program (the padding is +inf in mu and constant prefix sums: no effect).

    Returns:
        SortedInputs(mu (c, size), prefix (c, size + 1, 3), count (c,)) in x's floating dtype.

    Raises:
        ValueError: x not 2-D, non-finite, or a row with two nonzero entries.
    """
    x = np.asarray(x)
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1:
        raise ValueError(f"x: expected inputs of shape (n, c), got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("x: expected finite inputs")
    if np.any(np.sum(x != 0, axis=1) > 1):
        raise ValueError("x: expected at most one nonzero entry per row (inputs x = mu e_i)")
    n, c = x.shape
    size = n if size is None else check_count(size, "size")
    if size < n:
        raise ValueError(f"size: expected at least the {n} inputs, got {size}")
    dtype = x.dtype if np.issubdtype(x.dtype, np.floating) else np.float64
    feat = np.argmax(np.abs(x), axis=1)               # a zero row: any feature (mu = 0 is the same input for all)
    mu = x[np.arange(n), feat].astype(np.float64)
    srt = np.full((c, size), np.inf)
    prefix = np.zeros((c, size + 1, 3))
    count = np.zeros(c, np.int32)
    for i in range(c):
        m = np.sort(mu[feat == i])
        k = len(m)
        count[i], srt[i, :k] = k, m
        for p in range(3):
            cs = np.concatenate([[0.0], np.cumsum(m ** p)])
            prefix[i, : k + 1, p] = cs
            prefix[i, k + 1:, p] = cs[-1]
    return SortedInputs(jnp.asarray(srt, dtype), jnp.asarray(prefix, dtype), jnp.asarray(count))


def sorted_empirical_loss(flat, data: SortedInputs) -> jax.Array:
    """L_n on flat parameters from sorted inputs, exactly (module docstring), in O(c^2 log n).

        n L_n = sum_i sum_j [t^2 S_2(all) + ((t - a)^2 - t^2) S_2(A) - 2 (t - a) b S_1(A) + b^2 S_0(A)],
        a = G_ji = <W_j, W_i>,  b = b_j,  t = delta_ij,

    A the magnitudes of feature i where a mu + b > 0.  Slopes |a| below tiny^(1/4) of the dtype count as 0
    (active on all of feature i's inputs if b > 0, on none otherwise; an error below 4 tiny^(1/4) a term),
    as in ``slt_relu.models.tms.active_interval``.  A module-level function: a hashable loss for
    ``slt_relu.posterior.target.TemperedTarget``.

    Args:
        flat: (3 c,) parameters in the flat order of ``slt_relu.models.tms`` (W row-major, then b).
        data: :class:`SortedInputs` of one data set.

    Returns:
        () L_n, equal to ``slt_relu.tms.flat_empirical_loss(flat, x)``.

    References:
        Chen et al. 2023 (arXiv 2310.06301): the loss.
    """
    mu, prefix, count = data
    c = mu.shape[0]
    W = flat[: R_HIDDEN * c].reshape(R_HIDDEN, c)
    b = flat[R_HIDDEN * c:]
    G = W.T @ W                                                     # G[j, i] = <W_j, W_i>
    tiny = float(jnp.finfo(G.dtype).tiny) ** 0.25
    pos, neg = G > tiny, G < -tiny
    kink = -b[:, None] / jnp.where(pos | neg, G, 1.0)               # (j, i); unused where |G| <= tiny
    # m[j, i]: feature i's magnitudes <= the kink of output j
    m = jax.vmap(lambda s, k: jnp.searchsorted(s, k, side="right", method="scan"), (0, 1), 1)(mu, kink)
    m = jnp.minimum(m, count[None, :])
    full = jnp.broadcast_to(count[None, :], m.shape)
    whole = jnp.where(b[:, None] > 0, full, 0)
    lo = jnp.where(pos, m, 0)
    hi = jnp.where(pos, full, jnp.where(neg, m, whole))
    cols = jnp.arange(c)[None, :]
    S = prefix[cols, hi] - prefix[cols, lo]                         # (j, i, 3): S_0, S_1, S_2 over A
    t = jnp.eye(c, dtype=G.dtype)
    total2 = prefix[jnp.arange(c), count, 2]                         # (i,) S_2 over all of feature i
    bj = b[:, None]
    terms = (t * t * total2[None, :] + ((t - G) ** 2 - t * t) * S[..., 2] - 2 * (t - G) * bj * S[..., 1]
             + bj ** 2 * S[..., 0])
    return jnp.sum(terms) / jnp.sum(count)


@jax.jit
def sorted_empirical_losses(flat, data: SortedInputs) -> jax.Array:
    """:func:`sorted_empirical_loss` of many parameters on many data sets, as one compiled program:

        out[k, j] = L_n(flat[k, j]; data set k)

    Args:
        flat: (K, N, 3 c) parameters, N per data set.
        data: :class:`SortedInputs` whose arrays carry a leading axis K (the data sets stacked; one n).

    Returns:
        (K, N) L_n.

    References:
        Chen et al. 2023 (arXiv 2310.06301): the loss.
    """
    return jax.vmap(jax.vmap(sorted_empirical_loss, (0, None)))(flat, data)
