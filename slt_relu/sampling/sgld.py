"""Stochastic gradient Langevin dynamics (Welling & Teh 2011), many chains at once.

    z_{t+1} = z_t - (eps / 2) grad U_B(z_t) + N(0, eps I),

U_B the chain's potential on a mini-batch B of its data (or on all of it).  The Euler step is
not corrected; its bias is measured instead: the Metropolis-adjusted Langevin (MALA) acceptance
of each proposal, min(1, exp(U(z) - U(z') + |z' - z + eps/2 g|^2/(2 eps) - |z - z' + eps/2 g'|^2/(2 eps))),
computed with the gradients the chain needs anyway (near 1: the discretisation bias is small).
The learning coefficient's estimator (``slt_relu.posterior.llc``) runs on it.

Interface: :func:`slt_relu.sampling.sample` with :class:`SGLDSettings` settings.  With ``batch_size``,
``args[0]`` is the chain's data (a pytree whose leaves have a leading data axis n) and each step
draws batch_size points with replacement: the potential is ``potential_gen(batch, *args[1:])``.
"""
from __future__ import annotations

import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .base import Draws, StaticPartial, register
from .sharding import run_sharded
from .settings import SGLDSettings

__all__ = ["SGLDInfo", "run_sgld"]


class SGLDInfo(NamedTuple):
    """SGLD's statistics, C chains.

    Attributes:
        accept_prob: (C,) the mean MALA acceptance of each chain's proposals after the burn-in (module
            docstring: near 1, the discretisation bias is small).
    """

    accept_prob: np.ndarray


def _chain(s: SGLDSettings, potential_gen, z0, key, args):
    """One chain: (kept z (T, D), kept U (T,), mean MALA acceptance after the burn-in)."""
    dt = z0.dtype
    eps = jnp.asarray(s.step_size, dt)

    def potential(z, k):
        if s.batch_size is None:
            return potential_gen(*args)(z)
        data = args[0]
        n = jax.tree.leaves(data)[0].shape[0]
        idx = jax.random.randint(k, (s.batch_size,), 0, n)
        return potential_gen(jax.tree.map(lambda a: a[idx], data), *args[1:])(z)

    vg = jax.value_and_grad(potential)
    k0, key = jax.random.split(key)
    U0, g0 = vg(z0, k0)

    def step(carry, k):
        z, U, g = carry
        k_noise, k_batch = jax.random.split(k)
        z_new = z - 0.5 * eps * g + jnp.sqrt(eps) * jax.random.normal(k_noise, z.shape, dt)
        U_new, g_new = vg(z_new, k_batch)
        fwd = jnp.sum((z_new - z + 0.5 * eps * g) ** 2) / (2 * eps)
        bwd = jnp.sum((z - z_new + 0.5 * eps * g_new) ** 2) / (2 * eps)
        log_alpha = jnp.minimum(0.0, U - U_new + fwd - bwd)
        return (z_new, U_new, g_new), (z_new, U_new, jnp.exp(jnp.where(jnp.isnan(log_alpha), -jnp.inf, log_alpha)))

    _, (zs, Us, alpha) = jax.lax.scan(step, (z0, U0, g0), jax.random.split(key, s.num_steps))
    keep = slice(s.num_burnin, None, s.thin)
    return zs[keep], Us[keep], jnp.mean(alpha[s.num_burnin:])


def run_sgld(keys, potential_gen, init_z, args, settings: SGLDSettings, *, moves=None, devices=None,
             progress=None) -> Draws:
    """SGLD chains from init_z; see :func:`slt_relu.sampling.sample`.  Returns
    :class:`~slt_relu.sampling.Draws` whose ``info`` is an :class:`SGLDInfo`.  moves, progress: unused
    (SGLD has no symmetry proposals; one compiled call)."""
    s = settings
    start = time.time()
    z, U, accept = (np.asarray(a) for a in run_sharded(StaticPartial(_chain, (s, potential_gen)),
                                                       (init_z, keys, args), devices=devices))
    C = z.shape[0]
    grads = np.full(C, s.num_steps + 1)
    return Draws(z, U, SGLDInfo(accept), grads, None, s.num_steps + 1, time.time() - start)


register(SGLDSettings, run_sgld, SGLDInfo)
