"""The lambda_curve kind's schema (``slt_relu.kinds.lambda_curve_kind``): its [[cases]], [curve], and the sections
of the samplers read beside SMC ([mcmc], [sgld], [gibbs]) with their own windows."""
from __future__ import annotations

import math
from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from ..posterior.linear_gibbs import MAX_T as GIBBS_MAX_T
from ..posterior.linear_gibbs import MAX_WIDTH
from ..workflow.settings import SCALE_BOUND, ConfigError, Section
from ..workflow.schemas import CASE_TRUTH_WORDS, Experiment, SMCSection

__all__ = []   # nothing to import: a part of the kinds that import it, not an API

FAMILIES = ("normal_crossing", "sum", "regular", "reduced_rank", "deep_linear", "dslt_phase")
PHASE_KEYS = ("truth", "width", "phase", "radius")          # dslt_phase's own keys (all needed there, nowhere else)
MAX_PARAMS = 2000            # SMC's particles x parameters x runs per program stay in memory (and NUTS's draws)
MAX_GIBBS_PARAMS = 100_000   # a case that the Gibbs sampler alone reads: chains x parameters, sweeps of eigh
MAX_SAMPLES = 10 ** 6        # a data case's n: its runs' data sets are drawn in chunks (memory), n x runs in time
LINEAR = ("reduced_rank", "deep_linear")   # the families the Gibbs sampler reads, and SMC's layer moves move
T_MAX_BOUND = 1e25           # SMC's first step from the prior, about 1 / t_max, is bisected in [0, 1] to 2^-100 = 8e-31


class Window(Section):
    """A sampler's own fitted window, where it differs from the cases' (NUTS's chains from the prior do not settle
    within their warm-up at t = 1e16; SGLD's single step per t mixes the less the larger t; the Gibbs sampler's
    conditionals lose float64's resolution past t = 1e14).  ``sampler_max_t``: the largest t the sampler itself
    accepts (None: any up to T_MAX_BOUND)."""

    sampler_max_t: ClassVar[float | None] = None

    t_max: float | None = Field(None, gt=1, le=T_MAX_BOUND, description="this sampler's largest t: each case's "
                                "window is cut there, its lower end kept (default: the case's t_max)")
    decades: float | None = Field(None, gt=0, le=24, description="this sampler's window in decades of t below its "
                                  "t_max (default: down to the case's lower end)")

    def window(self, curve) -> tuple[float, float]:
        """(t_max, decades) for a case whose [curve] settings (with its overrides) are ``curve``: t_max the smaller of
        this section's and the case's; decades this section's, else down to the case's window's lower end (<= 0 where
        this t_max lies below it)."""
        t_max = curve.t_max if self.t_max is None else min(self.t_max, curve.t_max)
        if self.decades is not None:
            return t_max, self.decades
        return t_max, curve.decades - math.log10(curve.t_max / t_max)

    def checked_window(self, section: str, curve, where: str, *, case_t_max: bool,
                       fits_loss_min: bool) -> tuple[float, float]:
        """:meth:`window`, with a ConfigError naming the key where it lies below the case's window, reaches t <= 1,
        or passes the sampler's own bound ``sampler_max_t``, or where ``temperatures`` are too few for the
        tempered_loss rule (``free_energy_curve.min_points``); ``case_t_max``: whether the case sets its own t_max;
        ``fits_loss_min``: whether the case's reading fits L* (a data set's)."""
        from ..posterior.free_energy_curve import min_points

        least = min_points("tempered_loss", curve.max_multiplicity, fits_loss_min)
        if self.temperatures < least:
            raise ConfigError(f"{section}.temperatures: expected at least {least} for {where} (the tempered_loss rule "
                              f"fits m up to curve.max_multiplicity = {curve.max_multiplicity} on each half of the "
                              f"window{', with L* fitted' if fits_loss_min else ''}), got {self.temperatures}")
        t_max, decades = self.window(curve)
        if decades <= 0:
            raise ConfigError(f"{section}.t_max: expected above the lower end t = "
                              f"{curve.t_max * 10.0 ** -curve.decades:.3g} of {where}'s window, got {t_max:g}")
        if t_max * 10.0 ** -decades <= 1.0:                 # only its own decades can reach below the case's window
            raise ConfigError(f"{section}.decades: expected a window above t = 1, below log10(t_max) = "
                              f"{math.log10(t_max):.3g} decades for {where}'s {section} reading, got {decades:g}")
        if self.sampler_max_t is not None and t_max > self.sampler_max_t:
            key = section if self.t_max is not None else where if case_t_max else "curve"
            raise ConfigError(f"{key}.t_max: expected at most {self.sampler_max_t:g} for the Gibbs sampler's "
                              f"reading of {where} (beyond it float64's rounding sets its conditionals; [gibbs] takes a "
                              f"t_max of its own), got {t_max:g}")
        return t_max, decades


class MCMCSettings(Window):
    """The MCMC estimand curve beside SMC's (``slt_relu.posterior.estimand_curve``): NUTS's t E_t[K] at
    ``temperatures`` log-spaced t over the case's fitted window (or its own: ``t_max``, ``decades``), ``chains``
    independent chains at each (the chains are the fit's runs), read by the ``tempered_loss`` rule: the estimator
    ``nuts_tempered_loss``."""

    temperatures: int = Field(8, ge=4, le=64, description="log-spaced t over the window, its ends included")
    chains: int = Field(8, ge=2, le=256, description="independent NUTS chains per t (their spread: the errors)")
    num_warmup: int = Field(500, ge=1, le=100_000, description="NUTS warm-up steps per chain")
    num_samples: int = Field(1000, ge=1, le=100_000, description="NUTS draws kept per chain")


class SGLDCurveSettings(Window):
    """The SGLD estimand curve beside SMC's (``slt_relu.posterior.estimand_curve.sgld_tempered_loss_curve``):
    full-batch SGLD's t E_t[K] at ``temperatures`` log-spaced t over the case's fitted window (or its own:
    ``t_max``, ``decades``), ``chains`` chains at each from the true set's deepest point, each t's step the largest whose pilot chains' MALA acceptance is at
    least ``accept_target``, read by the ``tempered_loss`` rule: the estimator ``sgld_tempered_loss``."""

    temperatures: int = Field(8, ge=4, le=64, description="log-spaced t over the window, its ends included")
    chains: int = Field(8, ge=2, le=256, description="independent SGLD chains per t (their spread: the errors)")
    num_steps: int = Field(12_000, ge=2, le=1_000_000, description="SGLD steps per chain")
    num_burnin: int = Field(2_000, ge=0, le=1_000_000, description="first steps dropped")
    thin: int = Field(10, ge=1, le=10_000, description="keep every thin-th step after the burn-in")
    accept_target: float = Field(0.999, gt=0, lt=1, description="the pilot chains' least mean MALA acceptance that "
                                 "a step must reach (0.99 lets a Gaussian direction's variance grow by 5-7 %)")
    pilot_steps: int = Field(2_000, ge=2, le=100_000, description="steps of each pilot chain (two per step on the "
                             "ladder and t)")

    @model_validator(mode="after")
    def _burnin(self):
        if self.num_burnin >= self.num_steps:
            raise ValueError(f"num_burnin: expected an integer below num_steps = {self.num_steps}, "
                             f"got {self.num_burnin}")
        return self


class GibbsSettings(Window):
    """The Gibbs estimand curve of the reduced_rank and deep_linear cases (``slt_relu.posterior.linear_gibbs``):
    t E_t[L] at ``temperatures`` log-spaced t over the case's fitted window (or its own: ``t_max``, ``decades``), ``chains`` chains each passing through
    them in increasing order, read by the ``tempered_loss`` rule: the estimator ``gibbs_tempered_loss``."""

    sampler_max_t: ClassVar[float | None] = GIBBS_MAX_T

    temperatures: int = Field(10, ge=4, le=64, description="log-spaced t over the window, its ends included (a data "
                              "case's rule takes 10 at least)")
    chains: int = Field(8, ge=2, le=256, description="independent chains (their spread: the errors); a data case "
                        "has one per data set, curve.runs, instead")
    burn_in: int = Field(200, ge=0, le=100_000, description="sweeps at each t before the kept ones")
    sweeps: int = Field(200, ge=1, le=100_000, description="kept sweeps at each t")


class ReferenceSettings(Section):
    name: str = Field(min_length=1, max_length=200, description="where the estimate comes from (e.g. a results folder)")
    estimate: float = Field(description="its lambda")
    se: float = Field(ge=0, description="its standard error")


class CaseSettings(Section):
    name: str = Field(min_length=1, max_length=100, description="the case's label")
    family: Literal["normal_crossing", "sum", "regular", "reduced_rank", "deep_linear", "dslt_phase"] = Field(
        description="the loss family (module docstring)")
    k: tuple[int, ...] | None = Field(None, description="normal_crossing, sum: the half-exponents k_i")
    num_params: int | None = Field(None, ge=1, le=MAX_PARAMS, description="regular: the parameters d")
    input_dim: int | None = Field(None, ge=1, le=MAX_WIDTH, description="reduced_rank, deep_linear: the input width")
    hidden: int | None = Field(None, ge=1, le=MAX_WIDTH, description="reduced_rank: the hidden width")
    output_dim: int | None = Field(None, ge=1, le=MAX_WIDTH, description="reduced_rank: the output width")
    widths: tuple[Annotated[int, Field(ge=1, le=MAX_WIDTH)], ...] | None = Field(
        None, min_length=1, max_length=16, description="deep_linear: hidden widths, then the output width")
    true_rank: int = Field(0, ge=0, description="reduced_rank, deep_linear: the rank r of the true map")
    n: int | None = Field(None, ge=2, le=MAX_SAMPLES, description="every family but dslt_phase: a data set of n "
                          "samples per run (RegressionLoss) instead of K itself; needs t_max <= n")
    truth: str | None = Field(None, max_length=1000, description="dslt_phase: " + CASE_TRUTH_WORDS)
    truth_options: dict = Field({}, description="dslt_phase: the example's options, e.g. { v = 1.0 }")
    width: int | None = Field(None, ge=1, le=8, description="dslt_phase: the model's hidden nodes")
    phase: str | None = Field(None, max_length=200, description="dslt_phase: the phase of W0, its label as "
                              "slt_relu.phases prints it (e.g. \"+ | 1 degenerate\")")
    radius: float | None = Field(None, gt=0, le=10, description="dslt_phase: the region's ball |z| <= radius")
    prior_std: float | None = Field(None, gt=0, le=SCALE_BOUND, description="overrides curve.prior_std")
    t_max: float | None = Field(None, gt=1, le=T_MAX_BOUND, description="overrides curve.t_max")
    decades: float | None = Field(None, gt=0, le=24, description="overrides curve.decades")
    runs: int | None = Field(None, ge=2, le=256, description="overrides curve.runs")
    reference: ReferenceSettings | None = Field(None, description="another estimate of this lambda, shown beside")


class CurveSettings(Section):
    t_max: float = Field(1e8, gt=1, le=T_MAX_BOUND, description="the largest inverse temperature t = n beta")
    decades: float = Field(5.0, gt=0, le=24, description="the fitted window: the last decades of t")
    runs: int = Field(8, ge=2, le=256, description="independent SMC runs per case (their spread: the errors)")
    prior_std: float = Field(1.0, gt=0, le=SCALE_BOUND, description="the prior N(0, prior_std^2 I)")
    max_multiplicity: int = Field(3, ge=1, le=8, description="the largest candidate m")


class Settings(Experiment):
    kind: Literal["lambda_curve"]
    curve: CurveSettings = CurveSettings()
    mcmc: MCMCSettings | None = Field(None, description="when set, the estimator nuts_tempered_loss on every "
                                      "population case (not dslt_phase, whose ball NUTS does not keep, nor a data "
                                      "case)")
    sgld: SGLDCurveSettings | None = Field(None, description="when set, the estimator sgld_tempered_loss on every "
                                           "population case (not dslt_phase, nor a data case)")
    gibbs: GibbsSettings | None = Field(None, description="when set, the estimator gibbs_tempered_loss on every "
                                        "reduced_rank and deep_linear case")
    smc: SMCSection | None = Field(None, description="the SMC runs, for the estimators free_energy, tempered_loss "
                                    "and thermodynamic on every case (a target_ess near 1 gives the stages the fit "
                                    "needs: 0.9 gives 4-10 a decade); without it, [mcmc], [sgld] or [gibbs] reads "
                                    "the cases")
    cases: tuple[CaseSettings, ...] = Field(min_length=1, max_length=64, description="the losses")
