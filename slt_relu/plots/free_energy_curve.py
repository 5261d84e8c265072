"""Figures of the learning coefficient read off free-energy curves (``slt_relu.kinds.lambda_curve_kind``)."""
from __future__ import annotations

import numpy as np

from ._style import figure_legend, subplots, suptitle

ESTIMATOR_STYLE = {"free_energy": ("C0", "o"), "tempered_loss": ("C1", "s"), "thermodynamic": ("C2", "^")}


def lambda_curve_figure(rows: list, curves: list):
    """Two panels: each case's lambda by every estimator relative to the exact value, with 2 standard errors
    and the +-5 % band; and t E_t[K] / lambda against log10 t (every run), which rises to 1 as t grows
    (below it by (m - 1) / log t for m > 1).

    Args:
        rows: the kind's metrics rows (name, lambda_exact, m_exact, estimators: {name: {lambda, lambda_se, m}}).
        curves: their :class:`slt_relu.posterior.free_energy_curve.FreeEnergyCurve`, one per row.

    Returns:
        the Figure.
    """
    n = len(rows)
    fig, (ax, ax2) = subplots(1, 2, figsize=(11, 1.2 + 0.32 * n))
    y = np.arange(n)
    for j, (est, (color, marker)) in enumerate(ESTIMATOR_STYLE.items()):
        rel = np.array([r["estimators"][est]["lambda"] / r["lambda_exact"] - 1 for r in rows])
        se = np.array([r["estimators"][est]["lambda_se"] / r["lambda_exact"] for r in rows])
        ax.errorbar(100 * rel, y + (j - 1) * 0.22, xerr=200 * se, fmt=marker, color=color, ms=4, lw=1,
                    label=est.replace("_", " "))
    ax.axvspan(-5, 5, color="0.9", zorder=0, label="+-5 %")
    ax.axvline(0, color="0.4", lw=0.8)
    ax.set_yticks(y, [f"{r['name']}  ({r['lambda_exact']:.3g}, m {r['m_exact']})" for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("lambda / exact - 1 (%), bars: 2 standard errors")
    ax.set_ylabel("case (exact lambda, m)")
    for r, c in zip(rows, curves):
        for t, loss in zip(c.t, c.mean_loss):                 # each run at its own stages
            ok = np.isfinite(t) & (t > 1)
            ax2.plot(np.log10(t[ok]), t[ok] * loss[ok] / r["lambda_exact"], lw=0.6,
                     color="C3" if r["m_exact"] > 1 else "C0", alpha=0.35)
    lo, hi = rows[0]["t_range"]
    ax2.axvspan(np.log10(lo), np.log10(hi), color="0.93", zorder=0)
    ax2.axhline(1, color="0.4", lw=0.8)
    ax2.set_xlabel("log10 t (shaded: the fitted window)")
    ax2.set_ylabel("t E_t[K] / exact lambda")
    ax2.set_ylim(0, 1.5)
    from matplotlib.lines import Line2D
    handles, labels = ax.get_legend_handles_labels()
    handles += [Line2D([], [], color="C0"), Line2D([], [], color="C3")]
    labels += ["m = 1 (right)", "m > 1 (right)"]
    figure_legend(fig, handles, labels, ncol=6)
    suptitle(fig, "lambda from tempered SMC's free-energy curves against the exact values")
    return fig
