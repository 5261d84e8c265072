"""Choosing the learning coefficient's SGLD settings: a calibration grid over step sizes and localizations
(:func:`calibrate_llc`, drawn by ``slt_relu.plots.llc_calibration_figure``), and :func:`choose_llc_settings`, which
picks the step size, the localization and the number of steps by stated criteria and says why:

1. the scale: the largest curvature of the tempered potential at w*, a = n beta h_max + gamma (h_max the top
   Hessian eigenvalue of L_n, matrix-free: ``slt_relu.hessian.top_eigenvalues``); Euler's variance in that
   direction is 1 / (a (1 - eps a / 4)) (``slt_relu.posterior.llc``), so candidate steps are fractions of 4 / a
   (of 4 / sqrt(a) with RMSProp, whose step in that direction is about eps sqrt(a));
2. the step: the largest candidate whose pilot chains' mean MALA acceptance is at least ``min_accept`` (0.999:
   measured, an acceptance of 0.99 still leaves the Euler step's +5 to +9 % on a quadratic and a normal crossing),
   first at the largest localization (the most curvature), again at the chosen one;
3. the localization: going down the candidates (weaker confinement, the estimate nearer the unconfined one) while
   the loss traces are stationary (split R-hat <= 1.05) and the estimate not negative, the
   first whose estimate is within 2 combined standard errors and 5 % of the previous candidate's (the plateau);
4. the steps: enough that the kept loss traces hold ``target_ess`` effective draws (the pilot's effective draws
   per step, ``slt_relu.diagnostics.ess``), the pilot's burn-in kept.

The estimator and its two biases (the localization's confinement, the Euler step's inflation) are
``slt_relu.posterior.llc``'s.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple, Sequence

import jax
import numpy as np

from .. import diagnostics as dg
from .._validate import check_count, check_number
from .llc import LLCSettings, estimate_llc, settings_and_n_beta

__all__ = ["Calibration", "SettingsChoice", "calibrate_llc", "choose_llc_settings"]


class Calibration(NamedTuple):
    """estimate_llc over step_sizes x localizations: estimate, se, accept, rhat arrays (S, G) and the
    traces' mean loss over time (S, G, T) (to see burn-in and drift)."""

    step_sizes: np.ndarray
    localizations: np.ndarray
    estimate: np.ndarray
    se: np.ndarray
    accept: np.ndarray
    rhat: np.ndarray
    mean_trace: np.ndarray
    n_beta: float
    init_loss: float


def calibrate_llc(key, loss_fn, params_star, data, step_sizes: Sequence[float], localizations: Sequence[float],
                  settings: LLCSettings = LLCSettings(), *, devices=None) -> Calibration:
    """Run :func:`estimate_llc` on a grid of step sizes and localizations (same key, the other
    settings from ``settings``), to choose settings where lambda_hat stops moving, the MALA acceptance
    is near 1 and the traces are flat; :func:`slt_relu.plots.llc_calibration_figure` draws it.

    Returns:
        :class:`Calibration`: (S, G) arrays over step_sizes (S,) x localizations (G,)."""
    S, G = len(step_sizes), len(localizations)
    if S < 1 or G < 1:
        raise ValueError(f"step_sizes, localizations: expected at least one of each, got {S} and {G}")
    est, se, acc, rh = (np.zeros((S, G)) for _ in range(4))
    traces = []
    out = None
    for i, eps in enumerate(step_sizes):
        row = []
        for j, gamma in enumerate(localizations):
            out = estimate_llc(key, loss_fn, params_star, data,
                               settings.replace(step_size=float(eps), localization=float(gamma)), devices=devices)
            d = out.details
            est[i, j], se[i, j], acc[i, j], rh[i, j] = out.lambda_, out.se, float(np.mean(d.accept_prob)), d.rhat
            row.append(d.n_beta * (d.loss_trace.mean(0) - d.init_loss))
        traces.append(row)
    return Calibration(np.asarray(step_sizes, float), np.asarray(localizations, float), est, se, acc, rh,
                       np.asarray(traces), out.details.n_beta, out.details.init_loss)


class SettingsChoice(NamedTuple):
    """Why :func:`choose_llc_settings` chose its settings.

    Attributes:
        settings: the chosen :class:`~slt_relu.posterior.llc.LLCSettings`.
        reasons: one sentence per choice (scale, step, localization, steps).
        h_max: the top Hessian eigenvalue of L_n at w*.
        localizations: (G,) the localizations tried, largest first (NaN past the last tried).
        step_sizes: (G,) the step chosen at each (the largest with MALA acceptance >= min_accept).
        accept: (G,) its pilots' mean MALA acceptance.
        estimate, se, rhat: (G,) the pilots' lambda_hat, its standard error and the loss traces' split R-hat.
        pilot_steps: (G,) each pilot's steps (ten relaxation times, at least ``pilot_steps``).
        trace: (C, T) the pilot loss traces n beta (L_n(w_t) - L_n(w*)) at the chosen settings.
        ess_per_step: the pilot's effective draws per chain and SGLD step at the chosen settings.
    """

    settings: LLCSettings
    reasons: tuple
    h_max: float
    localizations: np.ndarray
    step_sizes: np.ndarray
    accept: np.ndarray
    estimate: np.ndarray
    se: np.ndarray
    rhat: np.ndarray
    pilot_steps: np.ndarray
    trace: np.ndarray
    ess_per_step: float


def choose_llc_settings(key, loss_fn: Callable, params, data, base: LLCSettings = LLCSettings(), *,
                        localizations: Sequence[float] = (1000.0, 300.0, 100.0, 30.0, 10.0, 3.0, 1.0),
                        fractions: Sequence[float] = (0.1, 0.03, 0.01, 0.003, 0.001, 3e-4, 1e-4),
                        min_accept: float = 0.999, pilot_steps: int = 2000, target_ess: int = 1000,
                        max_steps: int = 200_000) -> tuple[LLCSettings, SettingsChoice]:
    """The step size, localization and number of steps of :func:`~slt_relu.posterior.llc.estimate_llc` for this
    loss at this point, by the criteria of the module docstring, from pilot runs.

    Args:
        key: a PRNG key.
        loss_fn: L_n(params, data) -> scalar, as estimate_llc's.
        params: the point w* (ideally a minimum: ``minimize_loss``).
        data: the data pytree.
        base: the settings the choice starts from (chains, n beta, batch size, preconditioner, thinning kept; the
            pilots use full-batch gradients, since the MALA acceptance compares the potential at both ends of a
            step on the same data).
        localizations: candidate gammas, tried from the largest down.
        fractions: candidate step sizes as fractions of 4 / a (RMSProp: 4 / sqrt(a)), tried from the largest down.
        min_accept: the least mean MALA acceptance a step may have.
        pilot_steps: the fewest SGLD steps of a pilot (its first half burned in); a pilot runs ten relaxation
            times 2 / (eps gamma) of the least confined direction if that is longer (RMSProp: 2 (delta +
            sqrt(gamma)) / (eps gamma), its step there being eps / (delta + sqrt(gamma))).
        target_ess: effective draws the chosen run's loss traces should hold (all chains).
        max_steps: the most steps per chain a pilot or the choice may take.

    Returns:
        (settings, :class:`SettingsChoice`); ``slt_relu.plots.llc_settings_figure`` draws the choice.

    References:
        Lau et al. 2023 (the estimator); the MALA acceptance as the step's criterion and the plateau over the
        localization follow Timaeus' sampling guide.
    """
    from ..hessian import top_eigenvalues

    s, n_beta = settings_and_n_beta(loss_fn, data, base)
    check_number(min_accept, "min_accept")
    if not 0 < min_accept < 1:
        raise ValueError(f"min_accept: expected a number in (0, 1), got {min_accept!r}")
    pilot_steps = check_count(pilot_steps, "pilot_steps", minimum=16)
    target_ess, max_steps = check_count(target_ess, "target_ess"), check_count(max_steps, "max_steps")
    gammas = np.sort(np.asarray(localizations, float))[::-1]
    fr = np.sort(np.asarray(fractions, float))[::-1]
    for name, v in (("localizations", gammas), ("fractions", fr)):
        if v.size < 1 or not np.all(np.isfinite(v)) or np.any(v <= 0):
            raise ValueError(f"{name}: expected positive finite numbers, got {v.tolist()}")
    k_hess, k_pilot = jax.random.split(key)
    h_max = max(float(top_eigenvalues(loss_fn, params, data, 1, k_hess)[0]), 0.0)
    rms = s.preconditioner == "rmsprop"
    pilot = s.replace(thin=1, n_beta=n_beta, batch_size=None)   # full batch: MALA compares U on the same data

    def run(eps, g, steps):
        return estimate_llc(k_pilot, loss_fn, params, data, pilot.replace(
            step_size=float(eps), localization=float(g), num_steps=int(steps), num_burnin=int(steps) // 2))

    def step_for(g):                        # (eps, its acceptance): the largest candidate meeting min_accept
        a = n_beta * h_max + g
        acc = float("nan")
        for eps in fr * 4 / (math.sqrt(a) if rms else a):
            e = run(eps, g, max(16, pilot_steps // 4))
            acc = float(np.nanmean(e.details.accept_prob))
            if acc >= min_accept and np.all(np.isfinite(e.details.loss_trace)):
                return eps, acc
        return None, acc

    G = gammas.size
    eps_g, acc_g, est, se, rh, steps_g = (np.full(G, np.nan) for _ in range(6))
    chosen, final, why = None, None, ""
    for j, g in enumerate(gammas):
        eps, acc = step_for(g)
        if eps is None:
            why = f"at the next, {g:g}, no candidate step reached a MALA acceptance of {min_accept} ({acc:.4f})"
            break
        relax = 2 / (eps * g) * ((s.rmsprop_epsilon + math.sqrt(g)) if rms else 1)   # RMSProp: G >= 1/(delta+sqrt(g))
        steps = max(pilot_steps, math.ceil(10 * relax))
        if steps > max_steps:
            why = f"the next, {g:g}, would need a pilot of {steps} > max_steps = {max_steps} steps"
            break
        e = run(eps, g, steps)
        eps_g[j], acc_g[j], steps_g[j], est[j], se[j], rh[j] = eps, acc, steps, e.lambda_, e.se, e.details.rhat
        if not (rh[j] <= 1.1 and est[j] >= 0):
            why = f"the next, {g:g}, was not stationary (split R-hat {rh[j]:.3f} > 1.1 or estimate {est[j]:.3g} < 0)"
            break
        chosen, final = j, e
        if j > 0 and abs(est[j] - est[j - 1]) <= 2 * math.hypot(se[j], se[j - 1]) + 0.05 * abs(est[j - 1]):
            why = (f"its estimate {est[j]:.3g} is within 2 standard errors and 5 % of the previous candidate's "
                   f"{est[j - 1]:.3g}: the plateau")
            break
        why = "the smallest candidate; the estimate was still moving (no plateau)"
    if chosen is None:
        raise ValueError(f"localizations: no candidate gave stationary pilot traces with an accepted step ({why}); "
                         "add larger localizations or smaller fractions")
    gamma, eps = gammas[chosen], eps_g[chosen]
    d = final.details
    trace = d.n_beta * (d.loss_trace - d.init_loss)
    C, T = trace.shape
    ess_per_step = float(dg.ess(trace)) / (C * T)
    burnin = int(steps_g[chosen]) // 2
    kept = min(max(math.ceil(target_ess / (C * ess_per_step)) if ess_per_step > 0 else max_steps, burnin),
               max_steps - burnin)
    settings = s.replace(step_size=float(eps), localization=float(gamma), num_burnin=burnin,
                         num_steps=burnin + kept)
    reasons = (f"scale: the top Hessian eigenvalue of L_n at w* is {h_max:.4g}: candidate steps are fractions of "
               f"4 / (n beta h_max + gamma){' ** 0.5' if rms else ''}",
               f"step {eps:.3g}: the largest candidate with MALA acceptance >= {min_accept} at gamma = {gamma:g} "
               f"(measured {acc_g[chosen]:.4f})",
               f"localization {gamma:g}: {why}",
               f"steps {settings.num_steps}: burn-in {burnin} (the pilot's), then {kept} steps; the pilot had "
               f"{ess_per_step:.3g} effective draws per chain and step, about {target_ess} over {C} chains"
               + (" (capped at max_steps)" if burnin + kept >= max_steps else ""))
    return settings, SettingsChoice(settings, reasons, h_max, gammas, eps_g, acc_g, est, se, rh, steps_g, trace,
                                    ess_per_step)
