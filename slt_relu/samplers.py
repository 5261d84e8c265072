"""One interface for every sampler, and one helper that runs many chains on all devices.

A sampler takes a PRNG key per chain, a potential, initial points and its settings, and
returns :class:`Draws`:

    sample(keys (C, 2), potential_gen, init_z (C, D), args, settings) -> Draws

``potential_gen(*args_c) -> U`` builds chain c's potential ``U(z) = -log density(z)`` on flat
unconstrained coordinates z (D,) from that chain's slice of ``args`` (arrays with a leading
chain axis C: each chain its own data set, tempering, localisation).  ``potential_gen`` and the
settings must be hashable values (a NamedTuple of functions and numbers, a frozen settings
model): they are static arguments of ``jax.jit``, so a second call with equal ones reuses the
compiled program.  The settings' type picks the algorithm (``settings.name``): :class:`NUTSSettings`
(``slt_relu.nuts``: desynchronised chains; ``slt_relu.lockstep``: numpyro's kernel in lockstep),
:class:`HMCSettings` (``slt_relu.lockstep``), :class:`SGLDSettings` (``slt_relu.sgld``), ``SMCSettings``
(``slt_relu.smc``, adaptive tempered SMC).  A sampler that returns weighted particles and a log evidence fits the same result: SMC's "chains" are independent
runs, its "draws" the particles, equally weighted after the last resampling, and
``log_evidence`` its estimate of log Z.

:func:`run_sharded` is the helper they share: it vmaps a per-chain function over the chains,
shards them over the process's devices (``jax.local_devices()``; a ``chains`` mesh axis; chains padded to a multiple of the
device count, padding dropped afterwards) and caches the compiled program through ``jax.jit``
on the function's value.
"""
from __future__ import annotations

import math
from functools import partial
from typing import Callable, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P
from pydantic import Field

from .network import check_finite
from .settings import Section


class Draws(NamedTuple):
    """What every sampler returns; C chains (or independent runs), S draws (or particles) each.

    z: (C, S, D) unconstrained draws; potential_energy: (C, S) U at each draw; stats: the
    sampler's statistics by name, per draw (C, S) or per chain (C, ...) (NUTS: num_steps,
    tree_depth, accept_prob, diverging, energy (the Hamiltonian at the draw), step_size,
    inverse_mass_matrix, warmup_divergences; HMC the same but tree_depth); grad_evals:
    (C,) gradient evaluations of each chain, warmup included; log_evidence: (C,) log Z where the
    sampler estimates it (SMC), else None; ticks: vmapped gradient evaluations the program ran
    (the wall-clock work of all chains together); wall_s: seconds, compilation included.
    """

    z: np.ndarray
    potential_energy: np.ndarray
    stats: dict
    grad_evals: np.ndarray
    log_evidence: np.ndarray | None
    ticks: int
    wall_s: float


class StaticPartial(NamedTuple):
    """``fn`` with its first arguments bound, hashable by value (a ``functools.partial`` is hashed
    by identity, so a new one per call would compile a new program)."""

    fn: Callable
    bound: tuple

    def __call__(self, *args):
        return self.fn(*self.bound, *args)


class Unravel(NamedTuple):
    """Flat (D,) -> the pytree it came from; hashable by value (jax's ``ravel_pytree`` returns a
    closure), so potentials holding it can be static ``jax.jit`` arguments."""

    treedef: object
    shapes: tuple
    dtypes: tuple

    def __call__(self, flat):
        sizes = [math.prod(s) for s in self.shapes]
        parts = jnp.split(flat, np.cumsum(sizes)[:-1]) if len(sizes) > 1 else [flat]
        leaves = [p.reshape(s).astype(d) for p, s, d in zip(parts, self.shapes, self.dtypes)]
        return jax.tree.unflatten(self.treedef, leaves)


def unravel_fn(tree) -> tuple[jax.Array, Unravel]:
    """(flat (D,), :class:`Unravel`) of a pytree of arrays, leaves in tree order."""
    leaves, treedef = jax.tree.flatten(tree)
    leaves = [jnp.asarray(a) for a in leaves]
    dtype = jnp.result_type(*leaves) if leaves else jnp.float32
    flat = jnp.concatenate([a.reshape(-1).astype(dtype) for a in leaves]) if leaves else jnp.zeros(0, dtype)
    return flat, Unravel(treedef, tuple(a.shape for a in leaves), tuple(str(a.dtype) for a in leaves))


def check_keys(keys, name: str = "keys", batch_ndim: int = 1) -> jax.Array:
    """keys as raw uint32 key data (batch + (2,) for the default threefry) if they are PRNG keys
    with ``batch_ndim`` leading axes (1: one key per chain, 0: a single key): typed keys
    (``jax.random.key``, turned into their key data, which the samplers use) or raw key data of the
    default implementation's shape; else TypeError naming them."""
    raw = jax.eval_shape(jax.random.PRNGKey, 0).shape
    want = "a PRNG key" if batch_ndim == 0 else f"a {batch_ndim}-D batch of PRNG keys"
    want += f" (jax.random.key, or uint32 key data with a last axis of {raw[-1]})"
    try:
        k = jnp.asarray(keys)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: expected {want}, got {type(keys).__name__}") from None
    if jnp.issubdtype(k.dtype, jax.dtypes.prng_key) and k.ndim == batch_ndim:
        k = jax.random.key_data(k)
    if not (k.dtype == jnp.uint32 and k.ndim == batch_ndim + len(raw) and k.shape[batch_ndim:] == raw):
        raise TypeError(f"{name}: expected {want}, got a {k.dtype} array of shape {k.shape}")
    return k


# ----------------------------------------------------------------------------------------
# settings of the MCMC samplers (the schema of the config's [sampler] table too)


class _MCMC(Section):
    num_warmup: int = Field(1000, ge=0, description="warm-up iterations per chain (adaptation; not kept)")
    num_samples: int = Field(1000, ge=4, description="kept draws per chain")
    thin: int = Field(1, ge=1, description="keep every thin-th iteration (num_samples counts kept draws)")
    target_accept_prob: float = Field(0.8, gt=0, lt=1, description="dual averaging's target acceptance")
    dense_mass: bool = Field(False, description="adapt a dense inverse mass matrix")
    step_size: float = Field(1.0, gt=0, description="initial step size")
    symmetry_moves: bool = Field(False, description="after every trajectory, a Metropolis-Hastings proposal along "
                                 "the model's symmetries (slt_relu.moves: the orientation flip of every node)")


class NUTSSettings(_MCMC):
    """numpyro's NUTS, run by slt_relu.nuts."""

    name: Literal["nuts"] = "nuts"
    schedule: Literal["async", "lockstep"] = Field("async", description="async: each chain walks its own tree, "
                                                   "one leapfrog step per tick; lockstep: numpyro's kernel vmapped")
    max_tree_depth: int = Field(10, ge=1, le=20, description="NUTS's maximum tree depth")
    max_delta_energy: float = Field(1000.0, gt=0, description="energy error counted as a divergence")
    slots: int | None = Field(None, ge=1, description="async: chains ticking at once (default 16 per CPU device, "
                              "all chains on an accelerator); a finished slot takes the next chain")


class HMCSettings(_MCMC):
    """numpyro's HMC with a fixed number of leapfrog steps, chains in lockstep."""

    name: Literal["hmc"] = "hmc"
    num_steps: int | None = Field(10, ge=1, description="leapfrog steps (None: trajectory_length / step_size)")
    trajectory_length: float = Field(2 * math.pi, gt=0, description="used when num_steps is None")


def sample(keys, potential_gen: Callable, init_z, args: tuple, settings, *, moves=None, devices=None,
           progress=None) -> Draws:
    """Run C chains of the sampler named by ``settings`` (:class:`NUTSSettings`, :class:`HMCSettings`,
    :class:`SGLDSettings`, :class:`~slt_relu.smc.SMCSettings`) on the potentials ``potential_gen(*args_c)``
    (module docstring).

    keys: (C, 2) (or typed keys (C,): their key data is used), one per chain: a chain's numbers depend on its key, not on which other chains
    share the program; init_z: (C, D) (SMC: (C, N, D) prior draws, and the last of ``args`` is the
    inverse temperature the bridge scales); args: tuple of arrays with a leading axis C; moves: the
    involution of the symmetry proposals, move(key, z) -> (z', log |det dz'/dz|), hashable
    (``slt_relu.moves``), needed by settings with ``symmetry_moves`` (NUTS, HMC, SMC); devices: to
    shard the chains over (default ``jax.local_devices()``); progress: called as progress(fraction)
    between compiled calls where the sampler has them.
    """
    from .lockstep import run_hmc, run_lockstep
    from .nuts import run_nuts
    from .sgld import SGLDSettings, run_sgld
    from .smc import SMCSettings, run_smc

    runners = {NUTSSettings: run_nuts, HMCSettings: run_hmc, SGLDSettings: run_sgld, SMCSettings: run_smc}
    if type(settings) not in runners:
        raise TypeError(f"settings: expected NUTS, HMC, SGLD or SMC settings, got {type(settings).__name__}")
    init_z = jnp.asarray(init_z)
    if init_z.ndim != (3 if type(settings) is SMCSettings else 2) or init_z.shape[0] < 1:
        raise ValueError(f"init_z: expected shape (chains, D) (SMC: (runs, particles, D)) with at least one chain, "
                         f"got {init_z.shape}")
    check_finite(init_z, "init_z")
    C = init_z.shape[0]
    keys = check_keys(keys)
    if keys.shape[:1] != (C,):
        raise ValueError(f"keys: expected one key per chain ({C}), got shape {keys.shape}")
    for a in jax.tree.leaves(args):
        if jnp.shape(a)[:1] != (C,):
            raise ValueError(f"args: every array needs a leading chain axis of {C}, got shape {jnp.shape(a)}")
    if getattr(settings, "symmetry_moves", False) and moves is None:
        raise ValueError("moves: symmetry_moves needs the symmetry's involution (e.g. slt_relu.moves.OrientationFlip), "
                         "got None")
    if type(settings) is SGLDSettings:
        return run_sgld(keys, potential_gen, init_z, tuple(args), settings, devices=devices, progress=progress)
    if type(settings) is NUTSSettings and settings.schedule == "lockstep":
        return run_lockstep(keys, potential_gen, init_z, tuple(args), settings, moves=moves, devices=devices)
    return runners[type(settings)](keys, potential_gen, init_z, tuple(args), settings, moves=moves, devices=devices,
                                   progress=progress)


# ----------------------------------------------------------------------------------------
# many chains on many devices


def chain_mesh(devices=None) -> jax.sharding.Mesh:
    """A one-axis mesh ("chains") over ``devices`` (default ``jax.local_devices()``: this process's
    devices, all of them in a single-process run; the processes of a multi-process run share a
    sweep's points instead, ``slt_relu.distributed``)."""
    devices = list(devices) if devices is not None else jax.local_devices()
    return jax.sharding.Mesh(np.array(devices), ("chains",))


def pad_chains(tree, total: int):
    """Pad the leading (chain) axis of every leaf to ``total`` by repeating the last chain."""
    def pad(x):
        x = jnp.asarray(x)
        extra = total - x.shape[0]
        return x if extra == 0 else jnp.concatenate([x, jnp.repeat(x[-1:], extra, axis=0)])
    return jax.tree.map(pad, tree)


@partial(jax.jit, static_argnums=(0, 1))
def _vmapped(fn, mesh, args):
    return jax.shard_map(jax.vmap(fn), mesh=mesh, in_specs=P("chains"), out_specs=P("chains"), check_vma=False)(*args)


@partial(jax.jit, static_argnums=(0, 1))
def _blocks(fn, mesh, args):
    return jax.shard_map(fn, mesh=mesh, in_specs=P("chains"), out_specs=P("chains"), check_vma=False)(*args)


@partial(jax.jit, static_argnums=(0, 1), donate_argnums=(2,))
def _blocks_donating(fn, mesh, state, args):
    return jax.shard_map(fn, mesh=mesh, in_specs=P("chains"), out_specs=P("chains"), check_vma=False)(state, *args)


def run_sharded(fn: Callable, args: tuple, *, devices=None):
    """``jax.vmap(fn)(*args)`` with the chains (leading axis of every array in args) sharded over
    ``devices``; fn must be hashable by value (a module-level function, :class:`StaticPartial`).
    Returns fn's outputs with the leading chain axis, padding removed."""
    mesh = chain_mesh(devices)
    nd = mesh.devices.size
    C = jnp.shape(jax.tree.leaves(args)[0])[0]
    padded = pad_chains(tuple(args), -(-C // nd) * nd)
    out = _vmapped(fn, mesh, padded)
    return jax.tree.map(lambda a: a[:C], out)


def run_blocks(fn: Callable, args: tuple, mesh, *, donate_state=None):
    """``fn`` on each device's block of the (already padded) chains, without vmap: for programs
    that schedule their device's chains themselves (the async NUTS queue).  With
    ``donate_state``, fn is called as fn(state_block, *arg_blocks) and the state's buffers are
    donated (updated in place)."""
    if donate_state is None:
        return _blocks(fn, mesh, tuple(args))
    return _blocks_donating(fn, mesh, donate_state, tuple(args))
