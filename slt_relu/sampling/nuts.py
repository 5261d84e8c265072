"""Many NUTS chains in one compiled program, desynchronised.

Every chain has its own potential (its own data set, its own tempering): the potential is
``potential_gen(*args)`` with ``args`` carrying a leading chain axis.  Chains are vmapped in
one program and sharded over ``jax.local_devices()`` (``jax.shard_map`` over a ``chains`` mesh axis):
one CPU, several host devices (``XLA_FLAGS=--xla_force_host_platform_device_count=N``) or a GPU
run the same code.

``schedule="async"`` (NUTS only, the default).  NUTS builds a trajectory tree whose size
varies from one iteration to the next (Hoffman & Gelman 2014).  Vmapping numpyro's sampler
runs the tree-building loops in lockstep, so every chain waits for the largest tree among
all chains at every iteration, and the waste grows with the number of chains (docs/notes.md
has the measurement).  Here the tree is a state machine that
advances by one leapfrog step per *tick*; all chains tick together (one vmapped gradient)
but each walks its own tree and starts its next iteration as soon as its tree is done, so
only the chains that have finished all their iterations idle, at the very end.

The algorithm per chain: ``slt_relu.sampling.nuts_tree`` (a tree that grows one leapfrog step per tick).

With ``symmetry_moves`` (and ``moves``, ``slt_relu.sampling.involution``) every trajectory after
warm-up is followed by one Metropolis-Hastings proposal z' = move(z), accepted with
min(1, exp(U(z) - U(z')) |det dz'/dz|); the momentum, drawn independently of z, is kept, so the kernel
on (z, r) leaves the target invariant.  None during warm-up: a chain jumping between mirrored modes
would inflate the adapted mass matrix by their separation.  In the async schedule the proposal takes
the tick after the tree ends (its one gradient evaluation is the tick's), so the chains stay in step;
the draw is recorded before it.

``schedule="lockstep"``: numpyro's own ``hmc`` kernel vmapped, each chain one ``lax.scan``
(``slt_relu.sampling.lockstep``): the reference the async schedule is tested against (and how
HMC runs, ``slt_relu.sampling.hmc``).  Both go through ``slt_relu.sampling.sharding``.

"""
from __future__ import annotations

import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .base import Draws, StaticPartial, register
from .lockstep import run_lockstep
from .nuts_tree import Chain, init_chain, tick, where_rows
from .sharding import chain_mesh, pad_chains, run_blocks
from .settings import NUTSSettings

__all__ = ["NUTSInfo", "run_nuts", "tree_depth"]

CPU_SLOTS = 16        # default slots per CPU device (benchmarks/bench_posterior.py); accelerators: all chains


class NUTSInfo(NamedTuple):
    """NUTS's statistics, either schedule; C chains, S kept draws each, D unconstrained coordinates.

    Attributes:
        num_steps: (C, S) leapfrog steps of the trajectory that gave each draw.
        tree_depth: (C, S) its tree depth, floor(log2 num_steps) + 1 (:func:`tree_depth`).
        accept_prob: (C, S) the mean of min(1, exp(-delta H)) over the trajectory's states (numpyro's).
        diverging: (C, S) whether the trajectory diverged (delta H > max_delta_energy).
        energy: (C, S) the Hamiltonian at the draw, with the momentum it was reached with.
        step_size: (C,) the step size warm-up adapted.
        inverse_mass_matrix: (C, D) (dense mass: (C, D, D)) the inverse mass matrix warm-up adapted.
        warmup_divergences: (C,) divergent trajectories during warm-up.
        symmetry_accept: (C,) the accepted fraction of the symmetry proposals after warm-up; None without
            symmetry moves.
    """

    num_steps: np.ndarray
    tree_depth: np.ndarray
    accept_prob: np.ndarray
    diverging: np.ndarray
    energy: np.ndarray
    step_size: np.ndarray
    inverse_mass_matrix: np.ndarray
    warmup_divergences: np.ndarray
    symmetry_accept: np.ndarray | None = None


# ----------------------------------------------------------------------------------------
# running many chains


class _Queue(NamedTuple):
    """One device's async run: `slots` chains tick together; a slot whose chain has finished
    takes the next task (chain) of the device's queue.  Draws go straight to per-task buffers."""

    chains: Chain              # (slots,)
    slot_args: tuple            # (slots, ...) the data of each slot's task
    task: jax.Array             # (slots,) task of each slot, -1 when idle
    next_task: jax.Array        # (1,) first task not started
    done: jax.Array             # (T,) finished tasks
    z: jax.Array                # (T, S, D)
    pe: jax.Array               # (T, S)
    steps: jax.Array
    accept: jax.Array
    diverging: jax.Array
    energy: jax.Array
    step_size: jax.Array        # (T,)
    inverse_mass_matrix: jax.Array
    grad_evals: jax.Array
    warmup_divergences: jax.Array
    symmetry_accept: jax.Array  # (T,) accepted fraction of the task's symmetry proposals


def _take(tree, idx):
    return jax.tree.map(lambda a: a[idx], tree)


def _idle_queue(s: NUTSSettings, potential_gen, slots: int, z0, keys, args, mesh) -> _Queue:
    """Every device's queue with its `slots` slots idle (task -1) and no task started, made on the host: the
    first tick of :func:`_advance` starts the first tasks through :func:`_refill`, so no program of its own
    compiles the start.  z0, keys (raw key data), args: the padded chains (Cp, ...), device by device."""
    nd = mesh.devices.size
    Cp, D = z0.shape
    S, n, dt = s.num_samples, slots * nd, z0.dtype
    rows = lambda a: jax.ShapeDtypeStruct((n,) + a.shape[1:], a.dtype)
    slot_args = jax.tree.map(rows, args)
    chains = jax.eval_shape(jax.vmap(lambda z, k, a: init_chain(s, potential_gen, z, k, a)),
                            rows(z0), rows(keys), slot_args)
    zeros = lambda tree: jax.tree.map(lambda a: np.zeros(a.shape, a.dtype), tree)
    q = _Queue(zeros(chains), zeros(slot_args), np.full(n, -1, np.int32), np.zeros(nd, np.int32),
               np.zeros(Cp, bool), np.zeros((Cp, S, D), dt), np.zeros((Cp, S), dt), np.zeros((Cp, S), np.int32),
               np.zeros((Cp, S), dt), np.zeros((Cp, S), bool), np.zeros((Cp, S), dt), np.zeros(Cp, dt),
               np.zeros((Cp,) + chains.adapt.inverse_mass_matrix.shape[1:], dt), np.zeros(Cp, np.int32),
               np.zeros(Cp, np.int32), np.zeros(Cp, dt))
    return jax.device_put(q, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("chains")))


def _free_slots(s: NUTSSettings, q: _Queue):
    """(fin, free), (slots,) each: the slots whose chain finished, and those with the idle slots while tasks
    remain (a fresh queue's)."""
    fin = (q.chains.i >= s.num_warmup + s.num_samples * s.thin) & (q.task >= 0)
    return fin, fin | ((q.task < 0) & (q.next_task[0] < q.done.shape[0]))


def _refill(s: NUTSSettings, potential_gen, q: _Queue, z0, keys, args) -> _Queue:
    """Store the results of the slots whose chains finished and start the next tasks in the free slots."""
    T = q.done.shape[0]
    fin, free = _free_slots(s, q)
    idx = jnp.where(fin, q.task, T)                   # out of range: dropped
    c = q.chains
    q = q._replace(done=q.done.at[idx].set(True, mode="drop"),
                   step_size=q.step_size.at[idx].set(c.adapt.step_size, mode="drop"),
                   inverse_mass_matrix=q.inverse_mass_matrix.at[idx].set(c.adapt.inverse_mass_matrix, mode="drop"),
                   grad_evals=q.grad_evals.at[idx].set(c.grad_evals, mode="drop"),
                   warmup_divergences=q.warmup_divergences.at[idx].set(c.warmup_divergences, mode="drop"),
                   symmetry_accept=q.symmetry_accept.at[idx].set(
                       c.flips_accepted / jnp.maximum(c.flips, 1).astype(q.symmetry_accept.dtype), mode="drop"))
    new_task = q.next_task[0] + jnp.cumsum(free) - 1
    assign = free & (new_task < T)
    src = jnp.clip(new_task, 0, T - 1)
    new_args = _take(args, src)
    fresh = jax.vmap(lambda z, k, a: init_chain(s, potential_gen, z, k, a))(z0[src], keys[src], new_args)
    return q._replace(chains=where_rows(assign, fresh, q.chains), slot_args=where_rows(assign, new_args, q.slot_args),
                      task=jnp.where(assign, new_task, jnp.where(free, -1, q.task)).astype(jnp.int32),
                      next_task=jnp.minimum(q.next_task + jnp.sum(free), T).astype(jnp.int32))


def _advance(s: NUTSSettings, potential_gen, moves, max_ticks: int, q: _Queue, z0, keys, args):
    """Up to max_ticks ticks of one device's queue, each after starting the next tasks in the slots whose chain
    finished or that are idle (a fresh queue's first tasks start so); returns (queue, ticks run (1,))."""
    step = jax.vmap(lambda c, a: tick(s, potential_gen, moves, c, a))
    T = q.done.shape[0]

    def ticked(q):
        chains, d = step(q.chains, q.slot_args)
        ti = jnp.where(d.write & (q.task >= 0), q.task, T)
        return q._replace(chains=chains, z=q.z.at[ti, d.k].set(d.z, mode="drop"),
                          pe=q.pe.at[ti, d.k].set(d.pe, mode="drop"),
                          steps=q.steps.at[ti, d.k].set(d.steps, mode="drop"),
                          accept=q.accept.at[ti, d.k].set(d.accept, mode="drop"),
                          diverging=q.diverging.at[ti, d.k].set(d.diverging, mode="drop"),
                          energy=q.energy.at[ti, d.k].set(d.energy, mode="drop"))

    def body(carry):
        t, q = carry
        refill = lambda q: _refill(s, potential_gen, q, z0, keys, args)
        q = jax.lax.cond(jnp.any(_free_slots(s, q)[1]), refill, lambda q: q, q)
        busy = ~jnp.all(q.done)                       # the last chains' end is stored by the refill above
        return t + busy.astype(t.dtype), jax.lax.cond(busy, ticked, lambda q: q, q)

    t, q = jax.lax.while_loop(lambda carry: (carry[0] < max_ticks) & ~jnp.all(carry[1].done), body,
                              (jnp.int32(0), q))
    return q, t[None]


def tree_depth(num_steps) -> np.ndarray:
    """NUTS's tree depth from its leapfrog steps: a trajectory of depth j has 2^(j-1) to 2^j - 1 steps,
    so j = floor(log2(steps)) + 1 (Stan's and ArviZ's ``tree_depth``)."""
    return np.floor(np.log2(np.maximum(np.asarray(num_steps), 1))).astype(np.int32) + 1


def run_nuts(keys, potential_gen, init_z, args, settings: NUTSSettings, *, moves=None, devices=None, progress=None,
             ticks_per_call: int = 2000) -> Draws:
    """NUTS chains, desynchronised (``schedule="async"``, module docstring) or numpyro's kernel in
    lockstep (``schedule="lockstep"``, ``slt_relu.sampling.lockstep``); see
    :func:`slt_relu.sampling.sample`.  With fewer slots than chains, a slot whose
    chain has finished starts the next one, so no slot idles while chains wait (on a CPU, where a
    tick costs in proportion to the slots, this removes most of the wait for the slowest chain).
    progress(done_fraction) is called between compiled calls of ``ticks_per_call`` ticks.  Returns
    :class:`~slt_relu.sampling.Draws` whose ``info`` is a :class:`NUTSInfo` (``symmetry_accept``, each
    chain's accepted fraction of the proposals after warm-up, with ``settings.symmetry_moves``; their
    gradient evaluations are counted)."""
    s = settings
    if s.schedule == "lockstep":
        draws = run_lockstep(keys, potential_gen, init_z, args, s, moves=moves, devices=devices)
        # the kernel's HMCInfo and each trajectory's tree depth
        return draws._replace(info=NUTSInfo(tree_depth=tree_depth(draws.info.num_steps), **draws.info._asdict()))
    moves = moves if s.symmetry_moves else None
    mesh = chain_mesh(devices)
    nd = mesh.devices.size
    C = init_z.shape[0]
    Cp = -(-C // nd) * nd
    z0, keys_p, args_p = pad_chains((init_z, keys, tuple(args)), Cp)
    start = time.time()
    per_device = Cp // nd
    slots = s.slots
    if slots is None:                                 # a CPU device's tick costs in proportion to its slots
        slots = CPU_SLOTS * nd if mesh.devices.flat[0].platform == "cpu" else C
    slots_d = min(per_device, -(-slots // nd))
    q = _idle_queue(s, potential_gen, slots_d, z0, keys_p, args_p, mesh)
    advance = StaticPartial(_advance, (s, potential_gen, moves, int(ticks_per_call)))
    total = s.num_warmup + s.num_samples * s.thin
    ticks = 0
    while True:
        q, t = run_blocks(advance, (z0, keys_p, args_p), mesh, donate_state=q)
        ticks += int(np.max(np.asarray(t)))
        done = np.asarray(q.done)
        if progress is not None:
            i = np.minimum(np.asarray(q.chains.i), total)
            busy = np.asarray(q.task) >= 0
            progress(float(done.sum() * total + i[busy].sum()) / (Cp * total))
        if done.all():
            break
    q = jax.tree.map(lambda x: np.asarray(x), q)
    # tasks are laid out device by device: device k holds chains k * per_device ... (k + 1) * per_device - 1
    info = NUTSInfo(q.steps[:C], tree_depth(q.steps[:C]), q.accept[:C], q.diverging[:C], q.energy[:C],
                    q.step_size[:C], q.inverse_mass_matrix[:C], q.warmup_divergences[:C],
                    None if moves is None else q.symmetry_accept[:C])
    return Draws(q.z[:C], q.pe[:C], info, q.grad_evals[:C], None, ticks, time.time() - start)


register(NUTSSettings, run_nuts, NUTSInfo)
