"""The model's symmetries as Metropolis-Hastings moves of its posteriors: jumps between modes that
gradient moves cannot connect (DSLT4's orientation-reversed phase).  An involution h of the
unconstrained coordinates is a valid proposal, accepted with min(1, pi(h(z)) |det dh/dz| / pi(z))
(``slt_relu.sampling.involution``: the theory, and the step the samplers take with it).

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

:class:`LayerReparametrization` is the continuous symmetry of a product of layers W_L ... W_1 (reduced-rank
regression, deep linear networks): for invertible G_l (H_l x H_l) at every hidden layer,

    W_l  ->  G_l^(-1) W_l G_(l-1)      (G_0 = I, G_L = I)

leaves the product, so every loss of it (K, L_n), unchanged, and moves a particle along the true set's flat
directions, including towards the branches' crossings, where HMC at large t (steps of t^(-1/2)) cannot go (SMC's
free energy against the exact one with and without it: docs/experiments/known_lambda_suite.md). G_l = exp(scale
X_l), X_l standard normal: the law of G is that of G^(-1) (X -> -X), so on the unimodular group prod_l GL(H_l) the
proposal z' = G . z is accepted with the same min(1, pi(z') |det dz'/dz| / pi(z)) as an involution (Liu & Sabatti
2000, "Generalised Gibbs sampler and multigrid Monte Carlo for Bayesian computation"), log |det dz'/dz| = sum_l
(H_(l+1) - H_(l-1)) tr(scale X_l).

Pass an :class:`OrientationFlip` (of a two-layer posterior's target) or a :class:`LayerReparametrization` as ``moves`` to
:func:`slt_relu.sampling.sample` with settings that have ``symmetry_moves`` (NUTS, HMC, SMC;
:func:`slt_relu.posterior.sample_posterior` passes the flip, :func:`slt_relu.smc_free_energy_curve` takes either).
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from .network import from_flat, to_flat
from .symmetry import flip_orientation

__all__ = ["LayerReparametrization", "OrientationFlip"]


class OrientationFlip(NamedTuple):
    """The orientation-flip involution on the unconstrained coordinates z of a two-layer posterior (module
    docstring).  target: the posterior's :class:`~slt_relu.posterior.target.TemperedTarget`, whose ``unravel``
    is a :class:`~slt_relu.network.Restriction`'s (``Restriction.unravel``); hashable by value, so it can be a
    static argument of ``jax.jit``.  Called as move(key, z (k,)) -> (z' (k,), log |det dz'/dz|)."""

    target: object

    def _flip(self, prior, z):
        """(psi applied to z's parameters, mapped back to z; whether psi kept every fixed coordinate)."""
        model = self.target.unravel.restriction
        d, n_in = model.base.width, model.base.n_in
        free = np.asarray(model.free, bool)
        full = model.embed_flat(prior.constrain(z))
        flipped = to_flat(flip_orientation(from_flat(full, d, n_in), jnp.ones(d, bool)))
        keeps_fixed = jnp.all(flipped[~free] == full[~free]) if (~free).any() else jnp.bool_(True)
        return prior.unconstrain(flipped[np.flatnonzero(free)]), keeps_fixed

    def __call__(self, key, z):
        del key                                          # the involution is deterministic: J = all nodes
        prior = self.target.prior_on(z.shape[-1])
        z_new, keeps_fixed = self._flip(prior, z)
        log_det = prior.log_jacobian(z) - prior.log_jacobian(z_new)
        # in floating point the map is an involution only where the prior's transform is well conditioned
        # (a uniform prior's sigmoid saturates near its edges): a proposal whose flip does not lead back to z
        # is rejected, a decision that is the same at z and at z'
        z_back, _ = self._flip(prior, z_new)
        returns = jnp.all(jnp.abs(z_back - z) <= 1000 * jnp.finfo(z.dtype).eps * (1 + jnp.abs(z)))
        return z_new, jnp.where(keeps_fixed & returns, log_det, -jnp.inf)


class LayerReparametrization(NamedTuple):
    """The GL(H) reparametrization of a product of layers on flat w = (W_1, ..., W_L), each W_l (H_l, H_(l-1))
    row-major (module docstring): move(key, w (D,)) -> (w' (D,), log |det dw'/dw|).

    widths: (H_0, ..., H_L), the input, the hidden layers and the output; scale: the standard deviation of the
    generator's entries (log G's), the move's size: 0.5 moves a layer's scale by about e^(+-0.5) (acceptance
    0.5-0.8 under N(0, I) on the suite's networks)."""

    widths: tuple
    scale: float = 0.5

    def __call__(self, key, w):
        import jax
        import jax.numpy as jnp

        H = tuple(self.widths)
        if len(H) < 3 or any(isinstance(h, bool) or not isinstance(h, (int, np.integer)) or h < 1 for h in H):
            raise ValueError(f"widths: expected the input, at least one hidden layer and the output as positive "
                             f"integers, got {self.widths!r}")
        if isinstance(self.scale, bool) or not isinstance(self.scale, (int, float)) or not 0 < self.scale < 10:
            raise ValueError(f"scale: expected a number in (0, 10), got {self.scale!r}")
        D = sum(a * b for a, b in zip(H[:-1], H[1:]))
        if jnp.shape(w) != (D,):
            raise ValueError(f"w: expected the flat layers of widths {H}, shape ({D},), got {jnp.shape(w)}")
        L = len(H) - 1
        X = [self.scale * jax.random.normal(k, (h, h), w.dtype) for k, h in zip(jax.random.split(key, L - 1), H[1:-1])]
        G = [jnp.eye(H[0], dtype=w.dtype)] + [jax.scipy.linalg.expm(x) for x in X] + [jnp.eye(H[-1], dtype=w.dtype)]
        G_inv = G[:1] + [jax.scipy.linalg.expm(-x) for x in X] + G[-1:]
        out, start = [], 0
        for l in range(1, L + 1):
            W = w[start:start + H[l] * H[l - 1]].reshape(H[l], H[l - 1])
            out.append((G_inv[l] @ W @ G[l - 1]).ravel())
            start += H[l] * H[l - 1]
        log_det = sum((H[l + 1] - H[l - 1]) * jnp.trace(X[l - 1]) for l in range(1, L))
        return jnp.concatenate(out), jnp.asarray(log_det, w.dtype)
