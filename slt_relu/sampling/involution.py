"""Metropolis-Hastings moves along an involution: jumps between modes that gradient moves cannot
connect.

A map h with h(h(z)) = z (an involution) is a valid deterministic Metropolis-Hastings proposal:
from z propose z' = h(z) and accept with probability

    alpha(z) = min(1, pi(z') |det dh/dz (z)| / pi(z)),

which satisfies detailed balance because h swaps z and z' (Green 1995; Neklyudov et al. 2020,
"Involutive MCMC").  Choosing h at random, independently of z, keeps the kernel reversible; so does a random
group element z' = g z whose law is that of g^(-1) (on the extended space (z, g) -> (g z, g^(-1)) is an
involution: ``slt_relu.moves.LayerReparametrization``), with the same alpha.
When h is an exact symmetry of pi (pi(h(z)) |det dh/dz| = pi(z)) every proposal is accepted.

:func:`involution_step` applies one such proposal to a gradient sampler's state (BlackJAX's
``HMCState``: position, logdensity, logdensity_grad), so it can follow any HMC move (SMC's moves);
NUTS and HMC chains make the same proposal between trajectories, accepted by
:func:`metropolis_hastings`.  Cost: one gradient evaluation at z'.  The involutions of two-layer
ReLU posteriors (the orientation flip) are in ``slt_relu.moves``.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["involution_step", "metropolis_hastings"]


def metropolis_hastings(key, log_alpha):
    """Accept with probability min(1, exp(log_alpha)); a non-finite log_alpha (a proposal off the
    support, a NaN density) is a rejection.  log_alpha: () -> bool ()."""
    log_alpha = jnp.where(jnp.isfinite(log_alpha), log_alpha, -jnp.inf)
    return jnp.log(jax.random.uniform(key, (), log_alpha.dtype)) < log_alpha


def involution_step(key, state, logdensity, move):
    """One Metropolis-Hastings proposal z' = move(key, z) from a gradient sampler's state
    (position z, logdensity log pi(z), logdensity_grad); returns (state, accepted).

    log alpha = log pi(z') - log pi(z) + log |det dz'/dz|; a non-finite alpha (z' off the
    support, a NaN potential) is a rejection."""
    k_move, k_accept = jax.random.split(key)
    z_new, log_det = move(k_move, state.position)
    value, grad = jax.value_and_grad(logdensity)(z_new)
    accept = metropolis_hastings(k_accept, value - state.logdensity + log_det)
    proposed = state._replace(position=z_new, logdensity=value, logdensity_grad=grad)
    return jax.tree.map(lambda a, b: jnp.where(accept, a, b), proposed, state), accept
