"""The local learning coefficient along training: :func:`llc_at_checkpoints`, ``estimate_llc`` at the B checkpoints
of a training run of any model in one compiled SGLD program of B x C chains, with the same restrictions
(a layer's LLC curve).

    lambda_hat(w*_b) = n_beta (E[L_n(w)] - L_n(w*_b)),  p(w) proportional to exp(-n_beta L_n(w) - (gamma/2) |w - w*_b|^2)

References: Lau, Furman, Wang, Murfet, Wei 2023, "The local learning coefficient"; Hoogland et al. 2024,
"The developmental landscape of in-context learning" (the LLC along training).
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import numpy as np

from .. import diagnostics as dg
from ..pytree import unravel_fn
from ..sampling import check_keys
from .llc import LLCSettings, settings_and_n_beta, localized_sgld, free_mask

__all__ = ["LLCCurve", "llc_at_checkpoints"]


class LLCCurve(NamedTuple):
    """The local learning coefficient at B points (checkpoints of a training run), :func:`llc_at_checkpoints`.

    Attributes:
        estimate: (B,) lambda_hat at each point (its chains' mean).
        se: (B,) its standard error across the chains (NaN for one chain).
        accept_prob: (B,) the chains' mean MALA acceptance.
        rhat: (B,) split R-hat of each point's loss traces (NaN with fewer than 8 kept draws).
        init_loss: (B,) L_n at each point.
        n_beta: n beta.
    """

    estimate: np.ndarray
    se: np.ndarray
    accept_prob: np.ndarray
    rhat: np.ndarray
    init_loss: np.ndarray
    n_beta: float


def llc_at_checkpoints(keys, loss_fn: Callable, checkpoints, data, settings: LLCSettings = LLCSettings(), *,
                       restrict=None, devices=None) -> LLCCurve:
    """:func:`~slt_relu.posterior.llc.estimate_llc` at B points at once (the checkpoints of a training run), in one compiled SGLD program
    of B x C chains: the LLC along training of any model.

        lambda_hat(w*_b) = n_beta (E[L_n(w)] - L_n(w*_b)),  p(w) proportional to exp(-n_beta L_n(w) - (gamma/2) |w - w*_b|^2)

    Point b's numbers are ``estimate_llc(keys[b], loss_fn, checkpoint b, data, settings, restrict=restrict)``'s
    (tests/test_llc_sgld.py), so a curve and a single estimate agree.

    Args:
        keys: (B,) PRNG keys, one per point.
        loss_fn: L_n(params, data) -> scalar, as estimate_llc's.
        checkpoints: the points, a parameter pytree whose leaves have a leading axis B (the checkpoints stacked:
            ``jax.tree.map(lambda *a: jnp.stack(a), *params_list)``).
        data: the data pytree.
        settings: :class:`LLCSettings`, shared by every point.
        restrict: as estimate_llc's, shaped like one checkpoint (e.g. one layer free: the per-layer LLC curve).
        devices: to shard the chains over.

    Returns:
        :class:`LLCCurve`, (B,) arrays.

    References:
        Lau, Furman, Wang, Murfet, Wei 2023; Hoogland et al. 2024, "The developmental landscape of in-context
        learning" (LLC along training).
    """
    s, n_beta = settings_and_n_beta(loss_fn, data, settings)
    leaves = jax.tree.leaves(checkpoints)
    sizes = {int(np.shape(a)[0]) if np.ndim(a) else -1 for a in leaves}
    if not leaves or len(sizes) != 1 or min(sizes) < 1:
        raise ValueError(f"checkpoints: expected a parameter pytree whose leaves share a leading axis B >= 1, got "
                         f"leading sizes {sorted(sizes)}")
    B = sizes.pop()
    keys = check_keys(keys)
    if keys.shape[0] != B:
        raise ValueError(f"keys: expected one key per checkpoint ({B}), got {keys.shape[0]}")
    first = jax.tree.map(lambda a: a[0], checkpoints)
    free = free_mask(restrict, first)
    _, unravel = unravel_fn(first)
    centers = jax.vmap(unravel.ravel)(checkpoints)                          # (B, D), each checkpoint's flat w*
    C = s.num_chains
    draws = localized_sgld(keys, loss_fn, unravel, centers, data, s, n_beta, free, False, devices)
    losses = draws.info.observed.astype(np.float64).reshape(B, C, -1)
    init = np.asarray(jax.vmap(lambda w: loss_fn(unravel(w), data))(centers), np.float64)
    per_chain = n_beta * (losses.mean(-1) - init[:, None])
    se = per_chain.std(1, ddof=1) / np.sqrt(C) if C > 1 else np.full(B, np.nan)
    rhat = np.array([dg.rhat(l) if l.shape[1] >= 8 else np.nan for l in losses])
    accept = np.asarray(draws.info.accept_prob, np.float64).reshape(B, C).mean(1)
    return LLCCurve(per_chain.mean(1), se, accept, rhat, init, float(n_beta))
