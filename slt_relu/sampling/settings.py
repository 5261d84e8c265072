"""The samplers' settings: plain frozen types, checked when made, one per sampler; the type picks the sampler
(:func:`slt_relu.sampling.sample`).

Each is a keyword-only frozen dataclass (``slt_relu.sampling.settings_type``): numpy and Python numbers alike,
bool never a number, one line naming the field for a mistake (``num_samples: expected an integer >= 4, got 2``),
hashable by value so that it can be a static argument of compiled programs, ``replace(**changes)`` for a
checked copy.  A config's ``[sampler]`` table is the schema the experiment layer builds from these fields
(``slt_relu.workflow.settings.section_of``): the fields' defaults, bounds and meanings are written here only.
"""
from __future__ import annotations

import math
from typing import Literal

from .._validate import SCALE_BOUND, setting, settings_type

__all__ = ["HMCSettings", "MCMCSettings", "NUTSSettings", "SGLDSettings", "SMCSettings"]


@settings_type
class MCMCSettings:
    """The settings NUTS and HMC share (warm-up, draws, thinning, step-size adaptation, symmetry moves)."""

    num_warmup: int = setting(1000, ge=0, description="warm-up iterations per chain (adaptation; not kept)")
    num_samples: int = setting(1000, ge=4, description="kept draws per chain")
    thin: int = setting(1, ge=1, description="keep every thin-th iteration (num_samples counts kept draws)")
    target_accept_prob: float = setting(0.8, gt=0, lt=1, description="dual averaging's target acceptance")
    dense_mass: bool = setting(False, description="adapt a dense inverse mass matrix")
    step_size: float = setting(1.0, gt=0, le=SCALE_BOUND, description="initial step size")
    symmetry_moves: bool = setting(False, description="after every trajectory, a Metropolis-Hastings proposal along "
                                   "the model's symmetries (slt_relu.moves: the orientation flip of every node)")


@settings_type
class NUTSSettings(MCMCSettings):
    """NUTS settings: numpyro's algorithm, desynchronised (``schedule="async"``) or numpyro's kernel in lockstep.

    References:
        Hoffman & Gelman 2014; Betancourt 2017 (the generalised U-turn criterion).
    """

    name: Literal["nuts"] = "nuts"
    schedule: Literal["async", "lockstep"] = setting("async", description="async: each chain walks its own tree, "
                                                     "one leapfrog step per tick; lockstep: numpyro's kernel vmapped")
    max_tree_depth: int = setting(10, ge=1, le=20, description="NUTS's maximum tree depth")
    max_delta_energy: float = setting(1000.0, gt=0, description="energy error counted as a divergence")
    slots: int | None = setting(None, ge=1, description="async: chains ticking at once (default 16 per CPU device, "
                                "all chains on an accelerator); a finished slot takes the next chain")


@settings_type
class HMCSettings(MCMCSettings):
    """HMC settings: numpyro's HMC with a fixed number of leapfrog steps, chains in lockstep.

    References:
        Neal 2011.
    """

    name: Literal["hmc"] = "hmc"
    num_steps: int | None = setting(10, ge=1, description="leapfrog steps (None: trajectory_length / step_size)")
    trajectory_length: float = setting(2 * math.pi, gt=0, le=SCALE_BOUND, description="used when num_steps is None")


@settings_type
class SGLDSettings:
    """SGLD settings (the learning coefficient's :class:`~slt_relu.posterior.llc.LLCSettings` adds the chains, the
    localization and n beta), plain or preconditioned by RMSProp (``slt_relu.sampling.sgld``).

    References:
        Welling & Teh 2011; Li, Chen, Carlson & Carin 2016 (pSGLD).
    """

    name: Literal["sgld"] = "sgld"
    num_steps: int = setting(1000, ge=1, description="SGLD steps per chain")
    num_burnin: int = setting(0, ge=0, description="first steps dropped")
    thin: int = setting(1, ge=1, description="keep every thin-th step after the burn-in")
    step_size: float = setting(1e-4, gt=0, le=SCALE_BOUND, description="eps")
    batch_size: int | None = setting(None, ge=1, description="mini-batch size (None: full-batch gradients)")
    preconditioner: Literal["rmsprop"] | None = setting(None, description="None: plain SGLD; rmsprop: the diagonal "
                                                         "RMSProp preconditioner of Li et al. 2016 (pSGLD), learnt "
                                                         "during the burn-in, then held")
    rmsprop_decay: float = setting(0.99, gt=0, lt=1, description="rmsprop: the moving average's decay a of "
                                   "V = a V + (1 - a) g^2")
    rmsprop_epsilon: float = setting(0.1, gt=0, le=SCALE_BOUND, description="rmsprop: delta of the preconditioner "
                                     "1 / (delta + sqrt(V)), its bound 1 / delta where the gradients vanish (at a "
                                     "minimum, where the chains start)")

    def check(self):
        if self.preconditioner == "rmsprop" and self.num_burnin < 1:
            raise ValueError("num_burnin: expected at least 1 with preconditioner = 'rmsprop' (it learns its "
                             "preconditioner during the burn-in), got 0")
        if self.num_burnin >= self.num_steps:
            raise ValueError(f"num_burnin: expected an integer below num_steps = {self.num_steps}, "
                             f"got {self.num_burnin}")


@settings_type
class SMCSettings:
    """Adaptive tempered SMC settings (``slt_relu.sampling.smc``).

    References:
        Del Moral, Doucet & Jasra 2006; Jasra et al. 2011 (the adaptive schedule); Dau & Chopin 2022
        (waste-free SMC).
    """

    name: Literal["smc"] = "smc"
    num_particles: int = setting(1024, ge=8, description="particles per run")
    target_ess: float = setting(0.5, gt=0, lt=1, description="ESS fraction that sets each next temperature")
    num_mcmc_steps: int = setting(5, ge=1, description="HMC moves per stage")
    num_leapfrog: int = setting(10, ge=1, description="leapfrog steps per HMC move")
    target_accept_prob: float = setting(0.7, gt=0, lt=1, description="acceptance the step size is tuned towards")
    step_size: float = setting(0.3, gt=0, le=SCALE_BOUND, description="initial step size (then tuned per stage)")
    waste_free: bool = setting(False, description="waste-free SMC (Dau & Chopin 2022): resample N / "
                               "(num_mcmc_steps + 1) particles and keep every state of their moves as the next "
                               "particles")
    max_stages: int = setting(200, ge=1, le=10_000, description="stages at most (a run that needs more stops "
                              "short of lambda = 1 and says so)")
    particle_batch: int = setting(16, ge=1, description="particles moved together (lax.map chunks: the data's "
                                  "intermediates of one chunk stay in cache; speed only)")
    symmetry_moves: bool = setting(False, description="after every HMC move, a Metropolis-Hastings proposal along "
                                   "the model's symmetries (slt_relu.moves: the orientation flip of every node of a "
                                   "two-layer ReLU network; the GL(H) reparametrization of a product of layers)")

    def check(self):
        if self.waste_free and self.num_particles % (self.num_mcmc_steps + 1):
            raise ValueError(f"num_particles: expected a multiple of num_mcmc_steps + 1 = {self.num_mcmc_steps + 1} "
                             f"for waste-free SMC, got {self.num_particles}")
