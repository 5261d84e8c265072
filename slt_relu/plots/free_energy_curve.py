"""Figures of the learning coefficient read off free-energy curves: the ``lambda_curve`` kind's results Dataset."""
from __future__ import annotations

import numpy as np

from ._style import figure_legend, subplots, suptitle

__all__ = ["lambda_curve_figure"]

ESTIMATOR_STYLE = {"free_energy": ("C0", "o"), "tempered_loss": ("C1", "s"), "thermodynamic": ("C2", "^"),
                   "gibbs_tempered_loss": ("navy", "v"), "nuts_tempered_loss": ("C7", "D"),
                   "sgld_tempered_loss": ("olive", "P")}
CASE_COLORS = ("C3", "C4", "C5", "C6", "C8", "C9")          # the right panel's cases: none of the estimators' colours


def lambda_curve_figure(ds):
    """Two panels: each case's lambda by every estimator the Dataset has (among ESTIMATOR_STYLE) relative to the
    exact value, with 2 standard errors and the +-5 % band (where the fit leaves m unidentified, also the fit at the
    exact m as open markers; a case's reference estimate, e.g. SGLD's, as a black cross); and t (E_t[L] - L*) / lambda
    against log10 t (every run), which rises to 1 as t grows (below it by (m - 1) / log t for m > 1), coloured by
    m, or by case where there are at most ``len(CASE_COLORS)`` cases.  A case without an exact value (NaN) is listed
    without points.

    Args:
        ds: the ``lambda_curve`` kind's results Dataset, or one of your own: along (case, estimator) ``lambda``,
            ``lambda_se``; per case ``lambda_exact``, ``m_exact``; the curves ``t``, ``mean_loss`` (case, run,
            stage; NaN: padding).  Optionally: ``lambda_at_exact_m``, ``lambda_se_at_exact_m`` (case, estimator);
            ``window`` (case, bound), shaded; ``reference_lambda``, ``reference_se`` and the coordinate
            ``reference_name`` per case ('' for none); ``run_loss_min`` (case, run), L* of each run (default 0).

    Returns:
        the Figure.
    """
    cases = [str(c) for c in ds["case"].values]
    estimators = [str(e) for e in ds["estimator"].values]
    n = len(cases)
    fig, (ax, ax2) = subplots(1, 2, figsize=(11, max(3.2, 1.2 + 0.32 * n)))
    by_case = n <= len(CASE_COLORS)
    y = np.arange(n)
    exact = ds["lambda_exact"].values.astype(float)
    m_exact = ds["m_exact"].values
    drawn = [e for e in ESTIMATOR_STYLE if e in estimators and np.isfinite(ds["lambda"].sel(estimator=e).values).any()]
    step = 0.78 / len(drawn)
    for j, est in enumerate(drawn):
        color, marker = ESTIMATOR_STYLE[est]
        v = ds.sel(estimator=est)
        rel = v["lambda"].values / exact - 1
        se = v["lambda_se"].values / exact
        offset = (j - (len(drawn) - 1) / 2) * step
        ax.errorbar(100 * rel, y + offset, xerr=200 * se, fmt=marker, color=color, ms=4, lw=1,
                    label=est.replace("_", " "))
        nan = np.full(n, np.nan)
        lam = v["lambda_at_exact_m"].values if "lambda_at_exact_m" in v else nan
        lam_se = v["lambda_se_at_exact_m"].values if "lambda_se_at_exact_m" in v else nan
        at = np.flatnonzero(np.isfinite(lam) & np.isfinite(exact))
        if at.size:                             # m not identified: the same fit at the exact m, open markers
            ax.errorbar(100 * (lam[at] / exact[at] - 1), y[at] + offset + 0.1, xerr=200 * lam_se[at] / exact[at],
                        fmt=marker, color=color, mfc="none", ms=4, lw=0.8, ls="none",
                        label="open: at the exact m (m not identified)" if j == 0 else None)
    ref_names = [str(r) for r in ds["reference_name"].values] if "reference_name" in ds.coords else [""] * n
    refs = [i for i in range(n) if ref_names[i] and np.isfinite(exact[i])]
    if refs:
        ref, ref_se = ds["reference_lambda"].values, ds["reference_se"].values
        ax.errorbar(100 * (ref[refs] / exact[refs] - 1), y[refs] + 0.42, xerr=200 * ref_se[refs] / exact[refs],
                    fmt="x", color="k", ms=5, lw=1,
                    label=ref_names[refs[0]] if len({ref_names[i] for i in refs}) == 1 else "reference")
    ax.axvspan(-5, 5, color="0.9", zorder=0, label="+-5 %")
    ax.axvline(0, color="0.4", lw=0.8)
    ax.set_yticks(y, [f"{name}  ({exact[i]:.3g}, m {m_exact[i]})" if np.isfinite(exact[i])
                      else f"{name}  (no exact value)" for i, name in enumerate(cases)], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("lambda / exact - 1 (%), bars: 2 standard errors")
    ax.set_ylabel("case (exact lambda, m)")
    for i in range(n):
        if not np.isfinite(exact[i]):
            continue
        lstars = ds["run_loss_min"].values[i] if "run_loss_min" in ds else np.zeros(len(ds["t"].values[i]))
        for t, loss, lstar in zip(ds["t"].values[i], ds["mean_loss"].values[i], lstars):
            ok = np.isfinite(t) & (t > 1)                     # each run at its own stages (NaN: padding)
            if not ok.any():
                continue
            ax2.plot(np.log10(t[ok]), t[ok] * (loss[ok] - lstar) / exact[i], lw=0.6, alpha=0.35,
                     color=CASE_COLORS[i] if by_case else "C3" if m_exact[i] > 1 else "C0")
    windows = ds["window"].values.tolist() if "window" in ds else []
    for lo, hi in {tuple(w) for w in windows}:                            # the fitted windows (one per distinct range)
        ax2.axvspan(np.log10(lo), np.log10(hi), color="0.5", alpha=0.12, lw=0, zorder=0)
    ax2.axhline(1, color="0.4", lw=0.8)
    ax2.set_xlabel("log10 t" + (" (shaded: the fitted windows)" if windows else ""))
    ax2.set_ylabel("t (E_t[L] - L*) / exact lambda")
    ax2.set_ylim(0, 1.5)
    from matplotlib.lines import Line2D
    handles, labels = ax.get_legend_handles_labels()
    if by_case:
        shown = [i for i in range(n) if np.isfinite(exact[i])]
        handles += [Line2D([], [], color=CASE_COLORS[i]) for i in shown]
        labels += [f"{cases[i]} (right)" for i in shown]
    else:
        handles += [Line2D([], [], color="C0"), Line2D([], [], color="C3")]
        labels += ["m = 1 (right)", "m > 1 (right)"]
    figure_legend(fig, handles, labels, ncol=min(len(handles), 5 if by_case else 6))
    names = {"tempered_loss": "tempered SMC's free-energy curves", "gibbs_tempered_loss": "Gibbs's estimand",
             "nuts_tempered_loss": "NUTS's estimand", "sgld_tempered_loss": "SGLD's estimand"}
    sources = [v for k, v in names.items() if k in drawn]
    listed = sources[0] if len(sources) == 1 else ", ".join(sources[:-1]) + " and " + sources[-1]
    suptitle(fig, f"lambda from {listed} against the exact values")
    return fig
