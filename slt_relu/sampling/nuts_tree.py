"""NUTS for one chain as a state machine that advances by one leapfrog step per *tick* (the desynchronised
schedule of ``slt_relu.sampling.nuts`` vmaps it over chains, each walking its own tree).

The algorithm per chain is numpyro's NUTS, step for step (``numpyro.infer.hmc_util``):
multinomial sampling inside a subtree, biased progressive sampling between subtrees, the
generalised U-turn criterion (Betancourt 2017, A.4.2) on the whole tree and, through
checkpoints, on every sub-subtree (the iterative NUTS of Phan et al. 2019), divergence when
the energy error exceeds ``max_delta_energy``; warmup is numpyro's ``warmup_adapter`` (dual
averaging of the step size towards ``target_accept_prob``, a Welford estimate of the
diagonal or dense inverse mass matrix in Stan's windows), called at the end of each of the
chain's own iterations.  The step-size heuristic runs once at the start, not again at the
window ends (numpyro's default, ``find_heuristic_step_size=False``).
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from .settings import NUTSSettings

__all__ = ["Chain", "Draw", "Tree", "init_chain", "tick", "where_rows"]


class Tree(NamedTuple):
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


class Chain(NamedTuple):
    """One chain's state between ticks: its trajectory, the subtree being built, the U-turn checkpoints, the
    warmup adaptation and its counters (the comments beside the fields)."""

    energy0: jax.Array          # energy at the start of the current trajectory
    tree: Tree                 # the trajectory so far (its proposal is the next state)
    sub: Tree                  # the subtree being built
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


class Draw(NamedTuple):
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


def where_rows(pred, a, b):
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


def _leaf(tree: Tree, right):
    return (jnp.where(right, tree.z_right, tree.z_left), jnp.where(right, tree.r_right, tree.r_left),
            jnp.where(right, tree.g_right, tree.g_left))


def _combine(cur: Tree, new: Tree, imm, right, key, biased: bool) -> Tree:
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
    return Tree(z_left, r_left, g_left, z_right, r_right, g_right, z_prop, pe_prop, g_prop, e_prop,
                 cur.depth + 1, jnp.logaddexp(cur.weight, new.weight), r_sum, turning, new.diverging,
                 cur.sum_accept + new.sum_accept, cur.num_proposals + new.num_proposals)


def _fresh_tree(z, r, pe, g, energy) -> Tree:
    dt = z.dtype
    return Tree(z, r, g, z, r, g, z, pe, g, energy, jnp.int32(0), jnp.zeros((), dt), r, jnp.bool_(False),
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


def init_chain(s: NUTSSettings, potential_gen, z0, key, args) -> Chain:
    """A chain at ``z0`` before its first tick: the warmup adapter started (its step-size heuristic run),
    fresh momentum, a one-point tree."""
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
    return Chain(energy, tree, tree, jnp.zeros((s.max_tree_depth, D), z0.dtype),
                  jnp.zeros((s.max_tree_depth, D), z0.dtype), jnp.bool_(True), adapt, jnp.int32(0), key,
                  jnp.int32(0), jnp.int32(0), jnp.bool_(False), jnp.int32(0), jnp.int32(0))


def tick(s: NUTSSettings, potential_gen, moves, c: Chain, args) -> tuple[Chain, Draw]:
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
    leaf = Tree(z1, r1, g1, z1, r1, g1, z1, pe1, g1, energy1, tree.depth, -delta, r1, jnp.bool_(False),
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
    draw = Draw(write, jnp.clip(j // s.thin, 0, s.num_samples - 1), tree.z_prop, tree.pe_prop, steps, accept,
                 diverging, tree.energy_prop)
    r_new = momentum_generator(tree.z_prop, adapt.mass_matrix_sqrt, k_mom)
    energy_new = tree.pe_prop + _kinetic(adapt.inverse_mass_matrix, r_new)
    tree = _where(tree_done, _fresh_tree(tree.z_prop, r_new, tree.pe_prop, tree.g_prop, energy_new), tree)
    active = i < s.num_warmup + s.num_samples * s.thin
    stepped = Chain(
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
