"""Learning coefficients: estimates against known values, beta sweeps, the SGLD calibration grid."""
from __future__ import annotations

import math

import numpy as np

from ._style import (figure_axes, figure_legend, fill, finish_panels, legend_right, log_ticks, panel_grid, subplots,
                     suptitle, wrap)

__all__ = ["beta_sweep_figure", "llc_calibration_figure", "llc_cases_figure", "llc_settings_figure"]


def llc_cases_figure(ds, *, title: str, ax=None):
    """Each case's learning-coefficient estimate (+- 2 standard errors) by method, a row per case: divided by the
    known value, with the +-10% band, when every case has one (and the exact finite-n value of the estimand as a
    grey bar where known: an estimate should meet the bar, not 1); otherwise the estimates themselves.

    Args:
        ds: the ``learning_coefficient`` kind's results Dataset, or the rows of it to draw (``ds.isel(row=...)``),
            or one of your own: along ``row`` the coordinates ``name`` (the case) and ``method``, and ``estimate``,
            ``se``, ``true_lambda`` (NaN: unknown); optionally ``row_localization`` (a beta sweep's nonzero one is
            drawn as "beta_sweep (localized)") and ``exact_finite_n`` (NaN: none).
        title: the axes' title (the error bars' meaning is appended).
        ax: draw into this axes (its figure is returned) instead of a new figure.

    Returns:
        the Figure.
    """
    R = ds.sizes["row"]
    nan = np.full(R, np.nan)
    loc = ds["row_localization"].values if "row_localization" in ds else nan
    exact_n = ds["exact_finite_n"].values if "exact_finite_n" in ds else nan
    rows = [{"name": str(name), "method": str(m) + (" (localized)" if m == "beta_sweep" and np.isfinite(g) and g
                                                    else ""),
             "estimate": est, "se": se, "true_lambda": lam, "exact_finite_n": exact}
            for name, m, g, est, se, lam, exact in zip(ds["name"].values, ds["method"].values, loc,
                                                       ds["estimate"].values, ds["se"].values,
                                                       ds["true_lambda"].values, exact_n)]
    names = list(dict.fromkeys(r["name"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    known = all(np.isfinite(r["true_lambda"]) for r in rows)
    labels = [fill(nm, 40) for nm in names]
    lines = sum(lab.count("\n") + 1 for lab in labels)
    fig, ax = figure_axes(ax, (8.4, 1.3 + 0.17 * lines + 0.1 * len(names) * len(methods)))
    step = 0.7 / max(len(methods), 1)                     # the methods of a case side by side within its row
    exact_labelled = False
    for k, m in enumerate(methods):
        first = True
        for r in rows:
            if r["method"] != m:
                continue
            i = names.index(r["name"]) + (k - (len(methods) - 1) / 2) * step
            scale = r["true_lambda"] if known else 1.0
            ax.errorbar(r["estimate"] / scale, i, xerr=2 * r["se"] / scale, fmt="o", color=f"C{k}", capsize=3,
                        label=m if first else None)
            if known and np.isfinite(r["exact_finite_n"]) and r["exact_finite_n"]:
                ax.vlines(r["exact_finite_n"] / scale, i - 0.5 * step, i + 0.5 * step, color="gray", lw=3,
                          label=None if exact_labelled else "exact finite-n value")
                exact_labelled = True
            first = False
    if known:
        ax.axvline(1.0, color="k", lw=1.5, label="known lambda")
        ax.axvspan(0.9, 1.1, color="k", alpha=0.08, label="+-10%")
        ax.set_xlabel("estimate / known lambda")
    else:
        ax.set_xlabel("lambda_hat")
    ax.set_yticks(range(len(names)), labels, fontsize=8)
    ax.set_ylim(len(names) - 0.5, -0.5)                   # the first case on top
    ax.set_ylabel("case")
    ax.grid(alpha=0.3)
    legend_right(ax, fontsize=8)
    ax.set_title(wrap(title + " (error bars: 2 standard errors)", 5.5, 10), fontsize=10)
    return fig


def beta_sweep_figure(ds, *, n: int):
    """E_beta[n L_n] against 1/beta per case with the weighted least-squares line (slope = lambda):
    E_beta[n L_n] = n E_t[L_n] at t = n beta, ``slt_relu.posterior.beta_sweep``.

    Args:
        ds: the ``learning_coefficient`` kind's results Dataset's beta-sweep rows (``ds.isel(row=...)``), a panel
            each: along ``row`` the coordinate ``name`` and ``true_lambda`` (NaN: unknown), ``estimate`` and ``se``
            (the slope), ``intercept``; along (row, beta_index) ``beta``, ``expected_nl``, ``expected_nl_se`` (NaN
            beyond a sweep's betas).
        n: the data sets' size.

    Returns:
        the Figure.
    """
    fig, axes, nrows = panel_grid(ds.sizes["row"], 3.6, 3.4, per_row=3)     # rows of 3: legible at page width
    for ax, i in zip(axes.flat, range(ds.sizes["row"])):
        row = ds.isel(row=i)
        lam, slope, slope_se = float(row["true_lambda"]), float(row["estimate"]), float(row["se"])
        betas = row["beta"].values
        kept = np.isfinite(betas)                     # NaN: beyond this sweep's betas
        t = 1 / betas[kept]
        v = row["expected_nl"].values[kept] - float(row["intercept"])
        ax.errorbar(t, v, yerr=2 * row["expected_nl_se"].values[kept], fmt="o", capsize=3, color="C0",
                    label="E_beta[n L_n] +- 2 se")
        tt = np.linspace(0, t.max() * 1.05, 50)
        ax.plot(tt, slope * tt, "-", color="C1", label="weighted least squares (slope = lambda_hat)")
        known = ""
        if np.isfinite(lam):
            ax.plot(tt, lam * tt, "k--", lw=1, label="known lambda")
            known = f", known {lam:.4g}"
        ax.axvline(math.log(n), color="gray", ls=":", lw=1)
        ax.set_xlabel("1 / beta (dotted: log n)")
        ax.set_ylabel("E_beta[n L_n] - intercept")
        ax.set_title(wrap(str(row["name"].values), 3.4, 8) + f"\nslope {slope:.3f} +- {slope_se:.3f}{known}", fontsize=8)
        ax.grid(alpha=0.3)
    figure_legend(fig, axes=axes.flat)
    return finish_panels(fig, f"beta sweep (n = {n}): E_beta[n L_n] = n L_n(w0) + lambda / beta", nrows)


def llc_calibration_figure(grid, *, true_lambda, title: str):
    """The calibration of the SGLD estimate of the local learning coefficient, three panels: lambda_hat against the
    step size, a line per localization gamma (with the known value: the settings whose estimate meets it), the MALA
    acceptance of the SGLD step (below about 0.9 the step size biases the estimate), and the mean trace
    n beta (L_n(w_t) - L_n(w*)) against the step for every setting (flat: stationary).

    Args:
        grid: a :class:`slt_relu.posterior.llc_tuning.Calibration` (``calibrate_llc``), or anything with its
            ``step_sizes`` (S,), ``localizations`` (G,), ``estimate``, ``se``, ``accept`` (S, G) and
            ``mean_trace`` (S, G, T).
        true_lambda: the known lambda (a number), or anything else (e.g. None) where it is not known.
        title: the figure's title.

    Returns:
        the Figure.
    """
    S, G = grid.estimate.shape
    fig, axes = subplots(1, 3, figsize=(16, 4.8))
    for j, gamma in enumerate(grid.localizations):
        axes[0].errorbar(grid.step_sizes, grid.estimate[:, j], yerr=2 * grid.se[:, j], marker="o", capsize=3,
                         label=f"gamma = {gamma:g}")
        axes[1].plot(grid.step_sizes, grid.accept[:, j], "o-", label=f"gamma = {gamma:g}")
    if isinstance(true_lambda, (int, float)):
        axes[0].axhline(true_lambda, color="k", ls="--", lw=1, label=f"known lambda = {true_lambda:g}")
    for ax, ylab, ttl in ((axes[0], "lambda_hat (+- 2 se)", "estimate"),
                          (axes[1], "MALA acceptance of the SGLD step", "acceptance")):
        ax.set_xscale("log")
        log_ticks(ax, grid.step_sizes, fmt="{:.3g}")
        ax.set_xlabel("step size")
        ax.set_ylabel(ylab)
        ax.set_title(f"{ttl} by step size and localization gamma", fontsize=8)
        ax.grid(alpha=0.3, which="both")
    T = grid.mean_trace.shape[-1]
    for i in range(S):
        for j in range(G):
            axes[2].plot(np.arange(T), grid.mean_trace[i, j], lw=0.7, color=f"C{j}",
                         alpha=0.35 + 0.65 * (i + 1) / S)
    if isinstance(true_lambda, (int, float)):
        axes[2].axhline(true_lambda, color="k", ls="--", lw=1)
    axes[2].set_xlabel("kept step (after burn-in)")
    axes[2].set_ylabel("n beta (L_n(w_t) - L_n(w*)), mean over chains")
    axes[2].set_title("traces (colour: gamma; shade: step size, light = small)", fontsize=8)
    axes[2].grid(alpha=0.3)
    figure_legend(fig, axes=[axes[0]], ncol=len(grid.localizations) + 1)      # one row
    return suptitle(fig, title)


def llc_settings_figure(choice, *, title: str = "The local learning coefficient's settings"):
    """What :func:`slt_relu.posterior.llc_tuning.choose_llc_settings` saw, three panels: the pilots' estimate
    (+- 2 standard errors) against the localization gamma (the chosen one marked: where the estimate stops
    moving), the step chosen at each gamma labelled with its MALA acceptance, and the chosen pilot's loss traces
    n beta (L_n(w_t) - L_n(w*)), a line per chain (flat and overlapping: stationary).  The reasons are the title's
    lines.

    Args:
        choice: a :class:`slt_relu.posterior.llc_tuning.SettingsChoice`.
        title: the figure's title.

    Returns:
        the Figure.
    """
    tried = np.isfinite(choice.estimate)
    g = choice.localizations[tried]
    fig, axes = subplots(1, 3, figsize=(16, 5.6))
    axes[0].errorbar(g, choice.estimate[tried], yerr=2 * choice.se[tried], marker="o", capsize=3, label="pilots")
    axes[0].axvline(choice.settings.localization, color="k", ls="--", lw=1,
                    label=f"chosen gamma = {choice.settings.localization:g}")
    axes[0].set_ylabel("lambda_hat (+- 2 se)")
    axes[0].set_title("estimate by localization", fontsize=8)
    axes[1].plot(g, choice.step_sizes[tried], "o-")
    for x, eps, acc in zip(g, choice.step_sizes[tried], choice.accept[tried]):
        axes[1].annotate(f"{acc:.4f}", (x, eps), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7)
    axes[1].set_yscale("log")
    axes[1].set_ylabel("step size")
    axes[1].set_title("the largest step with enough MALA acceptance (labels)", fontsize=8)
    for ax in axes[:2]:
        ax.set_xscale("log")
        log_ticks(ax, g, fmt="{:g}")
        ax.set_xlabel("localization gamma")
        ax.grid(alpha=0.3, which="both")
    for c, tr in enumerate(choice.trace):
        axes[2].plot(np.arange(tr.size), tr, lw=0.5, alpha=0.7, color=f"C{c % 10}")
    axes[2].set_xlabel("kept pilot step (after burn-in)")
    axes[2].set_ylabel("n beta (L_n(w_t) - L_n(w*))")
    axes[2].set_title("the chosen pilot's traces, a line per chain", fontsize=8)
    axes[2].grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    return suptitle(fig, "\n".join((title,) + tuple(choice.reasons)), fontsize=8)
