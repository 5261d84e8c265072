"""Stochastic gradient Langevin dynamics (Welling & Teh 2011), plain or RMSProp-preconditioned (pSGLD, Li, Chen,
Carlson & Carin 2016), many chains at once.

    z_{t+1} = z_t - (eps / 2) G grad U_B(z_t) + N(0, eps G),

U_B the chain's potential on a mini-batch B of its data (or on all of it), G = I for plain SGLD and the diagonal
RMSProp preconditioner G = diag(1 / (delta + sqrt(V))), V_t = a V_{t-1} + (1 - a) g_t^2 (V_0 = g_0^2; G at most
1 / delta where the gradients vanish), learnt during the burn-in and then held: a constant preconditioner leaves
the Langevin diffusion's stationary law the target's, where one that keeps adapting to the state does not
without the Gamma term of Li et al. (measured: adapting throughout, lambda_hat of a quadratic came out 37 % high
at a MALA acceptance of 0.999).  The Euler step is not corrected; its bias is measured instead: the
Metropolis-adjusted Langevin (MALA) acceptance of each proposal,

    min(1, exp(U(z) - U(z') + |z' - z + eps/2 G g|^2_{G^-1} / (2 eps) - |z - z' + eps/2 G g'|^2_{G^-1} / (2 eps))),

computed with the gradients the chain needs anyway (near 1: the discretisation bias is small).  On mini-batches
U(z) and U(z') are both the potential on the step's new batch (one more forward pass per step: before, U(z) came from
the previous batch, and the two batches' sampling noise, not the step, decided the acceptance); g and g' are the
gradients the chain moved with.
The learning coefficient's estimator (``slt_relu.posterior.llc``) runs on it.

Memory does not grow with the number of steps beyond what is kept: the burn-in and the thin - 1 steps between
kept draws run inside the scan without output, and a run may keep only an observable of each kept draw (the
estimator's L_n on all the data), not the draws (:func:`run_sgld`'s ``observe`` and ``keep_draws``).  A mask
``free`` holds coordinates fixed (their drift and noise are zero): the LLC of a parameter subset.

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

__all__ = ["SGLDInfo", "num_kept", "run_sgld"]


class SGLDInfo(NamedTuple):
    """SGLD's statistics, C chains.

    Attributes:
        accept_prob: (C,) the mean MALA acceptance of each chain's proposals after the burn-in (module
            docstring: near 1, the discretisation bias is small).
        observed: (C, T) the observable of :func:`run_sgld` at each kept draw, or None without one.
    """

    accept_prob: np.ndarray
    observed: np.ndarray | None = None


def num_kept(s: SGLDSettings) -> int:
    """T, the draws a run keeps: steps num_burnin, num_burnin + thin, ... below num_steps."""
    return -(-(s.num_steps - s.num_burnin) // s.thin)


def _chain(s: SGLDSettings, potential_gen, observe_gen, keep_draws: bool, z0, key, free, args):
    """One chain: (kept z (T, D) or None, kept U (T,), kept observable (T,) or None, mean MALA acceptance
    after the burn-in).  Step i (0-based) uses the i-th of num_steps keys; the kept draws are the states after
    steps num_burnin, num_burnin + thin, ...; nothing else is stored."""
    dt = z0.dtype
    eps = jnp.asarray(s.step_size, dt)
    free = free.astype(dt)
    rms = s.preconditioner == "rmsprop"
    decay, delta = jnp.asarray(s.rmsprop_decay, dt), jnp.asarray(s.rmsprop_epsilon, dt)

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
    V0 = g0 * g0 if rms else None

    def step(carry, k, adapt=False):
        z, U, g, V = carry
        G = free / (delta + jnp.sqrt(V)) if rms else free
        k_noise, k_batch = jax.random.split(k)
        z_new = z - 0.5 * eps * G * g + jnp.sqrt(eps * G) * jax.random.normal(k_noise, z.shape, dt)
        U_new, g_new = vg(z_new, k_batch)
        # the potential at both ends on one batch (a mini-batch's U differs from the last batch's by its sampling
        # noise, of order n beta / sqrt(batch), which would swamp the step's own error): one more forward pass
        U_here = U if s.batch_size is None else potential(z, k_batch)
        inv = jnp.where(G > 0, 1 / jnp.where(G > 0, G, 1), 0)             # G^-1 on the free coordinates
        fwd = jnp.sum(inv * (z_new - z + 0.5 * eps * G * g) ** 2) / (2 * eps)
        bwd = jnp.sum(inv * (z - z_new + 0.5 * eps * G * g_new) ** 2) / (2 * eps)
        log_alpha = jnp.minimum(0.0, U_here - U_new + fwd - bwd)
        alpha = jnp.exp(jnp.where(jnp.isnan(log_alpha), -jnp.inf, log_alpha))
        V_new = decay * V + (1 - decay) * g_new * g_new if rms and adapt else V
        return (z_new, U_new, g_new, V_new), alpha

    def run(carry, keys, adapt=False):                     # steps without output: (carry, sum of acceptances)
        carry, alpha = jax.lax.scan(lambda c, k: step(c, k, adapt), carry, keys)
        return carry, jnp.sum(alpha)

    def emit(carry):
        z, U = carry[0], carry[1]
        return (z if keep_draws else None, U, None if observe_gen is None else observe_gen(*args)(z))

    N, B, thin, T = s.num_steps, s.num_burnin, s.thin, num_kept(s)
    keys = jax.random.split(key, N)
    carry, _ = run((z0, U0, g0, V0), keys[:B], adapt=True)
    carry, accepted = step(carry, keys[B])
    first = emit(carry)

    def block(c, ks):
        c, acc = c
        c, a = run(c, ks)
        return (c, acc + a), emit(c)

    blocks = keys[B + 1:B + 1 + (T - 1) * thin].reshape((T - 1, thin) + keys.shape[1:])
    (carry, accepted), rest = jax.lax.scan(block, (carry, accepted), blocks)
    carry, tail = run(carry, keys[B + 1 + (T - 1) * thin:])
    kept = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), first, rest)
    return kept + ((accepted + tail) / (N - B),)


def run_sgld(keys, potential_gen, init_z, args, settings: SGLDSettings, *, moves=None, devices=None,
             progress=None, observe=None, keep_draws: bool = True, free=None) -> Draws:
    """SGLD chains from init_z; see :func:`slt_relu.sampling.sample`.  Returns
    :class:`~slt_relu.sampling.Draws` whose ``info`` is an :class:`SGLDInfo`.  moves, progress: unused
    (SGLD has no symmetry proposals; one compiled call).  Beyond :func:`~slt_relu.sampling.sample`'s arguments:

    Args:
        observe: hashable, ``observe(*args_c)(z)`` a scalar evaluated at each kept draw inside the scan
            (``SGLDInfo.observed``), e.g. the loss on all of a chain's data.
        keep_draws: False keeps no draws (``Draws.z`` is None): memory independent of D x T.
        free: (D,) bool, the coordinates that move (default all); the others stay at init_z's values.
    """
    s = settings
    start = time.time()
    D = np.shape(init_z)[-1]
    free = np.ones(D, bool) if free is None else np.asarray(free, bool)
    if free.shape != (D,):
        raise ValueError(f"free: expected a boolean mask of shape ({D},), got shape {free.shape}")
    free = jnp.broadcast_to(jnp.asarray(free), (np.shape(init_z)[0], D))
    fn = StaticPartial(_chain, (s, potential_gen, observe, bool(keep_draws)))
    z, U, observed, accept = run_sharded(fn, (init_z, keys, free, args), devices=devices)
    z, observed = (None if a is None else np.asarray(a) for a in (z, observed))
    C = np.shape(U)[0]
    grads = np.full(C, s.num_steps + 1)
    return Draws(z, np.asarray(U), SGLDInfo(np.asarray(accept), observed), grads, None, s.num_steps + 1,
                 time.time() - start)


register(SGLDSettings, run_sgld, SGLDInfo)
