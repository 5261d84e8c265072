"""Figures of the learning coefficient read off free-energy curves (``slt_relu.kinds.lambda_curve_kind``)."""
from __future__ import annotations

import numpy as np

from ._style import figure_legend, subplots, suptitle

ESTIMATOR_STYLE = {"free_energy": ("C0", "o"), "tempered_loss": ("C1", "s"), "thermodynamic": ("C2", "^"),
                   "gibbs_tempered_loss": ("navy", "v"), "nuts_tempered_loss": ("C7", "D"),
                   "sgld_tempered_loss": ("olive", "P")}
CASE_COLORS = ("C3", "C4", "C5", "C6", "C8", "C9")          # the right panel's cases: none of the estimators' colours


def _at_exact_m(row: dict, est: str):
    """(lambda, se) of estimator ``est`` at the row's exact m where the fit left m unidentified and reported
    lambda for another m, else None."""
    v, at = row["estimators"][est], str(row.get("m_exact"))
    if row["lambda_exact"] is None or v["m"] is not None or at not in v.get("lambda_se_by_m", {}):
        return None
    return None if v["lambda_by_m"][at] == v["lambda"] else (v["lambda_by_m"][at], v["lambda_se_by_m"][at])


def lambda_curve_figure(rows: list, curves: list):
    """Two panels: each case's lambda by every estimator the rows have (among ESTIMATOR_STYLE) relative to the
    exact value, with 2 standard errors and the +-5 % band (where the fit leaves m unidentified, also the fit at the exact m as open markers; a row's
    ``reference`` estimate, e.g. SGLD's, as a black cross); and t E_t[K] / lambda
    against log10 t (every run), which rises to 1 as t grows (below it by (m - 1) / log t for m > 1), coloured by
    m, or by case where there are at most ``len(CASE_COLORS)`` cases.  A row without an exact value (lambda_exact
    None) is listed without points.

    Args:
        rows: the kind's metrics rows (name, lambda_exact, m_exact, estimators: {name: {lambda, lambda_se, m,
            optionally lambda_by_m, lambda_se_by_m}}, optionally reference: {name, estimate, se}).
        curves: their :class:`slt_relu.TemperedCurve`, one per row.

    Returns:
        the Figure.
    """
    n = len(rows)
    fig, (ax, ax2) = subplots(1, 2, figsize=(11, max(3.2, 1.2 + 0.32 * n)))
    by_case = n <= len(CASE_COLORS)
    y = np.arange(n)
    exact = np.array([np.nan if r["lambda_exact"] is None else r["lambda_exact"] for r in rows], float)
    drawn = [e for e in ESTIMATOR_STYLE if any(e in r["estimators"] for r in rows)]
    step = 0.78 / len(drawn)
    for j, est in enumerate(drawn):
        color, marker = ESTIMATOR_STYLE[est]
        get = lambda r, key: r["estimators"][est][key] if est in r["estimators"] else np.nan
        rel = np.array([get(r, "lambda") for r in rows], float) / exact - 1
        se = np.array([get(r, "lambda_se") for r in rows], float) / exact
        offset = (j - (len(drawn) - 1) / 2) * step
        ax.errorbar(100 * rel, y + offset, xerr=200 * se, fmt=marker, color=color, ms=4, lw=1,
                    label=est.replace("_", " "))
        at = [i for i, r in enumerate(rows) if est in r["estimators"] and _at_exact_m(r, est) is not None]
        if at:                                  # m not identified: the same fit at the exact m, open markers
            lam, lam_se = np.array([_at_exact_m(rows[i], est) for i in at]).T
            ax.errorbar(100 * (lam / exact[at] - 1), y[at] + offset + 0.1, xerr=200 * lam_se / exact[at],
                        fmt=marker, color=color, mfc="none", ms=4, lw=0.8, ls="none",
                        label="open: at the exact m (m not identified)" if j == 0 else None)
    refs = [i for i, r in enumerate(rows) if r.get("reference") and np.isfinite(exact[i])]
    if refs:
        ref = [rows[i]["reference"] for i in refs]
        ax.errorbar([100 * (f["estimate"] / exact[i] - 1) for f, i in zip(ref, refs)], y[refs] + 0.42,
                    xerr=[200 * f["se"] / exact[i] for f, i in zip(ref, refs)], fmt="x", color="k", ms=5, lw=1,
                    label=ref[0]["name"] if len({f["name"] for f in ref}) == 1 else "reference")
    ax.axvspan(-5, 5, color="0.9", zorder=0, label="+-5 %")
    ax.axvline(0, color="0.4", lw=0.8)
    ax.set_yticks(y, [f"{r['name']}  ({r['lambda_exact']:.3g}, m {r['m_exact']})" if r["lambda_exact"] is not None
                      else f"{r['name']}  (no exact value)" for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("lambda / exact - 1 (%), bars: 2 standard errors")
    ax.set_ylabel("case (exact lambda, m)")
    for i, (r, c) in enumerate(zip(rows, curves)):
        if r["lambda_exact"] is None:
            continue
        source = r["estimators"][r.get("curve", "tempered_loss")]                # the estimator these runs are
        run_lstar = source.get("run_loss_min") or [0.0] * len(c.t)               # a data set's own L*
        for t, loss, lstar in zip(c.t, c.mean_loss, run_lstar):   # each run at its own stages
            ok = np.isfinite(t) & (t > 1)
            ax2.plot(np.log10(t[ok]), t[ok] * (loss[ok] - lstar) / r["lambda_exact"], lw=0.6, alpha=0.35,
                     color=CASE_COLORS[i] if by_case else "C3" if r["m_exact"] > 1 else "C0")
    for lo, hi in {tuple(r["t_range"]) for r in rows}:       # the fitted windows (one per distinct range)
        ax2.axvspan(np.log10(lo), np.log10(hi), color="0.5", alpha=0.12, lw=0, zorder=0)
    ax2.axhline(1, color="0.4", lw=0.8)
    ax2.set_xlabel("log10 t (shaded: the fitted windows)")
    ax2.set_ylabel("t (E_t[L] - L*) / exact lambda")
    ax2.set_ylim(0, 1.5)
    from matplotlib.lines import Line2D
    handles, labels = ax.get_legend_handles_labels()
    if by_case:
        shown = [i for i, r in enumerate(rows) if r["lambda_exact"] is not None]
        handles += [Line2D([], [], color=CASE_COLORS[i]) for i in shown]
        labels += [f"{rows[i]['name']} (right)" for i in shown]
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
