"""Hamiltonian Monte Carlo with a fixed number of leapfrog steps (Neal 2011), numpyro's kernel with
its warm-up (dual averaging of the step size, Stan's windows for the mass matrix), chains in lockstep
(``slt_relu.sampling.lockstep``): with a fixed trajectory no chain waits for another.
"""
from __future__ import annotations

from .base import Draws, register
from .lockstep import HMCInfo, run_lockstep
from .settings import HMCSettings

__all__ = ["run_hmc"]


def run_hmc(keys, potential_gen, init_z, args, settings: HMCSettings, *, moves=None, devices=None,
            progress=None) -> Draws:
    """HMC chains in lockstep; see :func:`slt_relu.sampling.sample`.  Returns
    :class:`~slt_relu.sampling.Draws` whose ``info`` is an :class:`~slt_relu.sampling.lockstep.HMCInfo`.
    progress: unused (one compiled call)."""
    return run_lockstep(keys, potential_gen, init_z, args, settings, moves=moves, devices=devices)


register(HMCSettings, run_hmc, HMCInfo)
