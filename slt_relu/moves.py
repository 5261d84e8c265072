"""Metropolis-Hastings moves along the model's symmetries: jumps between modes that gradient
moves cannot connect (DSLT4's orientation-reversed phase).

A map h with h(h(z)) = z (an involution) is a valid deterministic Metropolis-Hastings proposal:
from z propose z' = h(z) and accept with probability

    alpha(z) = min(1, pi(z') |det dh/dz (z)| / pi(z)),

which satisfies detailed balance because h swaps z and z' (Green 1995; Neklyudov et al. 2020,
"Involutive MCMC").  Choosing h at random, independently of z, keeps the kernel reversible.
When h is an exact symmetry of pi (pi(h(z)) |det dh/dz| = pi(z)) every proposal is accepted.

:class:`OrientationFlip` is the involution of DSLT3's orientation reversal on a posterior's
unconstrained coordinates z (``slt_relu.posterior``): z -> parameters w -> psi^J(w)
(:func:`slt_relu.symmetry.flip_orientation`: (w_i, b_i) -> (-w_i, -b_i) for i in J,
c -> c + sum_J q_i b_i, determinant +-1) -> z'.  f changes by sum_J q_i <w_i, x>, so psi^J is an
exact symmetry of the likelihood where the nodes J annihilate (the true set of DSLT4's PT2 at
v = 1) and close to one near it; the prior's ratio (c moves by sum_J q_i b_i) stays in alpha.
J is every node: the flip between DSLT4's two orientations.  Nodes that do not carry the
function are flipped for free (a node with q_i = 0 changes nothing; one with w_i = 0 changes its
constant by q_i b_i, which c's shift returns), so J = all also serves a truth whose annihilating
set is a subset, once the other nodes are degenerate.  A flip that would move a coordinate the
model holds fixed, or leave a uniform prior's support, is rejected, and so is one that does not
return to z when applied twice in floating point (a uniform prior's transform saturates near the
edges of its support, where z -> w -> z loses digits): the decision is the same at z and at z', so
detailed balance holds.

:func:`involution_step` applies one such proposal to a gradient sampler's state (BlackJAX's
``HMCState``: position, logdensity, logdensity_grad), so it can follow any HMC move (SMC's moves,
``slt_relu.smc``); NUTS and HMC chains (``slt_relu.nuts``, ``slt_relu.lockstep``) make the same proposal between
trajectories, accepted by :func:`metropolis_hastings`.  Cost: one gradient evaluation at z'.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .network import from_flat, to_flat
from .symmetry import flip_orientation


class OrientationFlip(NamedTuple):
    """The orientation-flip involution on the unconstrained coordinates of a posterior family
    (module docstring).  potential: the family's
    :class:`~slt_relu.posterior.PosteriorPotential` (model, prior, sigma, dtype); hashable by
    value, so it can be a static argument of ``jax.jit``.  Called as move(key, z (k,)) ->
    (z' (k,), log |det dz'/dz|)."""

    potential: object

    def _flip(self, pieces, z):
        """(psi applied to z's parameters, mapped back to z; whether psi kept every fixed coordinate)."""
        model = self.potential.model
        d, n_in = model.base.width, model.base.n_in
        free = np.asarray(model.free, bool)
        full = to_flat(model.base).astype(z.dtype).at[np.flatnonzero(free)].set(pieces.constrain(z))
        flipped = to_flat(flip_orientation(from_flat(full, d, n_in), jnp.ones(d, bool)))
        keeps_fixed = jnp.all(flipped[~free] == full[~free]) if (~free).any() else jnp.bool_(True)
        return pieces.unconstrain(flipped[np.flatnonzero(free)]), keeps_fixed

    def __call__(self, key, z):
        from .posterior import _numpyro_pieces

        del key                                          # the involution is deterministic: J = all nodes
        pieces = _numpyro_pieces(self.potential)
        z_new, keeps_fixed = self._flip(pieces, z)
        log_det = pieces.log_jacobian(z) - pieces.log_jacobian(z_new)
        # in floating point the map is an involution only where the prior's transform is well conditioned
        # (a uniform prior's sigmoid saturates near its edges): a proposal whose flip does not lead back to z
        # is rejected, a decision that is the same at z and at z'
        z_back, _ = self._flip(pieces, z_new)
        returns = jnp.all(jnp.abs(z_back - z) <= 1000 * jnp.finfo(z.dtype).eps * (1 + jnp.abs(z)))
        return z_new, jnp.where(keeps_fixed & returns, log_det, -jnp.inf)


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
