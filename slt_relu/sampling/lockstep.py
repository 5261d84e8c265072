"""numpyro's own NUTS and HMC kernels, vmapped: every chain one ``lax.scan`` of warm-up and draws.

All chains run in lockstep, so each NUTS iteration costs the largest tree among them (the async
schedule of ``slt_relu.sampling.nuts`` removes that wait); with a fixed number of leapfrog steps (HMC)
lockstep wastes nothing.  This is the reference the async NUTS is tested against (``tests/test_nuts.py``)
and how ``slt_relu.sampling.hmc`` runs.  With ``symmetry_moves`` each iteration after warm-up
ends with one Metropolis-Hastings proposal along an involution (``slt_relu.sampling.involution``), accepted
with min(1, exp(U(z) - U(z')) |det dz'/dz|); numpyro draws the next momentum afresh, so the kernel leaves
the target invariant.  Runs through :func:`slt_relu.sampling.sharding.run_sharded`.
"""
from __future__ import annotations

import math
import time
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .base import Draws, StaticPartial
from .sharding import run_sharded

__all__ = ["HMCInfo", "run_lockstep"]


class HMCInfo(NamedTuple):
    """The statistics of numpyro's kernel in lockstep (HMC, and NUTS's ``schedule="lockstep"`` before
    its tree depth is added, ``slt_relu.sampling.nuts.NUTSInfo``); C chains, S kept draws each, D
    unconstrained coordinates.

    Attributes:
        num_steps: (C, S) leapfrog steps of the trajectory that gave each draw.
        accept_prob: (C, S) its acceptance probability (NUTS: the mean of min(1, exp(-delta H)) over the
            trajectory's states).
        diverging: (C, S) whether the trajectory diverged (an energy error above numpyro's bound).
        energy: (C, S) the Hamiltonian at the draw, with the momentum it was reached with.
        step_size: (C,) the step size warm-up adapted.
        inverse_mass_matrix: (C, D) (dense mass: (C, D, D)) the inverse mass matrix warm-up adapted.
        warmup_divergences: (C,) divergent trajectories during warm-up.
        symmetry_accept: (C,) the accepted fraction of the symmetry proposals after warm-up; None without
            symmetry moves.
    """

    num_steps: np.ndarray
    accept_prob: np.ndarray
    diverging: np.ndarray
    energy: np.ndarray
    step_size: np.ndarray
    inverse_mass_matrix: np.ndarray
    warmup_divergences: np.ndarray
    symmetry_accept: np.ndarray | None = None


class _ChainRun(NamedTuple):
    """One chain's run: its kept draws (S, D), their potential (S,), its statistics (:class:`HMCInfo`,
    without the chain axis) and the gradients of every iteration (warm-up included, the flips' too)."""

    z: jax.Array
    potential_energy: jax.Array
    info: HMCInfo
    gradients: jax.Array


def _lockstep_chain(s, potential_gen, moves, z0, key, args) -> _ChainRun:
    """One chain of numpyro's own kernel (NUTS or HMC): warm-up, then the kept iterations, each a
    lax.scan; with moves, each kept iteration ends with the symmetry proposal (module docstring)."""
    from numpyro.infer.hmc import hmc

    from .involution import metropolis_hastings

    init_kernel, sample_kernel = hmc(potential_fn_gen=potential_gen, algo=s.name.upper())
    total = s.num_warmup + s.num_samples * s.thin
    k_init, k_moves = jax.random.split(key)
    state = init_kernel(z0, s.num_warmup, step_size=s.step_size, dense_mass=s.dense_mass,
                        target_accept_prob=s.target_accept_prob, num_steps=getattr(s, "num_steps", None),
                        trajectory_length=getattr(s, "trajectory_length", 2 * math.pi),
                        max_tree_depth=getattr(s, "max_tree_depth", 10), model_args=args, rng_key=k_init)

    U = potential_gen(*args)

    def flip(st, key):
        """The symmetry proposal from st.z: (state, accepted)."""
        k_move, k_accept = jax.random.split(key)
        z_new, log_det = moves(k_move, st.z)
        pe_new, g_new = jax.value_and_grad(U)(z_new)
        accept = metropolis_hastings(k_accept, st.potential_energy - pe_new + log_det)
        moved = st._replace(z=jnp.where(accept, z_new, st.z), z_grad=jnp.where(accept, g_new, st.z_grad),
                            potential_energy=jnp.where(accept, pe_new, st.potential_energy))
        return moved, accept

    def body(with_moves, st, key):
        st = sample_kernel(st, model_args=args)
        draw = (st.z, st.potential_energy, st.num_steps + with_moves, st.accept_prob, st.diverging, st.energy)
        if not with_moves:
            return st, draw + (jnp.bool_(False),)
        st, accept = flip(st, key)
        return st, draw + (accept,)

    # warm-up without the moves (module docstring), then the kept iterations with them
    step_keys = jax.random.split(k_moves, total)
    state, warm = jax.lax.scan(partial(body, False), state, step_keys[:s.num_warmup])
    state, kept = jax.lax.scan(partial(body, moves is not None), state, step_keys[s.num_warmup:])
    z, pe, ns, acc, div, energy, flips = (jnp.concatenate([a, b]) for a, b in zip(warm, kept))
    keep = slice(s.num_warmup, total, s.thin)
    ns_kept = ns[keep] - (moves is not None)         # leapfrog steps of the trajectory; ns: gradients
    info = HMCInfo(ns_kept, acc[keep], div[keep], energy[keep], state.adapt_state.step_size,
                   state.adapt_state.inverse_mass_matrix, jnp.sum(div[:s.num_warmup]),
                   None if moves is None else jnp.mean(flips[s.num_warmup:].astype(z.dtype)))
    return _ChainRun(z[keep], pe[keep], info, ns)


def run_lockstep(keys, potential_gen, init_z, args, settings, *, moves=None, devices=None) -> Draws:
    """NUTS (``schedule="lockstep"``) or HMC chains of numpyro's kernel in lockstep; see
    :func:`slt_relu.sampling.sample`.  Returns :class:`~slt_relu.sampling.Draws` whose ``info`` is an
    :class:`HMCInfo` (``symmetry_accept``, each chain's accepted fraction of the proposals after warm-up,
    with ``settings.symmetry_moves``)."""
    s = settings
    start = time.time()
    moves = moves if s.symmetry_moves else None
    out = run_sharded(StaticPartial(_lockstep_chain, (s, potential_gen, moves)), (init_z, keys, args), devices=devices)
    out = jax.tree.map(np.asarray, out)
    # lockstep: every iteration costs the largest tree among the chains
    return Draws(out.z, out.potential_energy, out.info, out.gradients.sum(1), None, int(out.gradients.max(0).sum()),
                 time.time() - start)
