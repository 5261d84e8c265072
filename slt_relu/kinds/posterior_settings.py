"""The posterior kind's schema (``slt_relu.kinds.posterior_kind``): [model], [prior], [posterior], [sampler] and
[compare], [phases], [convergence] (SMC's stopping rule, checked against the rest by :func:`check_convergence`),
[plots], [sweep]."""
from __future__ import annotations

from typing import Annotated, Literal, Union

import numpy as np
from pydantic import Field, model_validator

from ..phases import RULES
from ..posterior import PRIOR_KINDS
from ..posterior.stopping import StoppingRule
from ..workflow.settings import SCALE_BOUND, ConfigError, Section
from ..workflow.schemas import HMCSection, NUTSSection, SMCSection, TruthExperiment

__all__ = []   # nothing to import: a part of the kinds that import it, not an API

MIN_RUNS_FOR_CONVERGENCE = 4   # runs per data set: from 2 the spread (so the MC error) is itself uncertain ~2x


class ModelSettings(Section):
    width: int | None = Field(None, ge=1, le=64, description="model width (default: the example's model)")
    free: tuple[str, ...] | None = Field(None, description="free coordinate names (default: all, or the example's "
                                         "restricted model, e.g. Example 3.4's w1, w2)")


class PriorGroup(Section):
    dist: Literal[PRIOR_KINDS] | None = Field(None, description="this group's prior (default: [prior] dist)")
    scale: float | None = Field(None, gt=0, le=SCALE_BOUND, description="this group's scale (default: [prior] scale)")


class PriorSettings(Section):
    dist: Literal[PRIOR_KINDS] = Field("normal", description="N(0, scale^2) or U[-scale, scale] per coordinate")
    scale: float = Field(1.0, gt=0, le=SCALE_BOUND, description="the prior's scale")
    w: PriorGroup = PriorGroup()
    b: PriorGroup = PriorGroup()
    q: PriorGroup = PriorGroup()
    c: PriorGroup = PriorGroup()


class PosteriorSettings(Section):
    n: int = Field(10000, ge=2, le=10_000_000, description="data set size")
    beta: Annotated[float, Field(gt=0)] | Literal["wbic"] = Field("wbic", description="inverse temperature; "
                                                                  "\"wbic\" = 1/log n")
    datasets: int = Field(4, ge=1, le=100_000, description="trials per sweep point, each its own data set")
    chains_per_dataset: int = Field(1, ge=1, le=1000, description="chains (MCMC) or independent runs (SMC: at "
                                    "least 2 for the masses' Monte Carlo errors) per data set")
    init_radius: float = Field(2.0, gt=0, le=SCALE_BOUND, description="chains start uniformly in [-r, r] (unconstrained)")
    trial_filter: bool = Field(False, description="DSLT4's filter dropping trials whose mean L_n has "
                               "|z| > trial_filter_z")
    trial_filter_z: float = Field(1.5, ge=0, description="the filter's threshold")
    points_per_program: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(
        "auto", description="sweep points per compiled program (each checkpointed when its program ends); "
        "\"auto\": points making twice the sampler's slots in chains (CPU), 512 chains (accelerators)")


class PhasesSettings(Section):
    rule: Literal[RULES] = Field("radius", description="DSLT4's rule on |q_i| w_i (radius: degenerate / "
                                 "non-degenerate; sector: true / reversed orientation)")
    eps: float = Field(0.3, ge=0, le=SCALE_BOUND, description="radius rule: tolerance around the radii")
    non_degenerate: float = Field(1.0, le=SCALE_BOUND, description="radius rule: every node's radius")
    degenerate: float = Field(2.0, le=SCALE_BOUND, description="radius rule: the one live node's radius")
    classify: bool = Field(True, description="classify_phase labels (a phase of W0 or \"not in W0\", at the "
                           "resolution of the point's n, sigma, beta) on every classify_every-th draw")
    classify_every: int = Field(10, ge=1, description="thinning of the classified draws")
    crossover: tuple[str, str] | None = Field(None, description="two phases of the rule whose crossing is reported")
    crossover_axis: str | None = Field(None, description="the sweep key the crossover runs along (default: the last)")


class PlotsSettings(Section):
    trace_points: int = Field(3, ge=0, le=50, description="sweep points with trace plots")
    weight_panels: int = Field(24, ge=1, le=200, description="panels of effective weights")


SamplerSettings = Annotated[Union[NUTSSection, HMCSection, SMCSection], Field(discriminator="name",
                                                         description="the sampler and its settings")]


class ConvergenceSettings(Section):
    """SMC's stopping rule: a point whose independent runs disagree more than these targets gets more runs
    on its data sets (as many as its runs' spread says the targets need, pooled with the first ones), up
    to max_chains_per_dataset, or with max_particles new runs with more particles where that costs fewer
    gradients, in at most MAX_ROUNDS rounds (``slt_relu.posterior.stopping``, which takes these settings as a
    StoppingRule); a point still above a target is flagged as not converged in metrics.json, the warnings, the
    headline and the figures."""

    mass_mcse: float | None = Field(None, gt=0, lt=1, description="largest Monte Carlo error of a phase mass "
                                    "(the rule's phases; from the runs' spread on each data set)")
    log_evidence_mcse: float | None = Field(None, gt=0, description="largest Monte Carlo error of log Z (nats)")
    max_chains_per_dataset: int = Field(16, ge=2, le=1000, description="independent runs per data set at most, "
                                        "the first posterior.chains_per_dataset included")
    max_particles: int | None = Field(None, ge=8, le=1_000_000, description="when set, a point whose runs disagree "
                                      "may instead get new runs with more particles (as many runs, "
                                      "2^ceil(log2 error/target) times the particles, replacing the first) where "
                                      "that costs fewer gradients than more runs, up to this many: "
                                      "sampler.num_particles times a power of 2")

    @property
    def active(self) -> bool:
        return self.mass_mcse is not None or self.log_evidence_mcse is not None


class Settings(TruthExperiment):
    kind: Literal["posterior"]
    model: ModelSettings = ModelSettings()
    prior: PriorSettings = PriorSettings()
    posterior: PosteriorSettings = PosteriorSettings()
    sampler: SamplerSettings = NUTSSection()
    compare: SamplerSettings | None = Field(None, description="a second sampler run on the same data sets at "
                                            "every point (e.g. NUTS beside SMC); its masses go in metrics "
                                            "under compare")
    phases: PhasesSettings = PhasesSettings()
    convergence: ConvergenceSettings = Field(ConvergenceSettings(), description="SMC: when a point's runs agree")
    plots: PlotsSettings = PlotsSettings()
    sweep: dict = Field({}, description="dotted keys of [truth], [inputs], [model], [prior], [posterior], "
                        "[sampler] or sigma with lists of values: the grid of all combinations")
    save_draws: bool | None = Field(None, description="write each point's draws as ArviZ netCDF (draws/point-NNNNN.nc; "
                                    "default: when they take at most 50 MB)")

    @model_validator(mode="before")
    @classmethod
    def _default_sampler(cls, data):
        """[sampler] and [compare] without a name are NUTS."""
        if isinstance(data, dict):
            for table in ("sampler", "compare"):
                if isinstance(data.get(table), dict) and "name" not in data[table]:
                    data = {**data, table: {"name": "nuts", **data[table]}}
        return data


def check_convergence(s) -> StoppingRule | None:
    """A posterior config's [convergence] as the library's stopping rule (``slt_relu.posterior.stopping``) if its
    targets are set (None otherwise); ConfigError when they cannot hold (not SMC, too few runs per data set, a
    mass target without a rule)."""
    conv, p = s.convergence, s.posterior
    if conv.active and not isinstance(s.sampler, SMCSection):
        raise ConfigError(f"convergence: the stopping rule adds independent SMC runs; expected sampler.name = "
                          f"\"smc\", got {s.sampler.name!r}")
    if conv.active and p.chains_per_dataset < MIN_RUNS_FOR_CONVERGENCE:
        raise ConfigError(f"posterior.chains_per_dataset: the convergence targets need at least "
                          f"{MIN_RUNS_FOR_CONVERGENCE} independent runs per data set, got {p.chains_per_dataset}")
    if conv.max_particles is not None and (not isinstance(s.sampler, SMCSection) or not conv.active):
        raise ConfigError("convergence.max_particles: grows the particles of SMC runs under the stopping rule; "
                          "expected sampler.name = \"smc\" and a target (convergence.mass_mcse or "
                          "convergence.log_evidence_mcse)")
    if conv.active and conv.max_chains_per_dataset < p.chains_per_dataset:
        raise ConfigError(f"convergence.max_chains_per_dataset: expected at least posterior.chains_per_dataset = "
                          f"{p.chains_per_dataset}, got {conv.max_chains_per_dataset}")
    if conv.max_particles is not None:
        ratio = conv.max_particles / s.sampler.num_particles
        if ratio < 2 or ratio != 2 ** round(np.log2(ratio)):
            raise ConfigError(f"convergence.max_particles: expected sampler.num_particles = {s.sampler.num_particles} "
                              f"times a power of 2 (at least 2), got {conv.max_particles}")
    if conv.mass_mcse is not None and s.phases.rule == "none":
        raise ConfigError("convergence.mass_mcse: the masses it bounds are the rule's; expected phases.rule "
                          "\"radius\" or \"sector\", got \"none\"")
    return StoppingRule(**conv.model_dump()) if conv.active else None
