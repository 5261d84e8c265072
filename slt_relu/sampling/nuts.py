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

The algorithm per chain is numpyro's NUTS, step for step (``numpyro.infer.hmc_util``):
multinomial sampling inside a subtree, biased progressive sampling between subtrees, the
generalised U-turn criterion (Betancourt 2017, A.4.2) on the whole tree and, through
checkpoints, on every sub-subtree (the iterative NUTS of Phan et al. 2019), divergence when
the energy error exceeds ``max_delta_energy``; warmup is numpyro's ``warmup_adapter`` (dual
averaging of the step size towards ``target_accept_prob``, a Welford estimate of the
diagonal or dense inverse mass matrix in Stan's windows), called at the end of each of the
chain's own iterations.  The step-size heuristic runs once at the start, not again at the
window ends (numpyro's default, ``find_heuristic_step_size=False``).

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

Over ~450 lines on purpose: the tree state machine, the queue of chains and the runner are one
algorithm whose parts share their state types.
"""
from __future__ import annotations

import time
from functools import partial
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from pydantic import Field

from ..settings import document_fields
from .base import Draws, MCMCSettings, StaticPartial, register
from .lockstep import run_lockstep
from .sharding import chain_mesh, pad_chains, run_blocks

CPU_SLOTS = 16        # default slots per CPU device (benchmarks/bench_posterior.py); accelerators: all chains


@document_fields
class NUTSSettings(MCMCSettings):
    """NUTS settings: numpyro's algorithm, desynchronised (``schedule="async"``) or numpyro's kernel in lockstep.

    References:
        Hoffman & Gelman 2014; Betancourt 2017 (the generalised U-turn criterion).
    """

    name: Literal["nuts"] = "nuts"
    schedule: Literal["async", "lockstep"] = Field("async", description="async: each chain walks its own tree, "
                                                   "one leapfrog step per tick; lockstep: numpyro's kernel vmapped")
    max_tree_depth: int = Field(10, ge=1, le=20, description="NUTS's maximum tree depth")
    max_delta_energy: float = Field(1000.0, gt=0, description="energy error counted as a divergence")
    slots: int | None = Field(None, ge=1, description="async: chains ticking at once (default 16 per CPU device, "
                              "all chains on an accelerator); a finished slot takes the next chain")


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
# the async NUTS state machine (one chain; vmapped and sharded below)


class _Tree(NamedTuple):
    """numpyro's TreeInfo on flat arrays."""

    z_left: jax.Array
    r_left: jax.Array
    g_left: jax.Array
    z_right: jax.Array
    r_right: jax.Array
    g_right: jax.Array
    z_prop: jax.Array
    pe_prop: jax.Array
    g_prop: jax.Array
    energy_prop: jax.Array
    depth: jax.Array
    weight: jax.Array
    r_sum: jax.Array
    turning: jax.Array
    diverging: jax.Array
    sum_accept: jax.Array
    num_proposals: jax.Array


class _Chain(NamedTuple):
    energy0: jax.Array          # energy at the start of the current trajectory
    tree: _Tree                 # the trajectory so far (its proposal is the next state)
    sub: _Tree                  # the subtree being built
    r_ckpts: jax.Array          # (max_depth, D) checkpoints of the iterative U-turn check
    r_sum_ckpts: jax.Array
    going_right: jax.Array
    adapt: tuple                # numpyro HMCAdaptState
    i: jax.Array                # finished iterations (warmup included)
    key: jax.Array
    grad_evals: jax.Array
    warmup_divergences: jax.Array
    flip_pending: jax.Array     # the next tick is the symmetry proposal (symmetry_moves)
    flips: jax.Array            # symmetry proposals made / accepted
    flips_accepted: jax.Array


class _Draw(NamedTuple):
    """What a tick records: draw k of the chain, if `write`."""

    write: jax.Array
    k: jax.Array
    z: jax.Array
    pe: jax.Array
    steps: jax.Array
    accept: jax.Array
    diverging: jax.Array
    energy: jax.Array           # the Hamiltonian at the draw with the momentum it was reached with (numpyro's)


def _where(pred, a, b):
    return jax.tree.map(lambda x, y: jnp.where(pred, x, y), a, b)


def _where_rows(pred, a, b):
    """Row-wise select: pred (B,) picks rows of leaves with a leading axis B."""
    return jax.tree.map(lambda x, y: jnp.where(pred.reshape(pred.shape + (1,) * (x.ndim - 1)), x, y), a, b)


def _kinetic(imm, r):
    return 0.5 * jnp.dot(r, imm @ r if imm.ndim == 2 else imm * r)


def _velocity(imm, r):
    return imm @ r if imm.ndim == 2 else imm * r


def _is_turning(imm, r_left, r_right, r_sum):
    """Generalised no-U-turn criterion (Betancourt 2017, A.4.2), numpyro's form."""
    r_sum = r_sum - (r_left + r_right) / 2
    return (jnp.dot(_velocity(imm, r_left), r_sum) <= 0) | (jnp.dot(_velocity(imm, r_right), r_sum) <= 0)


def _ckpt_idxs(n):
    """numpyro's _leaf_idx_to_ckpt_idxs: the checkpoints leaf n is checked against."""
    idx_max = jax.lax.population_count(n >> 1)
    num_subtrees = jax.lax.population_count((~n & (n + 1)) - 1)
    return idx_max - num_subtrees + 1, idx_max


def _leaf(tree: _Tree, right):
    return (jnp.where(right, tree.z_right, tree.z_left), jnp.where(right, tree.r_right, tree.r_left),
            jnp.where(right, tree.g_right, tree.g_left))


def _combine(cur: _Tree, new: _Tree, imm, right, key, biased: bool) -> _Tree:
    """numpyro's _combine_tree: the new (sub)tree joins the current one on the `right` side."""
    z_left, r_left, g_left = _where(right, (cur.z_left, cur.r_left, cur.g_left), (new.z_left, new.r_left, new.g_left))
    z_right, r_right, g_right = _where(right, (new.z_right, new.r_right, new.g_right),
                                       (cur.z_right, cur.r_right, cur.g_right))
    r_sum = cur.r_sum + new.r_sum
    if biased:
        prob = jnp.where(new.turning | new.diverging, 0.0, jnp.minimum(jnp.exp(new.weight - cur.weight), 1.0))
        turning = new.turning | _is_turning(imm, r_left, r_right, r_sum)
    else:
        prob = jax.nn.sigmoid(new.weight - cur.weight)
        turning = cur.turning
    take = jax.random.bernoulli(key, prob)
    z_prop, pe_prop, g_prop, e_prop = _where(take, (new.z_prop, new.pe_prop, new.g_prop, new.energy_prop),
                                             (cur.z_prop, cur.pe_prop, cur.g_prop, cur.energy_prop))
    return _Tree(z_left, r_left, g_left, z_right, r_right, g_right, z_prop, pe_prop, g_prop, e_prop,
                 cur.depth + 1, jnp.logaddexp(cur.weight, new.weight), r_sum, turning, new.diverging,
                 cur.sum_accept + new.sum_accept, cur.num_proposals + new.num_proposals)


def _fresh_tree(z, r, pe, g, energy) -> _Tree:
    dt = z.dtype
    return _Tree(z, r, g, z, r, g, z, pe, g, energy, jnp.int32(0), jnp.zeros((), dt), r, jnp.bool_(False),
                 jnp.bool_(False), jnp.zeros((), dt), jnp.int32(0))


def _adapters(s: NUTSSettings, potential_fn):
    """numpyro's warmup adapter: (init with the step-size heuristic, update without it)."""
    from numpyro.infer.hmc import momentum_generator
    from numpyro.infer.hmc_util import euclidean_kinetic_energy, find_reasonable_step_size, warmup_adapter

    kw = dict(adapt_step_size=True, adapt_mass_matrix=True, dense_mass=s.dense_mass,
              target_accept_prob=s.target_accept_prob)
    frss = partial(find_reasonable_step_size, potential_fn, euclidean_kinetic_energy, momentum_generator)
    wa_init, _ = warmup_adapter(max(s.num_warmup, 1), find_reasonable_step_size=frss, **kw)
    _, wa_update = warmup_adapter(max(s.num_warmup, 1), **kw)
    return wa_init, wa_update


def _init_chain(s: NUTSSettings, potential_gen, z0, key, args) -> _Chain:
    from numpyro.infer.hmc import momentum_generator

    U = potential_gen(*args)
    wa_init, _ = _adapters(s, U)
    k_adapt, k_mom, key = jax.random.split(key, 3)
    pe, g = jax.value_and_grad(U)(z0)
    adapt = wa_init((z0, None, pe, g), k_adapt, jnp.asarray(s.step_size, z0.dtype))
    r = momentum_generator(z0, adapt.mass_matrix_sqrt, k_mom)
    energy = pe + _kinetic(adapt.inverse_mass_matrix, r)
    tree = _fresh_tree(z0, r, pe, g, energy)
    D = z0.shape[0]
    return _Chain(energy, tree, tree, jnp.zeros((s.max_tree_depth, D), z0.dtype),
                  jnp.zeros((s.max_tree_depth, D), z0.dtype), jnp.bool_(True), adapt, jnp.int32(0), key,
                  jnp.int32(0), jnp.int32(0), jnp.bool_(False), jnp.int32(0), jnp.int32(0))


def _tick(s: NUTSSettings, potential_gen, moves, c: _Chain, args) -> tuple[_Chain, _Draw]:
    """One leapfrog step of one chain's NUTS tree, and whatever bookkeeping it finishes; with moves,
    on the tick after a tree ends, the symmetry proposal instead (module docstring)."""
    from numpyro.infer.hmc import momentum_generator
    from numpyro.infer.hmc_util import IntegratorState, euclidean_kinetic_energy, velocity_verlet

    from .involution import metropolis_hastings

    U = potential_gen(*args)
    _, wa_update = _adapters(s, U)
    if moves is None:
        key, k_sub, k_merge, k_dir, k_mom = jax.random.split(c.key, 5)
    else:
        key, k_sub, k_merge, k_dir, k_mom, k_move, k_flip = jax.random.split(c.key, 7)
        z_flip, log_det = moves(k_move, c.tree.z_left)
    imm, eps = c.adapt.inverse_mass_matrix, c.adapt.step_size
    tree, sub, right = c.tree, c.sub, c.going_right
    first = sub.num_proposals == 0

    # one leapfrog step from the end of the tree (first leaf) or of the subtree
    z, r, g = _where(first, _leaf(tree, right), _leaf(sub, right))
    if moves is None:
        _, vv_update = velocity_verlet(U, euclidean_kinetic_energy)
        z1, r1, pe1, g1 = vv_update(jnp.where(right, eps, -eps), imm, IntegratorState(z, r, 0.0, g))
    else:                                 # numpyro's velocity Verlet, its gradient at z_flip when the proposal is due
        step = jnp.where(right, eps, -eps)
        r_half = r - 0.5 * step * g
        z1 = jnp.where(c.flip_pending, z_flip, z + step * _velocity(imm, r_half))
        pe1, g1 = jax.value_and_grad(U)(z1)
        r1 = r_half - 0.5 * step * g1
    energy1 = pe1 + _kinetic(imm, r1)
    delta = energy1 - c.energy0
    delta = jnp.where(jnp.isnan(delta), jnp.inf, delta)
    leaf = _Tree(z1, r1, g1, z1, r1, g1, z1, pe1, g1, energy1, tree.depth, -delta, r1, jnp.bool_(False),
                 delta > s.max_delta_energy, jnp.minimum(jnp.exp(-delta), 1.0), jnp.int32(1))
    sub = _where(first, leaf, _combine(sub, leaf, imm, right, k_sub, biased=False)._replace(depth=tree.depth))

    # iterative U-turn check against the checkpoints (numpyro's _iterative_build_subtree)
    n = c.sub.num_proposals
    idx_min, idx_max = _ckpt_idxs(n)
    even = n % 2 == 0
    r_ckpts = jnp.where(even, c.r_ckpts.at[idx_max].set(r1), c.r_ckpts)
    r_sum_ckpts = jnp.where(even, c.r_sum_ckpts.at[idx_max].set(sub.r_sum), c.r_sum_ckpts)
    ks = jnp.arange(s.max_tree_depth)
    sub_r_sum = sub.r_sum[None] - r_sum_ckpts + r_ckpts
    turn_k = jax.vmap(lambda rl, rs: _is_turning(imm, rl, r1, rs))(r_ckpts, sub_r_sum)
    sub_turning = jnp.any(turn_k & (ks >= idx_min) & (ks <= idx_max))
    sub = sub._replace(turning=sub_turning)
    sub_done = (sub.num_proposals >= 2 ** tree.depth) | sub_turning | sub.diverging

    # a finished subtree joins the tree
    tree = _where(sub_done, _combine(tree, sub, imm, right, k_merge, biased=True), tree)
    tree_done = sub_done & ((tree.depth >= s.max_tree_depth) | tree.turning | tree.diverging)

    # a finished tree is an iteration: adapt, record, draw the next momentum
    accept = tree.sum_accept / jnp.maximum(tree.num_proposals, 1)
    steps = tree.num_proposals
    i = c.i
    warm = i < s.num_warmup
    adapt = c.adapt
    if s.num_warmup:
        adapt = _where(tree_done & warm, wa_update(i, accept, (tree.z_prop, None, tree.pe_prop, tree.g_prop), adapt),
                       adapt)
    j = i - s.num_warmup
    write = tree_done & (j >= 0) & (j % s.thin == 0) & (j // s.thin < s.num_samples)
    diverging = tree.diverging
    draw = _Draw(write, jnp.clip(j // s.thin, 0, s.num_samples - 1), tree.z_prop, tree.pe_prop, steps, accept,
                 diverging, tree.energy_prop)
    r_new = momentum_generator(tree.z_prop, adapt.mass_matrix_sqrt, k_mom)
    energy_new = tree.pe_prop + _kinetic(adapt.inverse_mass_matrix, r_new)
    tree = _where(tree_done, _fresh_tree(tree.z_prop, r_new, tree.pe_prop, tree.g_prop, energy_new), tree)
    active = i < s.num_warmup + s.num_samples * s.thin
    stepped = _Chain(
        jnp.where(tree_done, energy_new, c.energy0), tree, sub._replace(num_proposals=jnp.where(
            sub_done, 0, sub.num_proposals)), r_ckpts, r_sum_ckpts,
        jnp.where(sub_done, jax.random.bernoulli(k_dir), right), adapt, i + tree_done.astype(i.dtype), key,
        c.grad_evals + active.astype(jnp.int32),
        c.warmup_divergences + (tree_done & warm & diverging), tree_done & ~warm & (moves is not None), c.flips,
        c.flips_accepted)
    if moves is None:
        return stepped, draw
    # the symmetry proposal from the fresh tree's start z (potential c.tree.pe_prop), keeping its momentum
    flip = metropolis_hastings(k_flip, c.tree.pe_prop - pe1 + log_det)
    r0 = c.tree.r_left
    energy_flip = pe1 + _kinetic(imm, r0)
    flipped = c._replace(energy0=jnp.where(flip, energy_flip, c.energy0),
                         tree=_where(flip, _fresh_tree(z_flip, r0, pe1, g1, energy_flip), c.tree), key=key,
                         grad_evals=c.grad_evals + active.astype(jnp.int32), flip_pending=jnp.bool_(False),
                         flips=c.flips + active.astype(jnp.int32),
                         flips_accepted=c.flips_accepted + (active & flip).astype(jnp.int32))
    return _where(c.flip_pending, flipped, stepped), draw._replace(write=draw.write & ~c.flip_pending)


# ----------------------------------------------------------------------------------------
# running many chains


class _Queue(NamedTuple):
    """One device's async run: `slots` chains tick together; a slot whose chain has finished
    takes the next task (chain) of the device's queue.  Draws go straight to per-task buffers."""

    chains: _Chain              # (slots,)
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
    chains = jax.eval_shape(jax.vmap(lambda z, k, a: _init_chain(s, potential_gen, z, k, a)),
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
    fresh = jax.vmap(lambda z, k, a: _init_chain(s, potential_gen, z, k, a))(z0[src], keys[src], new_args)
    return q._replace(chains=_where_rows(assign, fresh, q.chains), slot_args=_where_rows(assign, new_args, q.slot_args),
                      task=jnp.where(assign, new_task, jnp.where(free, -1, q.task)).astype(jnp.int32),
                      next_task=jnp.minimum(q.next_task + jnp.sum(free), T).astype(jnp.int32))


def _advance(s: NUTSSettings, potential_gen, moves, max_ticks: int, q: _Queue, z0, keys, args):
    """Up to max_ticks ticks of one device's queue, each after starting the next tasks in the slots whose chain
    finished or that are idle (a fresh queue's first tasks start so); returns (queue, ticks run (1,))."""
    tick = jax.vmap(lambda c, a: _tick(s, potential_gen, moves, c, a))
    T = q.done.shape[0]

    def ticked(q):
        chains, d = tick(q.chains, q.slot_args)
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
