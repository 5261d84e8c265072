"""Samplers behind one interface: ``sample(keys, potential_gen, init_z, args, settings) -> Draws``,
many chains vmapped in one compiled program and sharded over the devices.

- ``settings``: each sampler's settings, plain frozen types checked when made (the type picks the sampler);
- ``base``: :class:`Draws`, hashable callables, the registry and :func:`sample`, which runs the sampler
  registered for the settings' type, and the statistics (``Draws.info``, each sampler's NamedTuple:
  ``NUTSInfo``, ``HMCInfo``, ``SGLDInfo``, ``SMCInfo``) as named arrays for a file and back
  (:func:`info_dict`, :func:`info_from_dict`);
- ``sharding``: the ``chains`` mesh, padding, :func:`run_sharded`;
- ``nuts``: NUTS with desynchronised chains (or numpyro's kernel in lockstep, ``lockstep``);
- ``hmc``: HMC with a fixed trajectory; ``sgld``: stochastic gradient Langevin dynamics;
- ``smc``: adaptive tempered SMC (weighted particles, log evidence);
- ``involution``: Metropolis-Hastings proposals along an involution (the symmetry moves).

Importing the package registers every sampler.
"""
from .._validate import setting, settings_type
from . import hmc, nuts, sgld, smc  # noqa: F401  (importing each registers its sampler)
from .base import Draws, StaticPartial, broadcast_chains, check_keys, info_dict, info_from_dict, register, sample
from .involution import involution_step, metropolis_hastings
from .lockstep import HMCInfo
from .nuts import NUTSInfo, tree_depth
from .settings import HMCSettings, MCMCSettings, NUTSSettings, SGLDSettings, SMCSettings
from .sgld import SGLDInfo
from .sharding import chain_mesh, pad_chains, run_blocks, run_sharded
from .smc import SMCInfo

__all__ = ["Draws", "HMCInfo", "HMCSettings", "MCMCSettings", "NUTSInfo", "NUTSSettings", "SGLDInfo", "SGLDSettings",
           "SMCInfo", "SMCSettings", "StaticPartial", "broadcast_chains", "chain_mesh", "check_keys", "info_dict",
           "info_from_dict", "involution_step", "metropolis_hastings", "pad_chains", "register", "run_blocks",
           "run_sharded", "sample", "setting", "settings_type", "tree_depth"]
