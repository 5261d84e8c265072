"""The lambda_curve kind's readings of a case beside SMC's three fits (``slt_relu.kinds.lambda_curve_kind``): NUTS's,
SGLD's and the Gibbs sampler's estimand curves t E_t[L] read by the tempered_loss rule with their settings sections
(``lambda_curve_settings``: [mcmc], [sgld], [gibbs]), SMC's symmetry moves of a case and its exact free energy where it has one; each
reading's metrics entry and warnings are ``lambda_curve_report``'s."""
from __future__ import annotations

import numpy as np

from ..workflow.settings import ConfigError
from .lambda_curve_report import estimate_entry
from .lambda_curve_settings import LINEAR

__all__ = []   # nothing to import: a part of the kinds that import it, not an API

MIN_ACCEPT = 0.99            # SGLD's MALA acceptance below which its step's bias may not be small (a warning)



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
    sgld = sgld_tempered_loss_curve(
        key, c.loss, c.loss.true_point(), t_max, decades=decades, temperatures=sg.temperatures,
        chains=sg.chains, prior_std=cv.prior_std, accept_target=sg.accept_target, pilot_steps=sg.pilot_steps,
        num_steps=sg.num_steps, num_burnin=sg.num_burnin, thin=sg.thin)
    curve, accept = sgld.curve, sgld.accept_prob
    finite = np.all(np.isfinite(curve.mean_loss), axis=1)             # a run: chain r at every t
    if not finite.all():
        if finite.sum() < 2:
            raise ConfigError(f"{c.settings.name}: SGLD diverged in {int(np.sum(~finite))} of its {finite.size} runs "
                              f"(a chain without a finite mean loss): expected a smaller step (sgld.accept_target)")
        warnings.append(f"{c.settings.name}: {int(np.sum(~finite))} of SGLD's {finite.size} runs diverged at some t (a "
                        f"chain without a finite mean loss) and are left out of its fit (sgld.accept_target)")
        curve, accept = curve.select_runs(finite), accept[finite]
    fit = fit_learning_coefficient(curve, "tempered_loss", loss_min=0.0, decades=decades, points=sg.temperatures,
                                   max_multiplicity=cv.max_multiplicity, min_stages=sg.temperatures)
    low = float(np.min(accept))
    if low < MIN_ACCEPT:
        where = curve.t[np.unravel_index(np.argmin(accept), accept.shape)]
        warnings.append(f"{c.settings.name}: SGLD's mean MALA acceptance falls to {low:.3f} (at t = {where:.3g}): "
                        f"its step's bias may not be small (sgld.accept_target)")
    return curve, {**estimate_entry(fit), "grad_evals": curve.grad_evals, "accept_prob_min": low,
                   "step_scale": [float(k) for k in sgld.step_scale]}, fit


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
    return smc.replace(symmetry_moves=False), None


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
