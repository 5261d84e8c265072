"""The lambda_curve kind's readings of a case beside SMC's three fits (``slt_relu.kinds.lambda_curve_kind``): NUTS's,
SGLD's and the Gibbs sampler's estimand curves t E_t[L] read by the tempered_loss rule with their settings sections
([mcmc], [sgld], [gibbs]), each case's metrics entry of a fit, the warnings where two samplers' readings of the
same estimand disagree or where SMC's particles left the posterior, SMC's symmetry moves of a case and its free
energy against the exact one where the case has one."""
from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
from pydantic import Field, model_validator

from ..posterior.linear_gibbs import MAX_T as GIBBS_MAX_T
from ..sampling.sgld import burnin_below_steps
from ..settings import ConfigError, Section

MCMC_ESTIMATOR = "nuts_tempered_loss"
SGLD_ESTIMATOR = "sgld_tempered_loss"
GIBBS_ESTIMATOR = "gibbs_tempered_loss"
ESTIMAND_READINGS = ("tempered_loss", GIBBS_ESTIMATOR, MCMC_ESTIMATOR, SGLD_ESTIMATOR)   # the readings of t E_t[L]
MIN_ACCEPT = 0.99            # SGLD's MALA acceptance below which its step's bias may not be small (a warning)
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
        return burnin_below_steps(self)


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


def estimate_entry(fit) -> dict:
    """An estimator's entry of a case's metrics from its :class:`LambdaFit`."""
    return {"lambda": fit.lambda_, "lambda_se": fit.lambda_se, "lambda_se_runs": fit.lambda_se_runs, "m": fit.m,
            "m_candidates": list(fit.m_candidates),
            "lambda_by_m": {str(k): v for k, v in fit.lambda_by_m.items()},
            "lambda_se_by_m": {str(k): v for k, v in fit.lambda_se_by_m.items()},
            "chi2_by_m": {str(k): v for k, v in fit.chi2_by_m.items()},
            "residual_p": fit.residual_p, "reason": fit.reason, "t_range": list(fit.t_range), "loss_min": fit.loss_min,
            "run_loss_min": list(fit.run_loss_min)}


def estimand_disagreement(name: str, estimators: dict) -> list[str]:
    """Warnings where two samplers' readings of the same estimand t E_t[L] (SMC's tempered_loss, Gibbs's, NUTS's,
    SGLD's: each pair that ran; their windows named where they differ) differ by more than 3 combined standard
    errors at a common m,
    or where both identify m and their m differ: then at least one sampler does not sample the tempered posterior
    (an MCMC chain at large t keeps the branch of the singular set it reached during warm-up; SMC's particles cross
    between branches while t is small)."""
    present = [e for e in ESTIMAND_READINGS if e in estimators]
    out = []
    for j, first in enumerate(present):
        for second in present[j + 1:]:
            a, b = estimators[first], estimators[second]
            label = lambda e: "SMC's tempered_loss" if e == "tempered_loss" else e
            m = str(a["m"] if a["m"] is not None else b["m"] if b["m"] is not None else 1)
            diff = b["lambda_by_m"][m] - a["lambda_by_m"][m]
            se = float(np.hypot(a["lambda_se_by_m"][m], b["lambda_se_by_m"][m]))
            ra, rb = a.get("t_range"), b.get("t_range")
            windows = "" if ra is None or rb is None or np.allclose(ra, rb, rtol=1e-9) else \
                " (over t = {:.3g} .. {:.3g} and {:.3g} .. {:.3g})".format(*rb, *ra)
            if abs(diff) > 3 * se:
                out.append(f"{name}: {label(second)} and {label(first)} differ by {diff:+.4g} at m = {m}{windows} "
                           f"({abs(diff) / se:.1f} combined standard errors): one sampler misses part of the posterior"
                           + (" or a window is not asymptotic" if windows else ""))
            if a["m"] is not None and b["m"] is not None and a["m"] != b["m"]:
                out.append(f"{name}: {label(second)} identifies m = {b['m']}, {label(first)} m = {a['m']}")
    return out


REMEDY = {"SMC": "a smaller t_max, or more smc.num_mcmc_steps", "Gibbs": "a smaller t_max",
          "NUTS": "a smaller mcmc.t_max, or more mcmc.num_warmup", "SGLD": "a smaller sgld.t_max, or a higher "
          "sgld.accept_target"}


def left_the_posterior(name: str, curve, num_params: int, sampler: str = "SMC") -> list[str]:
    """A warning where a run's t E_t[K] on a population loss (SMC's, or a Gibbs, NUTS or SGLD chain's) passes
    D = num_params, or is not a number, at one of its t: every loss of D parameters has lambda <= D / 2 (the
    regular case is the largest), so a run that reads twice that has draws that left the tempered posterior
    (moves that diverged, or conditionals that lost float64's precision, at the largest t, where the posterior is
    narrowest)."""
    t = np.asarray(curve.t, float)
    y = t * np.asarray(curve.mean_loss, float)
    bad = np.isfinite(t) & ~(y <= num_params)                          # above D, or not a number at a stage
    if not bad.any():
        return []
    r, k = np.unravel_index(np.argmax(np.where(bad, np.nan_to_num(y, nan=np.inf), -np.inf)), y.shape)
    return [f"{name}: a run of {sampler} reaches t E_t[K] = {y[r, k]:.3g} at t = {curve.t[r, k]:.3g}, above the "
            f"{num_params} that no loss of {num_params} parameters reaches (lambda <= D / 2): its draws left the "
            f"posterior there, and its reading of this case is not to be trusted ({REMEDY[sampler]})"]


def nuts_reading(key, c, mc):
    """(curve, the nuts_tempered_loss entry, its fit) of a case: NUTS's t E_t[K] at mc.temperatures t over the
    case's window (or [mcmc]'s), read by the tempered_loss rule on a grid that is those temperatures; with the gradients the
    chains spent.  c: the kind's resolved ``Case``; mc: its [mcmc] settings."""
    from ..posterior.estimand_curve import mcmc_tempered_loss_curve
    from ..posterior.free_energy_curve import fit_learning_coefficient
    from ..sampling import NUTSSettings

    cv = c.curve
    t_max, decades = mc.window(cv)
    curve = mcmc_tempered_loss_curve(key, c.loss, c.num_params, t_max, decades=decades,
                                     temperatures=mc.temperatures, chains=mc.chains, prior_std=cv.prior_std,
                                     settings=NUTSSettings(num_warmup=mc.num_warmup, num_samples=mc.num_samples))
    fit = fit_learning_coefficient(curve, "tempered_loss", decades=decades, points=mc.temperatures,
                                   max_multiplicity=cv.max_multiplicity, min_stages=mc.temperatures)
    return curve, {**estimate_entry(fit), "grad_evals": curve.grad_evals}, fit


def sgld_reading(key, c, sg, warnings: list):
    """(curve, the sgld_tempered_loss entry, its fit) of a population case: full-batch SGLD's t E_t[K] at
    sg.temperatures t over the case's window (or [sgld]'s), every chain from the true set's deepest point (the loss's
    ``true_point``: estimate_llc's w*), each t's step chosen by pilot chains' MALA acceptance, read by the
    tempered_loss rule; with the gradients spent (pilots included), each t's t eps_t and the chains' lowest mean
    MALA acceptance (a warning in ``warnings`` below MIN_ACCEPT).  A run with a diverged chain (no finite mean loss)
    is left out of the fit with a warning; ConfigError where fewer than two runs remain.
    c: the kind's resolved ``Case``; sg: its [sgld] settings."""
    from ..posterior.estimand_curve import sgld_tempered_loss_curve
    from ..posterior.free_energy_curve import fit_learning_coefficient

    cv = c.curve
    t_max, decades = sg.window(cv)
    curve, accept, step_scale = sgld_tempered_loss_curve(
        key, c.loss, c.loss.true_point(), t_max, decades=decades, temperatures=sg.temperatures,
        chains=sg.chains, prior_std=cv.prior_std, accept_target=sg.accept_target, pilot_steps=sg.pilot_steps,
        num_steps=sg.num_steps, num_burnin=sg.num_burnin, thin=sg.thin)
    finite = np.all(np.isfinite(curve.mean_loss), axis=1)             # a run: chain r at every t
    if not finite.all():
        if finite.sum() < 2:
            raise ConfigError(f"{c.settings.name}: SGLD diverged in {int(np.sum(~finite))} of its {finite.size} runs "
                              f"(a chain without a finite mean loss): expected a smaller step (sgld.accept_target)")
        warnings.append(f"{c.settings.name}: {int(np.sum(~finite))} of SGLD's {finite.size} runs diverged at some t (a "
                        f"chain without a finite mean loss) and are left out of its fit (sgld.accept_target)")
        curve = curve._replace(t=curve.t[finite], free_energy=curve.free_energy[finite],
                               mean_loss=curve.mean_loss[finite], prior_mean_loss=curve.prior_mean_loss[finite])
        accept = accept[finite]
    fit = fit_learning_coefficient(curve, "tempered_loss", loss_min=0.0, decades=decades, points=sg.temperatures,
                                   max_multiplicity=cv.max_multiplicity, min_stages=sg.temperatures)
    low = float(np.min(accept))
    if low < MIN_ACCEPT:
        where = curve.t[np.unravel_index(np.argmin(accept), accept.shape)]
        warnings.append(f"{c.settings.name}: SGLD's mean MALA acceptance falls to {low:.3f} (at t = {where:.3g}): "
                        f"its step's bias may not be small (sgld.accept_target)")
    return curve, {**estimate_entry(fit), "grad_evals": curve.grad_evals, "accept_prob_min": low,
                   "step_scale": [float(k) for k in step_scale]}, fit


def gibbs_reading(key, c, gs, run_data):
    """(curve, the gibbs_tempered_loss entry, its fit) of a reduced_rank or deep_linear case: the Gibbs sampler's
    t E_t[L] at gs.temperatures t over the case's window (a data case: chain r on run r's data set, so there are
    curve.runs chains), read by the tempered_loss rule; with the sweeps the chains spent.  c: the kind's resolved
    ``Case``; gs: its [gibbs] settings; run_data: the data sets' statistics (``regression_statistics``) or None."""
    from ..posterior.free_energy_curve import fit_learning_coefficient
    from ..posterior.linear_gibbs import linear_gibbs_curve

    cv = c.curve
    t_max, decades = gs.window(cv)
    chains = gs.chains if run_data is None else cv.runs
    curve = linear_gibbs_curve(key, c.loss.widths, t_max, decades=decades, temperatures=gs.temperatures,
                               chains=chains, burn_in=gs.burn_in, sweeps=gs.sweeps, prior_std=cv.prior_std,
                               target=None if run_data is not None else np.asarray(c.loss.target),
                               run_data=run_data)
    fit = fit_learning_coefficient(curve, "tempered_loss", loss_min=0.0 if run_data is None else None,
                                   decades=decades, points=gs.temperatures, max_multiplicity=cv.max_multiplicity,
                                   min_stages=gs.temperatures)
    return curve, {**estimate_entry(fit), "sweeps": chains * gs.temperatures * (gs.burn_in + gs.sweeps)}, fit


def smc_moves(smc, c):
    """(SMC's settings for a case, its symmetry proposal or None); c: the kind's resolved ``Case``.  With
    smc.symmetry_moves, a reduced_rank or deep_linear case with a hidden layer gets its GL(H) reparametrization
    (``slt_relu.moves.LayerReparametrization``: its loss depends on the product of the layers alone); every other
    case has no continuous symmetry the kind knows, and runs without."""
    from ..moves import LayerReparametrization

    if smc.symmetry_moves and c.settings.family in LINEAR and len(c.loss.widths) > 2:
        return smc, LayerReparametrization(tuple(c.loss.widths))
    return smc.model_copy(update={"symmetry_moves": False}), None


def exact_free_energy(c, run_data=None):
    """A case's exact F(t) (``slt_relu.posterior.exact_free_energy``), or None; c: the kind's resolved ``Case``,
    run_data: its runs' data statistics (S, G, P0), each (runs, ...), or None.  Two-parameter normal crossings and
    zero-truth reduced rank with one hidden unit on the population loss (by quadrature), and the regular family (in
    closed form): on the population loss one F for every run, from data sets each run's own (its H = S, g = G)."""
    import functools

    from ..posterior.exact_free_energy import (gaussian_free_energy, normal_crossing_free_energy,
                                               reduced_rank_one_free_energy)

    s, std = c.settings, c.curve.prior_std
    if s.family == "regular":
        if run_data is None:
            return functools.partial(gaussian_free_energy, np.asarray(c.loss.hessian), prior_std=std)
        S, G = np.asarray(run_data[0], np.float64), np.asarray(run_data[1], np.float64)
        if np.any(np.asarray(run_data[2]) != 0):       # the closed form is about w0 = 0 (the kind's regular truth)
            return None
        return [functools.partial(gaussian_free_energy, S[r], gradient=G[r, 0], prior_std=std) for r in range(len(S))]
    if s.n is not None:
        return None
    if s.family == "normal_crossing" and len(s.k) == 2:
        return functools.partial(normal_crossing_free_energy, tuple(s.k), prior_std=std)
    if s.family == "reduced_rank" and s.hidden == 1 and s.true_rank == 0:
        return functools.partial(reduced_rank_one_free_energy, s.input_dim, s.output_dim, prior_std=std)
    return None


def exact_free_energy_check(name: str, exact, curve, t_range, warnings: list) -> dict:
    """A case's SMC free energy against its exact one over the fitted window (``exact``: one function of t or each
    run's, ``exact_free_energy.check_free_energy``; an evidence independent of SMC's): the largest |z| of the runs' mean
    residual over the window's grid against the Student-t bound at alpha = 0.01 (Bonferroni over the grid), the
    largest |mean residual| in nats; a warning where |z| passes the bound (SMC's curve departs from the exact one)."""
    from scipy.stats import t as student

    from ..posterior.exact_free_energy import check_free_energy

    chk = check_free_energy(curve, exact, *t_range)
    bound = float(student.ppf(1 - 0.01 / (2 * len(chk.t)), len(curve.t) - 1))
    out = {"max_abs_z": float(np.max(np.abs(chk.z))), "bound": bound,
           "max_abs_residual": float(np.max(np.abs(chk.mean)))}
    if out["max_abs_z"] > bound:
        warnings.append(f"{name}: SMC's free energy departs from the exact one by "
                        f"{out['max_abs_residual']:.3g} nats (|z| {out['max_abs_z']:.1f} > {bound:.1f}) over "
                        f"t = {t_range[0]:.3g} .. {t_range[1]:.3g}")
    return out
