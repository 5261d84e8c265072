"""What every sampler shares: the draws it returns, its settings' base, hashable callables, and the
registry through which :func:`sample` finds the sampler that a settings type names.

A sampler takes a PRNG key per chain, a potential, initial points and its settings, and returns
:class:`Draws`:

    sample(keys (C, 2), potential_gen, init_z (C, D), args, settings) -> Draws

``potential_gen(*args_c) -> U`` builds chain c's potential ``U(z) = -log density(z)`` on flat
unconstrained coordinates z (D,) from that chain's slice of ``args`` (arrays with a leading chain
axis C: each chain its own data set, tempering, localisation).  ``potential_gen`` and the settings
must be hashable values (a NamedTuple of functions and numbers, a frozen settings model): they are
static arguments of ``jax.jit``, so a second call with equal ones reuses the compiled program.

Each sampler module registers its settings type, its runner and the type of its statistics with
:func:`register` (``nuts``: NUTS, desynchronised or in lockstep, :class:`~slt_relu.sampling.nuts.NUTSInfo`;
``hmc``: :class:`~slt_relu.sampling.lockstep.HMCInfo`; ``sgld``: :class:`~slt_relu.sampling.sgld.SGLDInfo`;
``smc``: adaptive tempered SMC, :class:`~slt_relu.sampling.smc.SMCInfo`, whose "chains" are independent runs
of N particles, init_z (C, N, D), its draws the particles, equally weighted after the last resampling, and
``log_evidence`` its estimate of log Z); ``slt_relu.sampling`` imports them all, so ``sample`` knows every
one.  A new sampler is a module with a settings class (a
:func:`~slt_relu.sampling.settings_type` with a ``name``), a NamedTuple of its statistics (``Draws.info``: arrays with a leading chain axis, None for what
a run did not produce) and a runner with :data:`Runner`'s signature, registered the same way.
:func:`info_dict` and :func:`info_from_dict` turn statistics into named arrays for a file and back.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from .._validate import check_finite

__all__ = ["Draws", "Runner", "Sampler", "StaticPartial", "broadcast_chains", "check_keys", "info_dict",
           "info_from_dict", "register", "sample"]


class Draws(NamedTuple):
    """What every sampler returns; C chains (or independent runs), S draws (or particles) each.

    Attributes:
        z: (C, S, D) unconstrained draws (None where a run kept none: SGLD's ``keep_draws=False``).
        potential_energy: (C, S) U at each draw.
        info: the sampler's statistics, a NamedTuple of its own whose arrays lead with the chain
            axis, per draw (C, S), per chain (C, ...) or per stage (C, M): NUTS's
            :class:`~slt_relu.sampling.nuts.NUTSInfo`, HMC's :class:`~slt_relu.sampling.lockstep.HMCInfo`,
            :class:`~slt_relu.sampling.sgld.SGLDInfo`, :class:`~slt_relu.sampling.smc.SMCInfo`; a field
            the run did not produce (symmetry_accept without symmetry moves) is None.
        grad_evals: (C,) gradient evaluations of each chain, warmup included.
        log_evidence: (C,) log Z where the sampler estimates it (SMC), else None.
        ticks: vmapped gradient evaluations the program ran (the wall-clock work of all chains
            together).
        wall_s: seconds, compilation included.
    """

    z: np.ndarray
    potential_energy: np.ndarray
    info: tuple
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


def broadcast_chains(C: int, *arrays) -> tuple:
    """Each array (or data pytree) repeated for C chains: a leading chain axis of size C, as ``sample``'s args."""
    return tuple(jax.tree.map(lambda a: jnp.broadcast_to(a, (C,) + jnp.shape(a)), a) for a in arrays)


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
# the registry


Runner = Callable[..., Draws]
"""run(keys (C, 2), potential_gen, init_z, args, settings, *, moves, devices, progress) -> Draws, whose
``info`` is the sampler's registered statistics type."""


class Sampler(NamedTuple):
    """A registered sampler: its runner, the NamedTuple type of its statistics (``Draws.info``), and
    whether its initial points are particles per run, init_z (C, N, D) (SMC), or one point per chain,
    (C, D)."""

    run: Runner
    info: type
    particles: bool = False


_SAMPLERS: dict[type, Sampler] = {}


def register(settings_type: type, run: Runner, info: type, *, particles: bool = False) -> None:
    """Make :func:`sample` run ``run`` for settings of ``settings_type``, returning :class:`Draws`
    whose ``info`` is an ``info`` (called once by each sampler module at import)."""
    _SAMPLERS[settings_type] = Sampler(run, info, particles)


def _registered(settings) -> Sampler:
    """The sampler registered for ``settings``' type, else TypeError naming the registered ones."""
    sampler = _SAMPLERS.get(type(settings))
    if sampler is None:
        names = ", ".join(sorted(t.__name__ for t in _SAMPLERS))
        raise TypeError(f"settings: expected the settings of a registered sampler ({names}), got "
                        f"{type(settings).__name__}")
    return sampler


def info_dict(info: tuple) -> dict:
    """A sampler's statistics as named arrays, for a file (a sweep point's checkpoint, ArviZ's
    ``sample_stats``): every field that is not None, under its name less a trailing underscore
    (SMCInfo's ``lambda_`` is ``"lambda"``).  :func:`info_from_dict` is its inverse.

    Args:
        info: a sampler's statistics (``Draws.info``).

    Returns:
        dict: {name: array}.
    """
    return {name.removesuffix("_"): np.asarray(v) for name, v in info._asdict().items() if v is not None}


def info_from_dict(settings, stats: Mapping) -> tuple:
    """The statistics of ``settings``' sampler from their named arrays (:func:`info_dict`'s, e.g. read
    back from a file); a field without an entry is None.

    Args:
        settings: the settings the statistics were sampled with (their type names the sampler).
        stats: {name: array}.

    Returns:
        NamedTuple: the registered statistics type of the sampler (``Draws.info``).
    """
    info = _registered(settings).info
    return info(*(stats.get(name.removesuffix("_")) for name in info._fields))


def sample(keys, potential_gen: Callable, init_z, args: tuple, settings, *, moves=None, devices=None,
           progress=None) -> Draws:
    """Run C chains of the sampler that ``settings``' type is registered for (module docstring).

        U_c(z) = potential_gen(*args_c)(z) = -log density_c(z)

    Chain c samples exp(-U_c) with its own slice args_c of ``args``; a chain's numbers depend on
    its key, not on which other chains share the program.

    Args:
        keys: (C, 2) (or typed keys (C,): their key data is used), one per chain.
        potential_gen: hashable; ``potential_gen(*args_c)`` is chain c's potential U(z), z (D,).
        init_z: (C, D) (SMC: (C, N, D) prior draws, and the last of ``args`` is the inverse
            temperature the bridge scales).
        args: tuple of arrays with a leading axis C.
        settings: NUTS, HMC, SGLD or SMC settings (the type picks the sampler).
        moves: the involution of the symmetry proposals, move(key, z) -> (z', log |det dz'/dz|),
            hashable (``slt_relu.moves``), used by settings with ``symmetry_moves`` (NUTS, HMC,
            SMC).
        devices: to shard the chains over (default ``jax.local_devices()``).
        progress: called as progress(fraction) between compiled calls where the sampler has them.

    Returns:
        Draws: z (C, S, D), potential_energy (C, S), the sampler's statistics (``info``, its registered
        NamedTuple), gradient counts and, for SMC, log_evidence (C,).
    """
    sampler = _registered(settings)
    init_z = jnp.asarray(init_z)
    if init_z.ndim != (3 if sampler.particles else 2) or init_z.shape[0] < 1:
        want = "(runs, particles, D)" if sampler.particles else "(chains, D)"
        raise ValueError(f"init_z: expected shape {want} with at least one chain, got {init_z.shape}")
    check_finite(init_z, "init_z")
    C = init_z.shape[0]
    keys = check_keys(keys)
    if keys.shape[:1] != (C,):
        raise ValueError(f"keys: expected one key per chain ({C}), got shape {keys.shape}")
    for a in jax.tree.leaves(args):
        if jnp.shape(a)[:1] != (C,):
            raise ValueError(f"args: every array needs a leading chain axis of {C}, got shape {jnp.shape(a)}")
    with_moves = getattr(settings, "symmetry_moves", False)
    if with_moves and moves is None:
        raise ValueError("moves: symmetry_moves needs the symmetry's involution (e.g. slt_relu.moves.OrientationFlip), "
                         "got None")
    return sampler.run(keys, potential_gen, init_z, tuple(args), settings, moves=moves if with_moves else None,
                       devices=devices, progress=progress)
