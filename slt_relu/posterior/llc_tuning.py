"""Choosing the learning coefficient's SGLD settings: a calibration grid over step sizes and localizations
(:func:`calibrate_llc`), read by ``slt_relu.plots.llc_calibration_figure``.

The estimator and its two biases (the localization's confinement, the Euler step's inflation) are
``slt_relu.posterior.llc``'s.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from .llc import LLCSettings, estimate_llc

__all__ = ["Calibration", "calibrate_llc"]


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
