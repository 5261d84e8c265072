"""Many chains on many devices: a ``chains`` mesh over the process's devices, chains padded to a
multiple of the device count, and compiled programs cached by ``jax.jit`` on the function's value.

:func:`run_sharded` vmaps a per-chain function over the chains and shards them over the devices
(``jax.shard_map`` over the mesh axis; padding dropped afterwards): one CPU, several host devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=N``) or a GPU run the same code.
:func:`run_blocks` hands each device its block of chains unvmapped, for programs that schedule
their chains themselves (the desynchronised NUTS queue).
"""
from __future__ import annotations

from functools import partial
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

__all__ = ["chain_mesh", "pad_chains", "run_blocks", "run_sharded"]

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
    ``devices``; fn must be hashable by value (a module-level function, a
    :class:`~slt_relu.sampling.base.StaticPartial`).  Returns fn's outputs with the leading chain axis, padding
    removed."""
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
